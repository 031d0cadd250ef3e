// What one request can make the server hold: a body whose parse would amplify it is refused before
// it is parsed, on every route that parses one, and what large requests leave free goes back to
// the system, so bursts of them leave the resident set where it was.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/rss.h"
#include "bursts.h"
#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

// A JSON array of `count` empty objects: three bytes each, and about 100 bytes each once parsed.
std::string empty_objects(std::size_t count) {
  std::string out = "[";
  out.reserve(3 * count + 2);
  for (std::size_t i = 0; i < count; ++i) out += i == 0 ? "{}" : ",{}";
  return out + "]";
}

// `fields` (a JSON object's text) with "x": `count` empty objects added: the request's own values
// plus `count` + 1.
std::string with_empty_objects(const json& fields, std::size_t count) {
  const std::string text = fields.dump();
  return text.substr(0, text.size() - 1) + R"(,"x":)" + empty_objects(count) + "}";
}

const json kHello = {{"role", "user"}, {"content", "Hello"}};

// A chat that declares `count` tools: the chat template renders every one of them.
std::string chat_with_tools(int count, int salt) {
  json tools = json::array();
  for (int k = 0; k < count; ++k) {
    tools.push_back({{"type", "function"},
                     {"function", {{"name", "f" + std::to_string(salt) + "_" + std::to_string(k)},
                                   {"description", "does a thing"},
                                   {"parameters", {{"type", "object"},
                                                   {"properties", {{"a", {{"type", "string"}}}}},
                                                   {"required", {"a"}}}}}}});
  }
  return json{{"messages", json::array({kHello})}, {"tools", std::move(tools)}, {"max_tokens", 1}}.dump();
}

// A field of an error reply's "error" object; empty when there is none.
std::string error_field(const json& body, const char* field) {
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return {};
  const json& value = body["error"].value(field, json());
  return value.is_string() ? value.get<std::string>() : std::string();
}

void expect_too_many_nodes(const JsonReply& reply, const std::string& route, std::size_t limit) {
  EXPECT_EQ(reply.status, 413) << route << ": " << reply.raw.substr(0, 300);
  EXPECT_EQ(error_field(reply.body, "code"), "json_too_many_nodes") << route;
  const std::string message = error_field(reply.body, "message");
  EXPECT_NE(message.find(std::to_string(limit)), std::string::npos) << route << ": " << message;
  EXPECT_NE(message.find("--max-json-nodes"), std::string::npos) << route << ": " << message;
}

JsonReply post_text(httplib::Client& client, const std::string& path, const std::string& body) {
  JsonReply reply;
  if (auto res = client.Post(path, body, "application/json")) {
    reply.status = res->status;
    reply.raw = res->body;
    reply.body = json::parse(res->body, nullptr, false);
  }
  return reply;
}

TEST(ApiMemory, BodiesWithMoreJsonValuesThanTheLimitAreRefusedWith413OnEveryRoute) {
  constexpr std::size_t kLimit = 1000;
  ServerProcess server({.extra_args = {"--max-json-nodes", std::to_string(kLimit)}});
  auto client = server.client();
  const json chat = {{"messages", json::array({kHello})}, {"max_tokens", 1}};  // 6 values
  // At the limit a chat is served; one value more and it is refused before it is parsed.
  EXPECT_EQ(post_text(*client, "/v1/chat/completions", with_empty_objects(chat, kLimit - 7)).status, 200);
  expect_too_many_nodes(post_text(*client, "/v1/chat/completions", with_empty_objects(chat, kLimit - 6)),
                        "/v1/chat/completions", kLimit);
  const std::string over = with_empty_objects(chat, kLimit);
  for (const std::string route : {"/v1/completions", "/tokenize", "/apply-template", "/v1/cache/reset",
                                  "/v1/cache/set", "/v1/cache/update", "/v1/cache/prepare_modules"}) {
    expect_too_many_nodes(post_text(*client, route, over), route, kLimit);
  }
  // The routing endpoint carries a request inside its own body.
  const std::string chain = R"({"endpoint": "chat", "request": )" + over + "}";
  expect_too_many_nodes(post_text(*client, "/v1/cache/chain", chain), "/v1/cache/chain", kLimit);
  // A prompt of token ids is one value per token.
  const json tokens = {{"prompt", json(std::vector<int>(kLimit, 1))}, {"max_tokens", 1}};
  expect_too_many_nodes(post_text(*client, "/v1/completions", tokens.dump()), "/v1/completions", kLimit);
}

TEST(ApiMemory, BurstsOfAmplifyingBodiesLeaveNoMemoryBehind) {
  ServerProcess server({.ctx_size = 16384});
  constexpr std::size_t kLimit = 262'144;  // the default --max-json-nodes at this context
  // The bursts below peak 150 to 460 MiB above the baseline (about 20 to 60 MiB a request); what
  // glibc's arenas keep after them was 2 to 5 MiB alone, and up to 21 MiB while other tests loaded
  // the machine (a fresh clone's `make test`). A leak of what the requests parse would keep far more.
  constexpr long kMarginKb = 24 * 1024;
  constexpr auto kSettle = std::chrono::seconds(60);  // a trim waits for the last large request
  // Ordinary requests first, as many at once as the bursts, so the baseline includes what every
  // request and every HTTP thread allocates.
  const std::string hello = json{{"messages", json::array({kHello})}, {"max_tokens", 2}}.dump();
  for (const auto& warm : post_together(server, "/v1/chat/completions", std::vector<std::string>(8, hello))) {
    ASSERT_EQ(warm.reply.status, 200) << warm.reply.raw;
  }
  const long baseline_kb = bench::read_proc_memory(server.pid()).rss_kb;

  struct Case {
    const char* what;
    std::string path;
    std::vector<std::string> bodies;
    int status;
    std::string code;  // the error's code; empty when served
  };
  const json chat = {{"messages", json::array({kHello})}, {"max_tokens", 1}};                           // 6 values
  const json completion = {{"prompt", "Hello"}, {"max_tokens", 1}, {"temperature", 9}};                  // 4 values
  std::vector<Case> cases = {
      // 8 MB of empty objects in a field nobody reads: 2.7 million values, about 250 MB once parsed.
      {"8 MB of {}", "/v1/chat/completions", {}, 413, "json_too_many_nodes"},
      // Parsed and rendered (10,000 tools), then refused for its length.
      {"10,000 tools", "/v1/chat/completions", {}, 400, "context_length_exceeded"},
      // At the limit: parsed whole, then served, or refused for another field.
      {"chat at the limit", "/v1/chat/completions", {}, 200, ""},
      {"completion at the limit", "/v1/completions", {}, 400, ""},
  };
  for (int i = 0; i < 8; ++i) {
    const json salted = {{"messages", json::array({{{"role", "user"}, {"content", "Hello " + std::to_string(i)}}})}, {"max_tokens", 1}};
    cases[0].bodies.push_back(with_empty_objects(salted, (8'000'000 - 100) / 3));
    cases[1].bodies.push_back(chat_with_tools(10'000, i));
    cases[2].bodies.push_back(with_empty_objects(chat, kLimit - 7));
    cases[3].bodies.push_back(with_empty_objects(completion, kLimit - 5));
  }
  for (const Case& c : cases) {
    const Burst burst = run_burst(server, c.path, c.bodies,
                                  {.tolerance = static_cast<double>(kMarginKb) / static_cast<double>(baseline_kb),
                                   .limit = kSettle,
                                   .target_kb = baseline_kb});
    for (const Timed& r : burst.results) {
      EXPECT_EQ(r.reply.status, c.status) << c.what << ": " << r.reply.raw;
      if (!c.code.empty()) {
        EXPECT_EQ(error_field(r.reply.body, "code"), c.code) << c.what << ": " << r.reply.raw;
      }
    }
    EXPECT_GT(burst.peak_kb, burst.before_kb) << c.what << ": the burst must cost memory while it runs";
    if (kSystemAllocator) {
      EXPECT_LE(burst.after_kb, baseline_kb + kMarginKb)
          << c.what << ": RSS after the burst, baseline " << baseline_kb / 1024 << " MiB, peak " << burst.peak_kb / 1024 << " MiB";
    }
  }
}

}  // namespace
}  // namespace prefixd::testing
