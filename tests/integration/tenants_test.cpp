// Tenants through the real server: keys from a key file, a prompt cache that never crosses
// tenants (whatever salt a client sends), scoped cache views and resets, admin-only metrics,
// SIGHUP reloads, and a key file that refuses to start the server.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kAlphaKey = "alpha-key-1";
constexpr const char* kBetaKey = "beta-key-1";
constexpr const char* kAdminKey = "ops-admin-key";

class TempFiles {
 public:
  TempFiles() : dir_(fs::temp_directory_path() / ("prefixd-tenants-" + std::to_string(::getpid()) + "-" +
                                                   std::to_string(counter_++))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempFiles() { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }
  const fs::path& dir() const { return dir_; }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

const std::string kKeys = std::string("# test tenants\n") + kAlphaKey + " alpha\n" + kBetaKey + " beta\n" + kAdminKey +
                          " ops admin\n";

json long_chat(const std::string& question, const json& extra = json::object()) {
  std::string system = "You are a meticulous librarian. ";
  for (int i = 0; i < 20; ++i) system += "Rule " + std::to_string(i) + ": catalogue every book by author and year. ";
  json request = {{"messages", json::array({{{"role", "system"}, {"content", system}},
                                            {{"role", "user"}, {"content", question}}})},
                  {"max_tokens", 2},
                  {"temperature", 0}};
  request.update(extra);
  return request;
}

json chat(ServerProcess& server, const std::string& key, const json& request) {
  auto client = server.client(key);
  const auto reply = post_json(*client, "/v1/chat/completions", request);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body;
}

json stats(ServerProcess& server, const std::string& key, const std::string& query = "") {
  auto client = server.client(key);
  const auto reply = get_json(*client, "/v1/cache/stats" + query);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body;
}

int cached(const json& reply) { return reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

void expect_error_shape(const JsonReply& reply, int status) {
  EXPECT_EQ(reply.status, status) << reply.raw;
  ASSERT_TRUE(reply.body.is_object()) << reply.raw;
  EXPECT_TRUE(reply.body["error"]["message"].is_string()) << reply.raw;
  EXPECT_TRUE(reply.body["error"]["type"].is_string()) << reply.raw;
}

struct TenantServer {
  TempFiles files;
  fs::path keys = files.write("keys", kKeys);
  ServerProcess server{{.extra_args = {"--api-keys", keys.string(), "--cache-artifact-path",
                                       (files.dir() / "artifacts").string()}}};
};

TEST(Tenants, TwoTenantsSendingTheSameLongPromptNeverHitEachOther) {
  TenantServer t;
  const json request = long_chat("Where is the atlas?");
  const json first = chat(t.server, kAlphaKey, request);
  EXPECT_EQ(first["prompt_cache"]["outcome"], "cold");
  const json again = chat(t.server, kAlphaKey, request);
  EXPECT_EQ(again["prompt_cache"]["outcome"], "hit_extend");
  const int alpha_reused = cached(again);
  EXPECT_GT(alpha_reused, 200);

  const json alpha = stats(t.server, kAlphaKey);
  EXPECT_EQ(alpha["tenant"], "alpha");
  EXPECT_EQ(alpha["outcomes"]["cold"], 1);
  EXPECT_EQ(alpha["outcomes"]["hit_extend"], 1);
  EXPECT_EQ(alpha["tokens_reused"], alpha_reused) << "counted, and equal to what the responses said";
  EXPECT_EQ(alpha["tiers"]["device"]["entries"], 1);
  const int kept = first["usage"]["prompt_tokens"].get<int>() + 1;  // and the first generated token
  EXPECT_EQ(alpha["tiers"]["device"]["cells"], kept);

  const json other = chat(t.server, kBetaKey, request);
  EXPECT_EQ(other["prompt_cache"]["outcome"], "cold");
  EXPECT_EQ(cached(other), 0);
  // Beta's request moved alpha's idle entry to the host tier (the CPU keeps no idle cells), still
  // counted as alpha's.
  const json moved = stats(t.server, kAlphaKey);
  EXPECT_GT(moved["entries"].get<int>(), 0);
  EXPECT_EQ(moved["tiers"]["device"]["cells"].get<int>() + moved["tiers"]["host"]["tokens"].get<int>(), kept);
  const json beta = stats(t.server, kBetaKey);
  EXPECT_EQ(beta["outcomes"]["cold"], 1);
  EXPECT_EQ(beta["tokens_reused"], 0);
  EXPECT_EQ(beta["hits"], 0);
}

TEST(Tenants, ACacheSaltCannotReachAnotherTenantsEntries) {
  TenantServer t;
  chat(t.server, kAlphaKey, long_chat("Where is the atlas?", {{"cache_salt", "shared-salt"}}));
  chat(t.server, kAlphaKey, long_chat("Where is the atlas?"));
  // Each of beta's requests is the first of its own namespace: any hit would be alpha's.
  for (const json& extra : {json{{"cache_salt", "shared-salt"}}, json{{"cache_salt", "alpha"}}, json::object()}) {
    const json reply = chat(t.server, kBetaKey, long_chat("Where is the atlas?", extra));
    EXPECT_EQ(cached(reply), 0) << extra.dump();
  }
  const json own = chat(t.server, kAlphaKey, long_chat("Where is the atlas?", {{"cache_salt", "shared-salt"}}));
  EXPECT_GT(cached(own), 200) << "the same tenant and salt still hits";
  auto client = t.server.client(kAlphaKey);
  const auto empty = post_json(*client, "/v1/chat/completions", long_chat("Where is the atlas?", {{"cache_salt", ""}}));
  expect_error_shape(empty, 400);
  EXPECT_EQ(empty.body["error"]["param"], "cache_salt");
}

TEST(Tenants, ATenantSeesOnlyItsOwnStatsAndAnAdminSeesEveryTenant) {
  TenantServer t;
  chat(t.server, kAlphaKey, long_chat("Where is the atlas?"));
  chat(t.server, kAlphaKey, long_chat("Where is the atlas?"));
  const json beta = stats(t.server, kBetaKey);
  EXPECT_EQ(beta["tenant"], "beta");
  EXPECT_EQ(beta["outcomes"]["cold"], 0);
  EXPECT_EQ(beta["outcomes"]["hit_extend"], 0);
  EXPECT_EQ(beta["entries"], 0);
  EXPECT_EQ(beta["bytes"], 0);
  EXPECT_FALSE(beta.contains("tenants"));
  EXPECT_FALSE(beta.contains("running")) << "the server-wide gauges would show other tenants' activity";
  auto client = t.server.client(kBetaKey);
  expect_error_shape(get_json(*client, "/v1/cache/stats?tenant=alpha"), 403);

  const json all = stats(t.server, kAdminKey);
  ASSERT_TRUE(all.contains("tenants"));
  EXPECT_EQ(all["outcomes"]["cold"], 1);
  EXPECT_EQ(all["tenants"]["alpha"]["outcomes"]["hit_extend"], 1);
  EXPECT_EQ(all["tenants"]["alpha"]["tiers"]["device"]["cells"], all["tiers"]["device"]["cells"]);
  const json alpha_by_admin = stats(t.server, kAdminKey, "?tenant=alpha");
  EXPECT_EQ(alpha_by_admin, stats(t.server, kAlphaKey));
}

TEST(Tenants, ResetsAreScopedAndOnlyAnAdminResetsEveryone) {
  TenantServer t;
  const json request = long_chat("Where is the atlas?");
  chat(t.server, kAlphaKey, request);
  chat(t.server, kBetaKey, request);
  auto alpha = t.server.client(kAlphaKey);
  expect_error_shape(post_json(*alpha, "/v1/cache/reset?tenant=beta", json::object()), 403);
  // The body names a tenant the same way; fields a reset does not take are refused, not ignored.
  expect_error_shape(post_json(*alpha, "/v1/cache/reset", json{{"tenant", "beta"}}), 403);
  expect_error_shape(post_json(*alpha, "/v1/cache/reset", json{{"tenants", "alpha"}}), 400);
  expect_error_shape(post_json(*alpha, "/v1/cache/reset?tenant=alpha", json{{"tenant", "beta"}}), 400);
  EXPECT_GT(cached(chat(t.server, kBetaKey, request)), 200) << "the refused reset removed nothing";

  const auto own = post_json(*alpha, "/v1/cache/reset", json::object());
  ASSERT_EQ(own.status, 200) << own.raw;
  EXPECT_GE(own.body["freed_entries"].get<int>(), 1);
  EXPECT_EQ(stats(t.server, kAlphaKey)["entries"], 0);
  EXPECT_EQ(cached(chat(t.server, kAlphaKey, request)), 0) << "alpha's entries are gone";
  EXPECT_GT(cached(chat(t.server, kBetaKey, request)), 200) << "beta still hits";

  auto admin = t.server.client(kAdminKey);
  chat(t.server, kAlphaKey, request);
  const auto beta_only = post_json(*admin, "/v1/cache/reset", json{{"tenant", "beta"}});
  ASSERT_EQ(beta_only.status, 200) << beta_only.raw;
  EXPECT_EQ(stats(t.server, kBetaKey)["entries"], 0) << "an admin's body tenant is the one reset";
  EXPECT_GT(stats(t.server, kAlphaKey)["entries"].get<int>(), 0) << "and only that one";
  const auto everything = post_json(*admin, "/v1/cache/reset", json::object());
  ASSERT_EQ(everything.status, 200) << everything.raw;
  EXPECT_EQ(stats(t.server, kAdminKey)["entries"], 0);
  EXPECT_EQ(cached(chat(t.server, kAlphaKey, request)), 0);
  EXPECT_EQ(cached(chat(t.server, kBetaKey, request)), 0);
}

TEST(Tenants, MetricsNeedAnAdminKeyAndAddUpPerTenant) {
  TenantServer t;
  chat(t.server, kAlphaKey, long_chat("Where is the atlas?"));
  chat(t.server, kAlphaKey, long_chat("Where is the atlas?"));
  chat(t.server, kBetaKey, long_chat("Where is the atlas?"));
  auto none = t.server.client();
  expect_error_shape(get_json(*none, "/metrics"), 401);
  auto alpha = t.server.client(kAlphaKey);
  const auto refused = get_json(*alpha, "/metrics");
  expect_error_shape(refused, 403);
  EXPECT_EQ(refused.body["error"]["type"], "permission_error");
  auto admin = t.server.client(kAdminKey);
  const auto metrics = admin->Get("/metrics");
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  const std::string& text = metrics->body;
  const double alpha_hits =
      metric_value(text, "prefixd_tenant_prompt_cache_requests_total{tenant=\"alpha\",outcome=\"hit_extend\"}");
  const double beta_cold =
      metric_value(text, "prefixd_tenant_prompt_cache_requests_total{tenant=\"beta\",outcome=\"cold\"}");
  EXPECT_EQ(alpha_hits, 1);
  EXPECT_EQ(beta_cold, 1);
  EXPECT_EQ(metric_value(text, "prefixd_prompt_cache_requests_total{outcome=\"cold\"}"), 2);
  const double alpha_reused = metric_value(text, "prefixd_tenant_prompt_cache_prefix_tokens_reused_total{tenant=\"alpha\"}");
  EXPECT_EQ(alpha_reused, metric_value(text, "prefixd_prompt_cache_prefix_tokens_reused_total"));
  EXPECT_EQ(alpha_reused, stats(t.server, kAlphaKey)["tokens_reused"].get<double>());
}

bool key_works(ServerProcess& server, const std::string& key) {
  auto client = server.client(key);
  return get_json(*client, "/v1/models").status == 200;
}

TEST(Tenants, SighupReloadsTheKeyFileAndAFailedReloadKeepsTheOldKeys) {
  TempFiles files;
  const fs::path keys = files.write("keys", std::string(kAlphaKey) + " alpha\n");
  ServerProcess server({.extra_args = {"--api-keys", keys.string()}});
  ASSERT_TRUE(key_works(server, kAlphaKey));
  ASSERT_FALSE(key_works(server, "gamma-key"));

  files.write("keys", "gamma-key gamma\n");
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  bool swapped = false;
  for (int i = 0; i < 200 && !swapped; ++i) {
    swapped = key_works(server, "gamma-key");
    if (!swapped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(swapped) << server.log();
  EXPECT_FALSE(key_works(server, kAlphaKey)) << "the removed key is refused";
  EXPECT_EQ(get_json(*server.client(kAlphaKey), "/v1/models").status, 401);

  files.write("keys", "gamma-key gamma\nnot a valid line at all\n");
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  bool logged = false;
  for (int i = 0; i < 200 && !logged; ++i) {
    logged = server.log().find("keeping the previous keys") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(logged) << server.log();
  EXPECT_NE(server.log().find("line 2"), std::string::npos) << server.log();
  EXPECT_TRUE(key_works(server, "gamma-key"));
  EXPECT_TRUE(server.running());
}

// Runs `prefixd serve ARGS` to its end (it must fail before it would listen); its exit status
// and what it wrote.
std::pair<int, std::string> serve_failure(const std::string& args) {
  const std::string command = std::string(PREFIXD_BINARY) + " serve --model " + PREFIXD_TINY_MODEL +
                              " --port 0 --model-fingerprint-cache off --no-cache-disk " + args + " 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(Tenants, AKeyFileWithAnErrorRefusesToStartAndNamesTheLine) {
  TempFiles files;
  const fs::path keys = files.write("keys", "# ok so far\nk1 alpha\nk2 beta root\n");
  const auto [status, output] = serve_failure("--api-keys " + keys.string());
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find("line 3"), std::string::npos) << output;
  EXPECT_NE(output.find(keys.string()), std::string::npos) << output;
  const auto [missing_status, missing] = serve_failure("--api-keys " + (files.dir() / "absent").string());
  EXPECT_NE(missing_status, 0);
  EXPECT_NE(missing.find("cannot read the key file"), std::string::npos) << missing;
}

TEST(Tenants, ArtifactsLiveInTheTenantsOwnFolder) {
  TenantServer t;
  const json request = long_chat("Where is the atlas?", {{"prompt_cache_key", "conversation-1"}});
  chat(t.server, kAlphaKey, request);
  auto alpha = t.server.client(kAlphaKey);
  const auto saved = post_json(*alpha, "/v1/cache/save", {{"name", "atlas"}, {"prompt_cache_key", "conversation-1"}});
  ASSERT_EQ(saved.status, 200) << saved.raw;
  EXPECT_TRUE(fs::exists(t.files.dir() / "artifacts" / "tenants" / "alpha" / "atlas.prefixd"));
  auto beta = t.server.client(kBetaKey);
  const auto theirs = post_json(*beta, "/v1/cache/load", {{"name", "atlas"}});
  expect_error_shape(theirs, 404);
  const auto session = post_json(*beta, "/v1/cache/save", {{"name", "x"}, {"prompt_cache_key", "conversation-1"}});
  expect_error_shape(session, 404) ;
  EXPECT_EQ(session.body["error"]["code"], "nothing_cached") << "another tenant's session of the same name";
  // An artifact moved into another tenant's folder is refused, not attributed to it.
  fs::create_directories(t.files.dir() / "artifacts" / "tenants" / "beta");
  fs::copy_file(t.files.dir() / "artifacts" / "tenants" / "alpha" / "atlas.prefixd",
                t.files.dir() / "artifacts" / "tenants" / "beta" / "atlas.prefixd");
  expect_error_shape(post_json(*beta, "/v1/cache/load", {{"name", "atlas"}}), 403);
  const auto loaded = post_json(*alpha, "/v1/cache/load", {{"name", "atlas"}});
  EXPECT_EQ(loaded.status, 200) << loaded.raw;
}

}  // namespace
}  // namespace prefixd::testing
