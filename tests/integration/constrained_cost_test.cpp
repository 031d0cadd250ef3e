// What constrained output may cost, through the real server: schemas the server will not build are
// the client's 400s (never 5xx, which a router would retry), and a huge enum is served while other
// clients keep decoding.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <iostream>
#include <set>
#include <string>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

json chat_with_schema(const json& schema, int max_tokens) {
  return {{"messages", json::array({{{"role", "user"}, {"content", "Pick one."}}})},
          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "pick"}, {"schema", schema}}}}},
          {"max_tokens", max_tokens},
          {"seed", 7}};
}

TEST(ConstrainedCost, SchemasTheServerWillNotBuildAre400sNamingThePath) {
  ServerProcess server({.extra_args = {"--max-grammar-rules", "100"}});
  auto client = server.client();
  // Letters from a fixed pseudo-random sequence: few subtrees of the trie repeat, so its rules
  // (which share equal bodies) number in the thousands.
  json big_enum = json::array();
  std::uint64_t state = 12345;
  for (int i = 0; i < 5000; ++i) {
    std::string value;
    for (int c = 0; c < 8; ++c) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      value.push_back(static_cast<char>('a' + (state >> 33) % 26));
    }
    big_enum.push_back(value);
  }
  const std::pair<json, std::string> refused[] = {
      {json::parse(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})"), "$.$defs.a.$ref"},
      {json::parse(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})"), "$.anyOf[0].$ref"},
      {json::parse(R"({"type": "string", "minLength": 2000000})"), "$.minLength"},
      {json::parse(R"({"type": "array", "minItems": 1000001})"), "$.minItems"},
      {json{{"enum", big_enum}}, "--max-grammar-rules"},
  };
  for (const auto& [schema, named] : refused) {
    const JsonReply reply = post_json(*client, "/v1/chat/completions", chat_with_schema(schema, 4));
    EXPECT_EQ(reply.status, 400) << schema.dump().substr(0, 200) << ": " << reply.raw;
    if (reply.status != 400) continue;
    EXPECT_EQ(reply.body["error"]["type"], "invalid_request_error") << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], "response_format.json_schema.schema") << reply.raw;
    EXPECT_NE(reply.body["error"]["message"].get<std::string>().find(named), std::string::npos) << reply.raw;
  }
  // Counts the grammar engine refuses in one repetition (2,000 and more) are written in chunks and
  // served; no reply can finish such a string in four tokens.
  for (const char* served : {R"({"type": "string", "minLength": 100000})", R"({"type": "array", "minItems": 100000})"}) {
    const JsonReply reply = post_json(*client, "/v1/chat/completions", chat_with_schema(json::parse(served), 4));
    EXPECT_EQ(reply.status, 200) << served << ": " << reply.raw;
    EXPECT_EQ(reply.body["choices"][0]["finish_reason"], "length") << reply.raw;
  }
}

// 100,000 values: as a trie the grammar's per-token walk does not grow with the values, and the
// masked draws run beside the batch. The enum reply is one of the values; the plain request beside
// it completes. Its decode speed alone and beside the enum is printed (benchmarks carry the claim).
TEST(ConstrainedCost, AHundredThousandValueEnumIsServedWhileAnotherClientDecodes) {
  ServerProcess server;
  json values = json::array();
  std::set<std::string> allowed;
  for (int i = 0; i < 100'000; ++i) {
    values.push_back("item-" + std::to_string(i * 7919 % 1'000'003));
    allowed.insert(values.back().get<std::string>());
  }
  const json plain = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me a story."}}})},
                      {"max_tokens", 48}, {"ignore_eos", true}, {"seed", 3}, {"cache_prompt", false}};
  auto client = server.client();
  const JsonReply alone = post_json(*client, "/v1/chat/completions", plain);
  ASSERT_EQ(alone.status, 200) << alone.raw;

  auto constrained = std::async(std::launch::async, [&] {
    return post_json(*server.client(), "/v1/chat/completions", chat_with_schema(json{{"enum", values}}, 40));
  });
  const JsonReply beside = post_json(*client, "/v1/chat/completions", plain);
  const JsonReply picked = constrained.get();
  ASSERT_EQ(beside.status, 200) << beside.raw;
  EXPECT_EQ(beside.body["usage"]["completion_tokens"], 48);
  ASSERT_EQ(picked.status, 200) << picked.raw.substr(0, 500);
  const json value = json::parse(picked.body["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(value.is_string()) << picked.raw.substr(0, 500);
  EXPECT_TRUE(allowed.contains(value.get<std::string>())) << value.dump();
  auto per_token_ms = [](const JsonReply& r) {
    return r.body["timings"]["predicted_ms"].get<double>() / r.body["usage"]["completion_tokens"].get<double>();
  };
  if (alone.body.contains("timings") && beside.body.contains("timings")) {
    std::cout << "plain request decode: alone " << per_token_ms(alone) << " ms/token, beside the enum request "
              << per_token_ms(beside) << " ms/token\n";
  }
}

}  // namespace
}  // namespace prefixd::testing
