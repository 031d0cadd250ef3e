// The model fingerprint: a digest of every byte of the GGUF, so equal shapes with other weights
// never share a namespace and the same bytes anywhere always do; the fingerprint cache answers
// for an unchanged file without rehashing it and never trusts a changed or unreadable record.
#include <ggml-cpp.h>
#include <gguf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "api/prompt/cache_namespace.h"
#include "engine/engine.h"
#include "engine/model_fingerprint.h"
#include "modelgen/modelgen.h"

namespace prefixd::engine {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

std::size_t tensor_data_offset(const fs::path& path) {
  gguf_context_ptr gguf(gguf_init_from_file(path.c_str(), {/*no_alloc=*/true, /*ctx=*/nullptr}));
  EXPECT_TRUE(gguf) << path;
  return gguf ? gguf_get_data_offset(gguf.get()) : 0;
}

std::string namespace_of(const std::string& fingerprint) {
  return api::namespace_digest(api::NamespaceFields{.model_id = fingerprint, .runtime_signature = "type_k=f16;"});
}

// Two tiny models generated once for the suite: `a` (seed 1) and `twin`, whose metadata and tensor
// layout are a's byte for byte and whose tensor data are those of seed 2 — the case a digest of
// shapes and sizes cannot tell apart.
class ModelFingerprint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("prefixd-fingerprint-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (auto [name, seed] : {std::pair{"a.gguf", 1}, std::pair{"b.gguf", 2}}) {
      modelgen::generate_model({.preset = "tiny", .out_path = (dir_ / name).string(), .seed = std::uint64_t(seed), .quiet = true});
    }
    const std::string a = read_bytes(dir_ / "a.gguf");
    const std::string b = read_bytes(dir_ / "b.gguf");
    const std::size_t offset = tensor_data_offset(dir_ / "a.gguf");
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(offset, tensor_data_offset(dir_ / "b.gguf"));
    ASSERT_GT(offset, 0u);
    write_bytes(dir_ / "twin.gguf", a.substr(0, offset) + b.substr(offset));
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // A scratch directory of the test's own, inside the suite's.
  fs::path scratch() {
    const fs::path path = dir_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(path);
    return path;
  }

  static fs::path model_a() { return dir_ / "a.gguf"; }
  static fs::path twin() { return dir_ / "twin.gguf"; }

  static inline fs::path dir_;
};

TEST_F(ModelFingerprint, IsA128BitHexDigestOfTheFile) {
  const std::string digest = hash_model_file(model_a());
  EXPECT_EQ(digest.size(), 32u);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << digest;
  EXPECT_EQ(hash_model_file(model_a()), digest);
  EXPECT_THROW(hash_model_file(scratch() / "missing.gguf"), std::runtime_error);
}

TEST_F(ModelFingerprint, EqualShapesAndMetadataWithOtherWeightsGetAnotherFingerprintAndNamespace) {
  // Same metadata bytes, same tensor shapes, same size: only the weights differ.
  const std::string a = read_bytes(model_a());
  const std::string b = read_bytes(twin());
  const std::size_t offset = tensor_data_offset(model_a());
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.substr(0, offset), b.substr(0, offset));
  ASSERT_NE(a.substr(offset), b.substr(offset));

  const ModelInfo info_a = inspect_model(model_a().string());
  const ModelInfo info_b = inspect_model(twin().string());
  EXPECT_EQ(info_a.n_params, info_b.n_params);
  EXPECT_EQ(info_a.model_bytes, info_b.model_bytes);
  EXPECT_EQ(info_a.fingerprint, hash_model_file(model_a()));
  EXPECT_NE(info_a.fingerprint, info_b.fingerprint);
  EXPECT_NE(namespace_of(info_a.fingerprint), namespace_of(info_b.fingerprint));
}

TEST_F(ModelFingerprint, TheSameFileAtAnotherPathKeepsItsFingerprint) {
  const fs::path copy = scratch() / "copy.gguf";
  fs::copy_file(model_a(), copy);
  EXPECT_EQ(hash_model_file(copy), hash_model_file(model_a()));
  EXPECT_EQ(FingerprintCache({}).fingerprint(copy).digest, FingerprintCache({}).fingerprint(model_a()).digest);
  EXPECT_EQ(namespace_of(hash_model_file(copy)), namespace_of(hash_model_file(model_a())));
}

TEST_F(ModelFingerprint, OneChangedByteOfTensorDataChangesIt) {
  std::string bytes = read_bytes(model_a());
  const std::size_t offset = tensor_data_offset(model_a());
  const std::size_t position = offset + (bytes.size() - offset) / 2;
  bytes[position] = static_cast<char>(bytes[position] ^ 0x01);
  const fs::path changed = scratch() / "changed.gguf";
  write_bytes(changed, bytes);
  EXPECT_NE(hash_model_file(changed), hash_model_file(model_a()));
}

TEST_F(ModelFingerprint, LoadedEngineCarriesTheFileFingerprintAndItsRuntimeSignature) {
  ContextOptions options;
  options.n_ctx = 256;
  options.n_batch = 32;
  options.n_parallel = 1;
  options.n_holder_seqs = 1;
  options.n_threads = 1;  // one: ctest runs another test beside this one (tests/integration/server_process.cpp says why)
  options.flash_attention = false;
  const auto plain = load_llama_engine(model_a().string(), options);
  EXPECT_EQ(plain->model().fingerprint, hash_model_file(model_a()));
  const std::string& signature = plain->model().runtime_signature;
  EXPECT_NE(signature.find("type_k=f16;"), std::string::npos) << signature;
  EXPECT_NE(signature.find("type_v=f16;"), std::string::npos) << signature;
  EXPECT_NE(signature.find(".rope.freq_base="), std::string::npos) << signature;
  // No layer offloaded (--gpu-layers 0): a GPU's kernels would compute other K/V.
  EXPECT_NE(signature.find("compute=cpu;"), std::string::npos) << signature;
  options.flash_attention = true;
  const auto flash = load_llama_engine(model_a().string(), options);
  EXPECT_EQ(flash->model().fingerprint, plain->model().fingerprint);
  EXPECT_NE(flash->model().runtime_signature, signature) << "flash attention stores V in another layout";
}

// The fingerprint cache.

TEST_F(ModelFingerprint, CacheAnswersForAnUnchangedFileWithoutRehashing) {
  const fs::path file = scratch() / "fingerprints.tsv";
  FingerprintCache first(file);
  const FileFingerprint computed = first.fingerprint(model_a());
  EXPECT_FALSE(computed.from_cache);
  EXPECT_EQ(first.files_hashed(), 1u);
  EXPECT_EQ(computed.digest, hash_model_file(model_a()));

  FingerprintCache restarted(file);  // another process, or the same one after a restart
  const FileFingerprint cached = restarted.fingerprint(model_a());
  EXPECT_TRUE(cached.from_cache);
  EXPECT_EQ(restarted.files_hashed(), 0u);
  EXPECT_EQ(cached.digest, computed.digest);
  EXPECT_EQ(cached.hash_time.count(), 0);
}

TEST_F(ModelFingerprint, CacheRehashesATouchedFile) {
  const fs::path model = scratch() / "model.gguf";
  fs::copy_file(model_a(), model);
  FingerprintCache cache(scratch() / "fingerprints.tsv");
  const std::string digest = cache.fingerprint(model).digest;
  fs::last_write_time(model, fs::last_write_time(model) + std::chrono::seconds(1));
  const FileFingerprint after = cache.fingerprint(model);
  EXPECT_FALSE(after.from_cache);
  EXPECT_EQ(cache.files_hashed(), 2u);
  EXPECT_EQ(after.digest, digest) << "same bytes, same digest";
  EXPECT_TRUE(cache.fingerprint(model).from_cache) << "the new record replaced the old one";
}

TEST_F(ModelFingerprint, CacheRehashesAResizedFile) {
  const fs::path model = scratch() / "model.gguf";
  fs::copy_file(model_a(), model);
  FingerprintCache cache(scratch() / "fingerprints.tsv");
  const std::string digest = cache.fingerprint(model).digest;
  const auto mtime = fs::last_write_time(model);
  std::ofstream(model, std::ios::binary | std::ios::app) << "x";
  fs::last_write_time(model, mtime);  // the mtime alone would say it is unchanged
  const FileFingerprint after = cache.fingerprint(model);
  EXPECT_FALSE(after.from_cache);
  EXPECT_NE(after.digest, digest);
  EXPECT_EQ(after.digest, hash_model_file(model));
}

TEST_F(ModelFingerprint, CorruptCacheFileIsIgnoredAndRepaired) {
  const fs::path file = scratch() / "fingerprints.tsv";
  const std::string canonical = fs::canonical(model_a()).string();
  const auto size = fs::file_size(model_a());
  write_bytes(file, std::string("\x01\x02 garbage\n") + "xxh3-128\tnot-hex\t" + std::to_string(size) + "\t1\t2\t3\t" +
                        canonical + "\nxxh3-128\t\t\t\n\t\t\t\t\t\t\n" + std::string(100, '\t') + "\nxxh3-128");
  FingerprintCache cache(file);
  const FileFingerprint found = cache.fingerprint(model_a());
  EXPECT_FALSE(found.from_cache);
  EXPECT_EQ(found.digest, hash_model_file(model_a()));
  EXPECT_TRUE(FingerprintCache(file).fingerprint(model_a()).from_cache) << "rewritten with a good record";
  EXPECT_EQ(read_bytes(file).find("garbage"), std::string::npos) << "malformed lines are not kept";
}

TEST_F(ModelFingerprint, CacheKeepsTheRecordsOfOtherFiles) {
  const fs::path file = scratch() / "fingerprints.tsv";
  FingerprintCache cache(file);
  cache.fingerprint(model_a());
  cache.fingerprint(twin());
  FingerprintCache restarted(file);
  EXPECT_TRUE(restarted.fingerprint(model_a()).from_cache);
  EXPECT_TRUE(restarted.fingerprint(twin()).from_cache);
  EXPECT_NE(restarted.fingerprint(model_a()).digest, restarted.fingerprint(twin()).digest);
}

TEST_F(ModelFingerprint, UnwritableCacheFileDoesNotFailTheLookup) {
  const fs::path not_a_directory = scratch() / "plain-file";
  write_bytes(not_a_directory, "x");
  FingerprintCache cache(not_a_directory / "fingerprints.tsv");
  EXPECT_EQ(cache.fingerprint(model_a()).digest, hash_model_file(model_a()));
  EXPECT_FALSE(cache.fingerprint(model_a()).from_cache);
}

TEST_F(ModelFingerprint, WithoutACacheFileEveryLookupHashes) {
  FingerprintCache cache({});
  EXPECT_FALSE(cache.fingerprint(model_a()).from_cache);
  EXPECT_FALSE(cache.fingerprint(model_a()).from_cache);
  EXPECT_EQ(cache.files_hashed(), 2u);
}

// Sets an environment variable for one scope (unset when `value` is nullopt).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) const {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

  const char* name_;
  std::optional<std::string> old_;
};

TEST(ModelFingerprintCachePath, DiskDirectoryThenXdgCacheHomeThenHome) {
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  ScopedEnv home("HOME", "/home/u");
  EXPECT_EQ(default_fingerprint_cache_path(fs::path("/var/cache/kv")), fs::path("/var/cache/kv/model-fingerprints.tsv"));
  EXPECT_EQ(default_fingerprint_cache_path(std::nullopt), fs::path("/xdg/prefixd/model-fingerprints.tsv"));
  {
    ScopedEnv relative("XDG_CACHE_HOME", "relative/dir");  // ignored, as the XDG specification says
    EXPECT_EQ(default_fingerprint_cache_path(std::nullopt), fs::path("/home/u/.cache/prefixd/model-fingerprints.tsv"));
  }
  ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(default_fingerprint_cache_path(std::nullopt), fs::path("/home/u/.cache/prefixd/model-fingerprints.tsv"));
  ScopedEnv no_home("HOME", std::nullopt);
  EXPECT_EQ(default_fingerprint_cache_path(std::nullopt), fs::path());
}

}  // namespace
}  // namespace prefixd::engine
