// The pure parts of `prefixd-bench bench`: statistics, formatting, prompt generators, SSE reading.
#include <gtest/gtest.h>

#include "bench/prompts.h"
#include "bench/sse.h"
#include "bench/stats.h"
#include "bench/table.h"

namespace prefixd::bench {
namespace {

TEST(BenchStats, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(summarize({5, 1, 3}).median, 3);
  EXPECT_DOUBLE_EQ(summarize({4, 1, 3, 2}).median, 2.5);
  const Summary s = summarize({7, 2, 9, 4});
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.min, 2);
  EXPECT_DOUBLE_EQ(s.max, 9);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
}

TEST(BenchStats, EmptyInputIsNotAvailable) {
  const Summary s = summarize({});
  EXPECT_EQ(s.n, 0u);
  EXPECT_EQ(format_summary(s), "n/a");
}

TEST(BenchStats, Formatting) {
  EXPECT_EQ(format_number(1234.4), "1234");
  EXPECT_EQ(format_number(12.34), "12.3");
  EXPECT_EQ(format_number(1.234), "1.23");
  EXPECT_EQ(format_ms(-1), "n/a");
  EXPECT_EQ(format_ms(2.5), "2.50 ms");
  EXPECT_EQ(format_summary(summarize({10, 20, 30})), "20.0 (10.0–30.0)");
  EXPECT_EQ(format_summary(summarize({42})), "42.0");
}

TEST(BenchStats, Ratio) {
  EXPECT_EQ(format_ratio(ratio(1000, 10)), "100×");
  EXPECT_EQ(format_ratio(ratio(3, 2)), "1.50×");
  EXPECT_FALSE(ratio(5, 0).has_value());
  EXPECT_FALSE(ratio(-1, 3).has_value());  // an unmeasured numerator
  EXPECT_EQ(format_ratio(ratio(5, 0)), "n/a");
}

TEST(BenchPrompts, TextIsDeterministicAndGrowsByAppending) {
  const std::string text = make_text(7, 50);
  EXPECT_EQ(text, make_text(7, 50));
  EXPECT_NE(text, make_text(8, 50));
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 49);
  const std::string longer = make_text(7, 80);
  EXPECT_TRUE(longer.starts_with(text));
  EXPECT_TRUE(std::isupper(static_cast<unsigned char>(text[0])));
}

TEST(BenchPrompts, UniquePrefixTokensCountsTheTrie) {
  EXPECT_EQ(unique_prefix_tokens({}), 0u);
  EXPECT_EQ(unique_prefix_tokens({{1, 2, 3}}), 3u);
  // Shared prefix {1,2} once, then the distinct tails.
  EXPECT_EQ(unique_prefix_tokens({{1, 2, 3}, {1, 2, 4, 5}, {9}}), 2u + 1u + 2u + 1u);
  EXPECT_EQ(unique_prefix_tokens({{1, 2, 3}, {1, 2, 3}}), 3u);  // duplicates add nothing
  EXPECT_EQ(unique_prefix_tokens({{1, 2}, {1, 2, 3}}), 3u);     // a prefix of another
}

TEST(BenchPrompts, SplitArgs) {
  EXPECT_EQ(split_args(""), std::vector<std::string>{});
  EXPECT_EQ(split_args("  --a 1\t--b  "), (std::vector<std::string>{"--a", "1", "--b"}));
  EXPECT_EQ(split_args("--alias 'my model' --x \"\""), (std::vector<std::string>{"--alias", "my model", "--x", ""}));
  EXPECT_THROW(split_args("--alias 'open"), std::invalid_argument);
}

TEST(BenchTable, AlignsColumnsByCodePoints) {
  Table t({"arm", "ratio"});
  t.add_row({"cold", "120×"});
  t.add_row({"warm"});
  EXPECT_EQ(t.render(),
            "| arm  | ratio |\n"
            "|------|-------|\n"
            "| cold | 120×  |\n"
            "| warm |       |\n");
}

TEST(BenchSse, ParserSplitsEventsAcrossArbitraryChunks) {
  const std::string stream = ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata:[DONE]\n\n";
  for (std::size_t piece : {1u, 3u, 7u, 1000u}) {
    SseParser parser;
    std::vector<std::string> events;
    for (std::size_t i = 0; i < stream.size(); i += piece) {
      for (auto& e : parser.feed(std::string_view(stream).substr(i, piece))) events.push_back(std::move(e));
    }
    EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "line1\nline2", "[DONE]"})) << "piece " << piece;
  }
}

// A chat stream as prefixd sends it: role chunk, text chunks, the finish chunk with the reports.
constexpr const char* kChatStream =
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
    "\"finish_reason\":null}]}\n\n"
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n"
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n"
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"
    "\"usage\":{\"prompt_tokens\":2048,\"completion_tokens\":2,\"total_tokens\":2050,\"prompt_tokens_details\":{\"cached_tokens\":2047}},"
    "\"prompt_cache\":{\"outcome\":\"hit_extend\",\"cached_tokens\":2047,\"fed_tokens\":1,\"tier\":\"device\",\"scope\":\"session\"},"
    "\"timings\":{\"queued_ms\":0.1,\"prompt_n\":1,\"prompt_ms\":3.5,\"prompt_per_second\":285.7,\"predicted_n\":2,"
    "\"predicted_ms\":7.25,\"predicted_per_second\":275.8}}\n\n"
    "data: [DONE]\n\n";

TEST(BenchSse, ReaderCollectsTextAndReports) {
  StreamReader reader;
  const std::string stream = kChatStream;
  const auto role_end = stream.find("\n\n") + 2;
  reader.feed(stream.substr(0, role_end));
  EXPECT_FALSE(reader.first_token_seen()) << "the role chunk is not a token";
  reader.feed(stream.substr(role_end, 10));
  EXPECT_FALSE(reader.first_token_seen());
  reader.feed(stream.substr(role_end + 10));
  EXPECT_TRUE(reader.first_token_seen());
  EXPECT_TRUE(reader.done());
  const auto& r = reader.result();
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "Hello");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.prompt_tokens, 2048);
  EXPECT_EQ(r.completion_tokens, 2);
  EXPECT_EQ(r.cached_tokens, 2047);
  EXPECT_EQ(r.outcome, "hit_extend");
  EXPECT_EQ(r.fed_tokens, 1);
  EXPECT_EQ(r.tier, "device");
  EXPECT_DOUBLE_EQ(r.prompt_ms, 3.5);
  EXPECT_EQ(r.predicted_n, 2);
  EXPECT_DOUBLE_EQ(r.predicted_ms, 7.25);
}

TEST(BenchSse, FinishWithoutTextCountsAsFirstToken) {
  // A one-token completion whose token renders as nothing still ends with a finish reason.
  StreamReader reader;
  reader.feed("data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":1}}\n\n");
  EXPECT_TRUE(reader.first_token_seen());
  EXPECT_EQ(reader.result().completion_tokens, 1);
  EXPECT_FALSE(reader.done());
}

TEST(BenchSse, ErrorPayloadBecomesTheError) {
  StreamReader reader;
  reader.feed("data: {\"error\":{\"message\":\"generation failed\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(reader.result().error, "generation failed");
  EXPECT_FALSE(reader.first_token_seen());
}

TEST(BenchResult, ErrorMessageOfAnApiError) {
  EXPECT_EQ(error_message(R"({"error":{"message":"no route for GET /x","code":"not_found"}})"), "no route for GET /x");
  EXPECT_EQ(error_message("plain text"), "plain text");
}

}  // namespace
}  // namespace prefixd::bench
