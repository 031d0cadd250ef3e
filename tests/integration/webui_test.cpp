// The web UI's routes on the real binary (its pages are driven by a browser in tests/browser), and
// GET /v1/cache/tree against what /v1/cache/stats counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "server_process.h"
#include "support/disk_fixtures.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string header(const httplib::Result& res, const std::string& name) {
  return res ? res->get_header_value(name) : std::string();
}

// The files index.html loads (src="/ui/..." and href="/ui/...").
std::set<std::string> referenced_files(const std::string& html) {
  std::set<std::string> out;
  for (const std::string attribute : {"src=\"/ui/", "href=\"/ui/"}) {
    for (auto at = html.find(attribute); at != std::string::npos; at = html.find(attribute, at + 1)) {
      const std::size_t begin = at + attribute.size() - 4;  // at "/ui/"
      const std::size_t end = html.find('"', begin);
      if (end != std::string::npos && end > begin + 4) out.insert(html.substr(begin, end - begin));
    }
  }
  return out;
}

TEST(WebUi, PagesAndFilesNeedNoKeyAndTheApiStillDoes) {
  ServerProcess server({.extra_args = {"--api-key", "sekrit"}});
  auto client = server.client();
  const auto page = client->Get("/");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200);
  EXPECT_EQ(header(page, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(header(page, "Content-Security-Policy"), HasSubstr("script-src 'self'"));
  const auto cache_page = client->Get("/cache");
  ASSERT_TRUE(cache_page);
  EXPECT_EQ(cache_page->status, 200);
  EXPECT_EQ(cache_page->body, page->body);  // one page; its script picks the view from the path
  // HEAD: the head a GET gets, its length included, and no body (what `curl -I` and link checkers send).
  client->set_keep_alive(true);
  for (int round = 0; round < 2; ++round) {  // twice on one connection: nothing of the body is left on it
    const auto head = client->Head("/");
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);
    EXPECT_EQ(header(head, "Content-Length"), std::to_string(page->body.size()));
    EXPECT_EQ(header(head, "Content-Type"), "text/html; charset=utf-8");
    EXPECT_TRUE(head->body.empty());
  }
  const auto after_head = client->Get("/health");
  ASSERT_TRUE(after_head);
  EXPECT_EQ(after_head->status, 200);
  EXPECT_EQ(after_head->body, R"({"status":"ok"})");
  const auto health_head = client->Head("/health");
  ASSERT_TRUE(health_head);
  EXPECT_EQ(health_head->status, 200);
  EXPECT_EQ(header(health_head, "Content-Length"), std::to_string(after_head->body.size()));
  EXPECT_TRUE(health_head->body.empty());
  const auto missing_head = client->Head("/ui/no-such-file.js");
  ASSERT_TRUE(missing_head);
  EXPECT_EQ(missing_head->status, 404);
  EXPECT_TRUE(missing_head->body.empty());
  client->set_keep_alive(false);

  const auto files = referenced_files(page->body);
  ASSERT_FALSE(files.empty()) << page->body;
  for (const std::string& file : files) {
    const auto res = client->Get(file);
    ASSERT_TRUE(res) << file;
    EXPECT_EQ(res->status, 200) << file;
    EXPECT_FALSE(res->body.empty()) << file;
    if (file.ends_with(".js")) {
      EXPECT_EQ(header(res, "Content-Type"), "text/javascript; charset=utf-8") << file;
    }
    if (file.ends_with(".css")) {
      EXPECT_EQ(header(res, "Content-Type"), "text/css; charset=utf-8") << file;
    }
  }
  for (const char* missing : {"/ui/no-such-file.js", "/ui/../CMakeLists.txt", "/ui/.hidden.js", "/ui/a//b.js",
                              "/ui/index.html.bak"}) {
    const auto res = client->Get(missing);
    ASSERT_TRUE(res) << missing;
    EXPECT_EQ(res->status, 404) << missing;
    EXPECT_EQ(json::parse(res->body, nullptr, false)["error"]["code"], "not_found") << missing << ": " << res->body;
  }

  // The UI's data comes from the API, which still wants the key.
  EXPECT_EQ(get_json(*client, "/v1/cache/tree").status, 401);
  EXPECT_EQ(get_json(*client, "/v1/cache/stats").status, 401);
  auto keyed = server.client("sekrit");
  EXPECT_EQ(get_json(*keyed, "/v1/cache/tree").status, 200);
}

TEST(WebUi, NoWebuiLeavesOnlyTheApi) {
  ServerProcess server({.extra_args = {"--no-webui"}});
  auto client = server.client();
  for (const char* path : {"/", "/cache", "/ui/style.css"}) {
    const auto res = client->Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404) << path;
  }
  EXPECT_EQ(get_json(*client, "/health").status, 200);
}

TEST(WebUi, AFolderIsServedAsItIsNow) {
  TempDir dir("webui");
  std::ofstream(dir.path() / "index.html") << "<!doctype html><title>one</title>";
  std::ofstream(dir.path() / "extra.js") << "export const x = 1;";
  ServerProcess server({.extra_args = {"--webui-dir", dir.path().string()}});
  auto client = server.client();
  EXPECT_EQ(client->Get("/")->body, "<!doctype html><title>one</title>");
  EXPECT_EQ(client->Get("/ui/extra.js")->body, "export const x = 1;");
  std::ofstream(dir.path() / "index.html") << "<!doctype html><title>two</title>";  // read on every request
  EXPECT_EQ(client->Get("/")->body, "<!doctype html><title>two</title>");
  std::filesystem::create_symlink("/etc/hostname", dir.path() / "link.json");
  EXPECT_EQ(client->Get("/ui/link.json")->status, 200);  // the operator's own folder: links are theirs
}

TEST(WebUi, AFolderWithoutAnIndexIsRefusedAtStartup) {
  TempDir dir("webui-empty");
  try {
    ServerProcess server({.extra_args = {"--webui-dir", dir.path().string()}});
    FAIL() << "the server started";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--webui-dir"));
    EXPECT_THAT(e.what(), HasSubstr("has no index.html"));
  }
}

json chat(const std::string& system, const std::string& user, const std::string& session = {}) {
  json body = {{"messages", json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}})},
               {"max_tokens", 4},
               {"temperature", 0}};
  if (!session.empty()) body["prompt_cache_key"] = session;
  return body;
}

// Sum of the spans of the nodes `tier` holds.
std::int64_t tokens_in(const json& node, const std::string& tier) {
  std::int64_t sum = 0;
  const auto& tiers = node["tiers"];
  if (std::find(tiers.begin(), tiers.end(), tier) != tiers.end()) sum += node["tokens"].get<std::int64_t>();
  for (const auto& child : node["children"]) sum += tokens_in(child, tier);
  return sum;
}

TEST(CacheTree, ItsDeviceNodesAreTheCellsTheStatsCount) {
  ServerProcess server;
  auto client = server.client();
  const std::string shared = "You are a careful assistant. " + std::string(300, 'a');
  const auto first = post_json(*client, "/v1/chat/completions", chat(shared, "First question here", "s1"));
  ASSERT_EQ(first.status, 200);
  const auto second = post_json(*client, "/v1/chat/completions", chat(shared, "Another question", "s2"));
  ASSERT_EQ(second.status, 200);
  EXPECT_GT(second.body["prompt_cache"]["cached_tokens"].get<int>(), 0) << second.raw;

  const auto tree = get_json(*client, "/v1/cache/tree");
  ASSERT_EQ(tree.status, 200) << tree.raw;
  ASSERT_EQ(tree.body["namespaces"].size(), 1u) << tree.raw;
  const json& ns = tree.body["namespaces"][0];
  EXPECT_EQ(ns["tenant"], "default");
  const json& root = ns["root"];
  EXPECT_EQ(root["tokens"], 0);
  // The shared system prompt is one node both entries pass through, then one branch each.
  ASSERT_EQ(root["children"].size(), 1u) << tree.raw;
  const json& trunk = root["children"][0];
  EXPECT_EQ(trunk["begin"], 0);
  EXPECT_EQ(trunk["entries"], 2);
  EXPECT_EQ(trunk["sessions"], json::array({"s1", "s2"}));
  EXPECT_THAT(trunk["text"].get<std::string>(), HasSubstr("You are a careful assistant."));
  ASSERT_GE(trunk["children"].size(), 1u) << tree.raw;
  EXPECT_THAT(trunk["children"][0]["text"].get<std::string>(), HasSubstr("Another question"));  // most recent first
  EXPECT_EQ(trunk["children"][0]["begin"], trunk["end"]);
  EXPECT_FALSE(trunk["locked"].get<bool>());

  const auto stats = get_json(*client, "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200);
  EXPECT_EQ(tokens_in(root, "device"), stats.body["tiers"]["device"]["cells"].get<std::int64_t>()) << tree.raw;
  EXPECT_GE(ns["tokens"].get<std::int64_t>(), tokens_in(root, "device"));
  EXPECT_EQ(stats.body["tokens_reused"], second.body["prompt_cache"]["cached_tokens"]);
  EXPECT_EQ(stats.body["prompt_tokens"].get<std::int64_t>(),
            first.body["usage"]["prompt_tokens"].get<std::int64_t>() + second.body["usage"]["prompt_tokens"].get<std::int64_t>());
  EXPECT_EQ(stats.body["tenants"]["default"]["prompt_tokens"], stats.body["prompt_tokens"]) << "one tenant: all of it";
  EXPECT_DOUBLE_EQ(stats.body["seconds_saved"].get<double>(), second.body["prompt_cache"]["seconds_saved"].get<double>());

  // A limit keeps the nodes nearest the root.
  const auto cut = get_json(*client, "/v1/cache/tree?limit=1");
  ASSERT_EQ(cut.status, 200);
  EXPECT_TRUE(cut.body["truncated"].get<bool>());
  EXPECT_EQ(cut.body["namespaces"][0]["root"]["children"][0]["children"].size(), 0u);
  EXPECT_EQ(cut.body["namespaces"][0]["nodes"], ns["nodes"]);
  for (const char* bad : {"?limit=0", "?limit=abc", "?limit=100001", "?limit=5x"}) {
    const auto refused = get_json(*client, std::string("/v1/cache/tree") + bad);
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_EQ(refused.body["error"]["param"], "limit") << bad;
  }
  // The saved time a response reports is what /metrics sums.
  EXPECT_GT(second.body["prompt_cache"]["seconds_saved"].get<double>(), 0.0);
  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NEAR(metric_value(metrics->body, "prefixd_prefill_seconds_saved_total"),
              second.body["prompt_cache"]["seconds_saved"].get<double>(), 1e-9);
}

TEST(CacheTree, DemotedPrefixesShowAsHostNodes) {
  // On the CPU the device tier keeps no idle cells (docs/design.md): the second conversation's
  // prompt demotes the first one's entry to the host tier.
  ServerProcess server;
  auto client = server.client();
  const std::string first = "First conversation. " + std::string(200, 'b');
  ASSERT_EQ(post_json(*client, "/v1/chat/completions", chat(first, "one")).status, 200);
  ASSERT_EQ(post_json(*client, "/v1/chat/completions", chat("Second conversation. " + std::string(200, 'c'), "two")).status, 200);
  const auto tree = get_json(*client, "/v1/cache/tree");
  ASSERT_EQ(tree.status, 200);
  const auto stats = get_json(*client, "/v1/cache/stats");
  ASSERT_GT(stats.body["tiers"]["host"]["entries"].get<int>(), 0) << stats.raw;
  std::int64_t host_tokens = 0;
  for (const auto& ns : tree.body["namespaces"]) host_tokens += tokens_in(ns["root"], "host");
  EXPECT_GT(host_tokens, 0) << tree.raw;
}

}  // namespace
}  // namespace prefixd::testing
