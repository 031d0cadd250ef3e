// Key files and the key ring: parsing, constant-time lookup, reloads.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "api/auth/tenants.h"

namespace prefixd::api {
namespace {

KeyRing parsed(std::string_view text) {
  auto ring = KeyRing::parse(text);
  EXPECT_TRUE(ring.has_value()) << ring.error();
  return ring ? std::move(*ring) : KeyRing{};
}

std::string error_of(std::string_view text) {
  auto ring = KeyRing::parse(text);
  EXPECT_FALSE(ring.has_value()) << text;
  return ring ? std::string() : ring.error();
}

TEST(KeyRing, ParsesKeysTenantsAdminCommentsAndBlankLines) {
  const KeyRing ring = parsed(
      "# tenants of the staging server\n"
      "\n"
      "key-alpha-1   alpha\n"
      "\tkey-alpha-2 alpha   # a second key of alpha\n"
      "key-beta beta admin\r\n"
      "   \n");
  EXPECT_EQ(ring.size(), 3u);
  EXPECT_EQ(ring.find("key-alpha-1"), (Tenant{"alpha", false}));
  EXPECT_EQ(ring.find("key-alpha-2"), (Tenant{"alpha", false}));
  EXPECT_EQ(ring.find("key-beta"), (Tenant{"beta", true}));
  EXPECT_EQ(ring.tenants(), (std::vector<std::string>{"alpha", "beta"}));
}

TEST(KeyRing, UnknownKeysPrefixesAndExtensionsOfKeysFindNothing) {
  const KeyRing ring = parsed("key-alpha alpha\n");
  EXPECT_FALSE(ring.find("").has_value());
  EXPECT_FALSE(ring.find("key-alph").has_value());
  EXPECT_FALSE(ring.find("key-alphaa").has_value());
  EXPECT_FALSE(ring.find("KEY-ALPHA").has_value());
  EXPECT_FALSE(ring.find("alpha").has_value()) << "a tenant id is not a key";
}

TEST(KeyRing, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("a-key alpha\nlonely-key\n"), "line 2: expected 'KEY TENANT [admin]'");
  EXPECT_TRUE(error_of("# c\n\nk1 alpha root\n").starts_with("line 3: the third field must be 'admin'"));
  EXPECT_TRUE(error_of("k1 alpha admin extra\n").starts_with("line 1: unexpected 'extra'"));
  EXPECT_TRUE(error_of("k1 ../etc\n").starts_with("line 1: tenant '../etc' is not a valid id"));
  EXPECT_TRUE(error_of("k1 .hidden\n").starts_with("line 1: tenant '.hidden'"));
  EXPECT_TRUE(error_of("k1 " + std::string(65, 't') + "\n").starts_with("line 1: tenant"));
  EXPECT_EQ(error_of("k1 alpha\nk2 beta\nk1 beta\n"), "line 3: the same key is already given on line 1");
  EXPECT_EQ(error_of("k\x01y alpha\n"), "line 1: the key must be visible ASCII characters");
  EXPECT_EQ(error_of("# nothing but comments\n\n"), "no key in the file: every request would be refused");
  EXPECT_EQ(error_of(""), "no key in the file: every request would be refused");
}

TEST(KeyRing, TheApiKeyShortcutIsTheDefaultTenantsAdminKey) {
  const KeyRing ring = KeyRing::single("sekret");
  EXPECT_EQ(ring.find("sekret"), (Tenant{std::string(kDefaultTenant), true}));
  EXPECT_FALSE(ring.find("sekre").has_value());
}

TEST(KeyRing, ConstantTimeEqualComparesWholeStrings) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

class KeyFile {
 public:
  KeyFile() : path_(std::filesystem::temp_directory_path() / ("prefixd-keys-" + std::to_string(::getpid()))) {}
  ~KeyFile() { std::filesystem::remove(path_); }
  void write(const std::string& text) const { std::ofstream(path_, std::ios::trunc) << text; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(KeyStore, AReloadSwapsTheRingAndAFailedOneKeepsTheOld) {
  KeyFile file;
  file.write("old-key alpha\n");
  auto ring = KeyRing::load(file.path());
  ASSERT_TRUE(ring) << ring.error();
  KeyStore store(std::move(*ring), file.path());
  const std::shared_ptr<const KeyRing> before = store.current();
  EXPECT_TRUE(before->find("old-key"));

  file.write("new-key beta admin\n");
  const auto reloaded = store.reload();
  ASSERT_TRUE(reloaded) << reloaded.error();
  EXPECT_EQ(*reloaded, "1 keys of 1 tenants");
  EXPECT_FALSE(store.current()->find("old-key"));
  EXPECT_EQ(store.current()->find("new-key"), (Tenant{"beta", true}));
  EXPECT_TRUE(before->find("old-key")) << "a request holding the old ring keeps a consistent view";

  file.write("new-key beta admin\nbroken\n");
  const auto failed = store.reload();
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().find("line 2"), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find(file.path().string()), std::string::npos) << "the error names the file";
  EXPECT_TRUE(store.current()->find("new-key")) << "a failed reload keeps the keys in use";

  std::filesystem::remove(file.path());
  EXPECT_FALSE(store.reload());
  EXPECT_TRUE(store.current()->find("new-key"));
}

}  // namespace
}  // namespace prefixd::api
