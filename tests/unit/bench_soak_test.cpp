// The pure parts of `prefixd-bench soak`: the traffic each client sends (deterministic, every kind
// in the mix, sessions that send their replies back, bad requests the real parser refuses as
// expected), how a finished request is classified, and the verdict on a run.
#include <gtest/gtest.h>

#include <set>

#include "api/openai/request_parser.h"
#include "bench/soak.h"
#include "bench/soak_traffic.h"

namespace prefixd::bench {
namespace {

using nlohmann::json;

CompletionResult answer(const std::string& text) {
  CompletionResult r;
  r.status = 200;
  r.text = text;
  r.finish_reason = "length";
  return r;
}

TEST(SoakTraffic, TheSameSeedSendsTheSameRequests) {
  SoakTraffic a(7, 3);
  SoakTraffic b(7, 3);
  SoakTraffic other(7, 4);
  bool differs = false;
  for (int i = 0; i < 200; ++i) {
    const SoakRequest x = a.next();
    const SoakRequest y = b.next();
    const SoakRequest z = other.next();
    ASSERT_EQ(x.body, y.body) << "request " << i;
    ASSERT_EQ(x.kind, y.kind);
    differs = differs || x.body != z.body;
    a.answered(x, answer("reply " + std::to_string(i)));
    b.answered(y, answer("reply " + std::to_string(i)));
    other.answered(z, answer("reply"));
  }
  EXPECT_TRUE(differs) << "another client sends other traffic";
}

TEST(SoakTraffic, TheMixHasEveryKindAndSessionsSendTheirRepliesBack) {
  SoakTraffic traffic(1, 0);
  std::set<SoakKind> kinds;
  std::set<std::string> system_prompts;
  int continued = 0;
  std::string last_reply;
  for (int i = 0; i < 2000; ++i) {
    const SoakRequest request = traffic.next();
    kinds.insert(request.kind);
    if (request.kind == SoakKind::constrained) {
      const json body = json::parse(request.body);
      EXPECT_EQ(body.at("response_format").at("json_schema").at("schema").at("properties").at("tag").at("enum").size(), 2000u);
      EXPECT_TRUE(body.contains("seed")) << "a sampled request carries its seed";
    }
    if (request.kind == SoakKind::invalid || request.kind == SoakKind::completion || request.kind == SoakKind::constrained) {
      traffic.answered(request, answer(""));
      continue;
    }
    const json body = json::parse(request.body);
    const json& messages = body.at("messages");
    EXPECT_EQ(messages.front().at("role"), "system");
    system_prompts.insert(messages.front().at("content").get<std::string>());
    EXPECT_EQ(messages.back().at("role"), "user");
    if (messages.size() > 2 && !last_reply.empty() && messages[messages.size() - 2].at("content") == last_reply) ++continued;
    last_reply = "reply " + std::to_string(i);
    CompletionResult result = answer(last_reply);
    if (request.kind == SoakKind::chat_cancel) {
      EXPECT_GT(request.cancel_after_reads, 0);
      result.cancelled = true;
      last_reply.clear();  // a stopped reply is not part of the conversation
    }
    traffic.answered(request, result);
  }
  EXPECT_EQ(kinds, (std::set<SoakKind>{SoakKind::chat, SoakKind::chat_stream, SoakKind::chat_cancel,
                                       SoakKind::completion, SoakKind::invalid, SoakKind::constrained}));
  EXPECT_EQ(system_prompts.size(), 4u) << "sessions share a few system prompts";
  EXPECT_GT(continued, 300) << "a session's next turn carries the previous reply";
  EXPECT_GT(traffic.sessions_started(), 100);
}

TEST(SoakTraffic, BadRequestsAreRefusedByTheRealParserWithTheExpectedStatus) {
  SoakTraffic traffic(2, 1);
  const api::ParseOptions options{.model_names = {"default"}};
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const SoakRequest request = traffic.next();
    traffic.answered(request, answer("x"));
    if (request.kind != SoakKind::invalid) continue;
    const auto parsed = api::parse_chat_request(request.body, options);
    if (parsed) {
      // The only bad request the parser lets through is too long for the context: the prompt
      // builder refuses it after tokenizing.
      const auto content_bytes = parsed->chat.messages.at(0).at("content").get<std::string>().size();
      EXPECT_GT(content_bytes, 8192u) << request.body.substr(0, 200);
      continue;
    }
    EXPECT_EQ(parsed.error().status, request.expected_status) << request.body.substr(0, 200);
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(SoakClassify, OutcomesOfEachKind) {
  std::string detail;
  const SoakRequest chat{.kind = SoakKind::chat_stream};
  EXPECT_EQ(classify(chat, answer("hi"), detail), SoakOutcome::completed);
  CompletionResult hung_up = answer("h");
  hung_up.finish_reason.clear();
  hung_up.cancelled = true;
  EXPECT_EQ(classify(chat, hung_up, detail), SoakOutcome::cancelled);
  CompletionResult failed;
  failed.status = 500;
  failed.error = "POST answered 500: internal error";
  EXPECT_EQ(classify(chat, failed, detail), SoakOutcome::unexpected);
  EXPECT_EQ(detail, failed.error);

  const SoakRequest bad{.kind = SoakKind::invalid, .expected_status = 400};
  CompletionResult refused;
  refused.status = 400;
  refused.text = R"({"error": {"message": "'messages' must be an array", "type": "invalid_request_error"}})";
  EXPECT_EQ(classify(bad, refused, detail), SoakOutcome::rejected);
  refused.text = "Bad Request";
  EXPECT_EQ(classify(bad, refused, detail), SoakOutcome::unexpected) << "an error body without OpenAI's shape";
  EXPECT_EQ(classify(bad, answer("accepted"), detail), SoakOutcome::unexpected) << "a bad request that was served";
  CompletionResult no_answer;  // status 0: the connection broke (the server died?)
  EXPECT_EQ(classify(bad, no_answer, detail), SoakOutcome::unexpected);
}

SoakRun passing_run() {
  SoakRun run;
  run.seconds = 10;
  run.budget = SoakBudget{.cache_bytes = 100 << 20, .kv_context_bytes = 50 << 20, .model_bytes = 300 << 20, .margin_bytes = 100 << 20};
  for (int t = 0; t < 10; ++t) run.rss.emplace_back(t, 400 * 1024);
  run.hwm_kb = 410 * 1024;
  run.events = {{1.0, SoakKind::chat, SoakOutcome::completed, ""},
                {2.0, SoakKind::chat_cancel, SoakOutcome::cancelled, ""},
                {3.0, SoakKind::invalid, SoakOutcome::rejected, ""},
                {4.0, SoakKind::reset, SoakOutcome::completed, ""}};
  return run;
}

TEST(SoakVerdict, ACleanRunWithinItsLimitPasses) {
  const SoakRun run = passing_run();
  EXPECT_EQ(run.budget.limit(), 550ull << 20);
  EXPECT_TRUE(soak_failures(run).empty());
  const std::string summary = soak_summary(run, SoakOptions{});
  EXPECT_NE(summary.find("PASS"), std::string::npos);
  EXPECT_NE(summary.find("Limit: 550 MiB"), std::string::npos) << summary;
  EXPECT_NE(summary.find("max 400 MiB"), std::string::npos) << summary;
  EXPECT_TRUE(soak_results(run, SoakOptions{}).at("pass").get<bool>());
}

TEST(SoakVerdict, RssOverTheLimitFailsEvenBetweenSamples) {
  SoakRun run = passing_run();
  run.rss.emplace_back(11, 560 * 1024);
  ASSERT_EQ(soak_failures(run).size(), 1u);
  EXPECT_NE(soak_failures(run)[0].find("RSS peaked at 560 MiB"), std::string::npos);
  run = passing_run();
  run.hwm_kb = 551 * 1024;  // a peak no sample caught
  EXPECT_EQ(soak_failures(run).size(), 1u);
}

TEST(SoakVerdict, AnUnexpectedRequestADeadServerOrALeftoverRequestFails) {
  SoakRun run = passing_run();
  run.events.push_back({5.0, SoakKind::completion, SoakOutcome::unexpected, "POST /v1/completions answered 500"});
  ASSERT_EQ(soak_failures(run).size(), 1u);
  EXPECT_NE(soak_failures(run)[0].find("answered 500"), std::string::npos);
  EXPECT_NE(soak_summary(run, SoakOptions{}).find("FAIL"), std::string::npos);
  run = passing_run();
  run.server_alive = false;
  EXPECT_EQ(soak_failures(run).size(), 1u);
  run = passing_run();
  run.idle_after = false;
  EXPECT_EQ(soak_failures(run).size(), 1u);
}

TEST(SoakPlot, TheScriptDrawsRssAgainstTheLimitAndMarksResets) {
  const SoakPlot plot = soak_plot(passing_run(), "/data", "/out/soak.png");
  EXPECT_NE(plot.script.find("\"/out/soak.png\""), std::string::npos);
  EXPECT_NE(plot.script.find("limit (550 MiB)"), std::string::npos);
  EXPECT_NE(plot.script.find("set arrow from 4.0"), std::string::npos) << "the cache reset at 4 s";
  EXPECT_NE(plot.rss_data.find("9.0 400.0"), std::string::npos);
  EXPECT_NE(plot.requests_data.find("3.00 1 1 1 0"), std::string::npos) << plot.requests_data;
}

}  // namespace
}  // namespace prefixd::bench
