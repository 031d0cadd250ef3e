// Response bodies and SSE framing in OpenAI's shapes, plus the prefixd extensions.
#include <gtest/gtest.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "api/openai/responses.h"
#include "api/scheduler_metrics.h"
#include "metrics/registry.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

ResponseMeta chat_meta() { return {.endpoint = Endpoint::chat, .id = "chatcmpl-1", .created = 1700000000, .model = "tiny"}; }
ResponseMeta completion_meta() { return {.endpoint = Endpoint::completion, .id = "cmpl-1", .created = 1700000000, .model = "tiny"}; }

scheduler::StreamEvent done_event(scheduler::FinishReason finish = scheduler::FinishReason::length) {
  scheduler::StreamEvent done{.kind = scheduler::StreamEvent::Kind::done, .finish = finish};
  done.usage = {.prompt_tokens = 12, .completion_tokens = 4, .cached_tokens = 8};
  done.cache = {.outcome = cache::Outcome::hit_extend, .cached_tokens = 8, .fed_tokens = 4, .tier = cache::Tier::device, .in_session = true};
  done.cache.seconds_saved = 0.25;
  done.timings = {.queued_ms = 1, .prefill_ms = 2, .decode_ms = 8};
  return done;
}

// Parses one SSE frame: exactly "data: <payload>\n\n".
json parse_frame(const std::string& frame) {
  EXPECT_TRUE(frame.starts_with("data: ")) << frame;
  EXPECT_TRUE(frame.ends_with("\n\n")) << frame;
  return json::parse(frame.substr(6, frame.size() - 8));
}

std::vector<scheduler::GeneratedLogprobs> two_tokens() {
  return {{.chosen = {.id = 7, .piece = "He", .logprob = -0.5f},
           .top = {{.id = 7, .piece = "He", .logprob = -0.5f}, {.id = 9, .piece = "\xc3", .logprob = -1.5f}}},
          {.chosen = {.id = 8, .piece = "llo", .logprob = -0.25f}, .top = {{.id = 8, .piece = "llo", .logprob = -0.25f}}}};
}

TEST(ApiResponses, ChatLogprobsCarryTokensBytesAndAlternatives) {
  ResponseMeta meta = chat_meta();
  meta.logprobs = true;
  const auto tokens = two_tokens();
  const json body = json::parse(dump_json(completion_body(meta, "Hello", done_event(), tokens)));
  const json& content = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "He");
  EXPECT_EQ(content[0]["id"], 7);
  EXPECT_DOUBLE_EQ(content[0]["logprob"].get<double>(), -0.5);
  EXPECT_EQ(content[0]["bytes"], json({72, 101}));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], json({0xc3})) << "a partial UTF-8 character keeps its byte";
  EXPECT_TRUE(content[0]["top_logprobs"][1]["token"].is_string());
  EXPECT_TRUE(body["choices"][0]["logprobs"]["refusal"].is_null());

  std::size_t offset = 0;
  const json chunk = parse_frame(sse_data(text_chunk(meta, "Hello", tokens, offset)));
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["content"].size(), 2u);
}

TEST(ApiResponses, LegacyLogprobsCountTextOffsetsAcrossChunks) {
  ResponseMeta meta = completion_meta();
  meta.logprobs = true;
  const auto tokens = two_tokens();
  std::size_t offset = 0;
  const json first = parse_frame(sse_data(text_chunk(meta, "He", std::span(tokens).first(1), offset)));
  const json second = parse_frame(sse_data(text_chunk(meta, "llo", std::span(tokens).subspan(1), offset)));
  EXPECT_EQ(first["choices"][0]["logprobs"]["tokens"], json({"He"}));
  EXPECT_EQ(first["choices"][0]["logprobs"]["text_offset"], json::array({0}));
  EXPECT_EQ(second["choices"][0]["logprobs"]["text_offset"], json::array({2}));
  EXPECT_DOUBLE_EQ(second["choices"][0]["logprobs"]["token_logprobs"][0].get<double>(), -0.25);
  EXPECT_DOUBLE_EQ(first["choices"][0]["logprobs"]["top_logprobs"][0]["He"].get<double>(), -0.5);
}

TEST(ApiResponses, SseFrameIsOneDataLineAndABlankLine) {
  const std::string frame = sse_data(text_chunk(chat_meta(), "line one\nline two"));
  // JSON escapes the newline, so a payload never spans lines.
  EXPECT_EQ(frame.find('\n'), frame.size() - 2);
  EXPECT_EQ(parse_frame(frame)["choices"][0]["delta"]["content"], "line one\nline two");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(ApiResponses, InvalidUtf8IsReplacedNotThrown) {
  const std::string frame = sse_data(text_chunk(chat_meta(), std::string("ok\xff")));
  EXPECT_NO_THROW(parse_frame(frame));
}

TEST(ApiResponses, ChatCompletionBody) {
  const json body = json::parse(dump_json(completion_body(chat_meta(), "Hello", done_event())));
  EXPECT_EQ(body["id"], "chatcmpl-1");
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "tiny");
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["message"], json({{"role", "assistant"}, {"content", "Hello"}}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["usage"]["prompt_tokens"], 12);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  EXPECT_EQ(body["usage"]["total_tokens"], 16);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
  EXPECT_EQ(body["prompt_cache"], json({{"outcome", "hit_extend"}, {"cached_tokens", 8}, {"fed_tokens", 4}, {"shifted_tokens", 0},
                                        {"tier", "device"}, {"scope", "in_session"}, {"seconds_saved", 0.25}}));
  EXPECT_DOUBLE_EQ(body["timings"]["prompt_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(body["timings"]["prompt_per_second"].get<double>(), 2000.0);  // 4 fed tokens in 2 ms
  EXPECT_DOUBLE_EQ(body["timings"]["predicted_ms"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(body["timings"]["predicted_per_second"].get<double>(), 500.0);  // 4 tokens in 8 ms
}

TEST(ApiResponses, TextCompletionBody) {
  const json body = json::parse(dump_json(completion_body(completion_meta(), " there", done_event(scheduler::FinishReason::stop))));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], " there");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(body["choices"][0].contains("message"));
}

TEST(ApiResponses, ChatStreamChunks) {
  const json role = parse_frame(sse_data(role_chunk(chat_meta())));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());

  const json text = parse_frame(sse_data(text_chunk(chat_meta(), "Hi")));
  EXPECT_EQ(text["choices"][0]["delta"], json({{"content", "Hi"}}));

  const json finish = parse_frame(sse_data(finish_chunk(chat_meta(), done_event())));
  EXPECT_EQ(finish["choices"][0]["delta"], json::object());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(finish["usage"]["total_tokens"], 16);
  EXPECT_EQ(finish["prompt_cache"]["outcome"], "hit_extend");
  EXPECT_TRUE(finish.contains("timings"));

  const json usage = parse_frame(sse_data(usage_chunk(chat_meta(), done_event())));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
}

TEST(ApiResponses, CompletionStreamChunksCarryText) {
  const json text = parse_frame(sse_data(text_chunk(completion_meta(), "abc")));
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "abc");
  const json finish = parse_frame(sse_data(finish_chunk(completion_meta(), done_event())));
  EXPECT_EQ(finish["choices"][0]["text"], "");
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
}

TEST(ApiResponses, CacheReportOfAColdRequestHasNullTierAndScope) {
  const json report = json::parse(dump_json(prompt_cache_json(scheduler::CacheReport{})));
  EXPECT_EQ(report["outcome"], "cold");
  EXPECT_TRUE(report["tier"].is_null());
  EXPECT_TRUE(report["scope"].is_null());
}

TEST(ApiResponses, TimingsNeverDivideByZero) {
  scheduler::StreamEvent done{.kind = scheduler::StreamEvent::Kind::done};
  const json timings = json::parse(dump_json(timings_json(done)));
  EXPECT_EQ(timings["prompt_per_second"], 0.0);
  EXPECT_EQ(timings["predicted_per_second"], 0.0);
}

TEST(ApiResponses, ModelsList) {
  engine::ModelInfo model;
  model.id = "tiny";
  model.architecture = "llama";
  model.n_ctx_train = 2048;
  model.n_params = 1234;
  const json body = json::parse(dump_json(models_body("alias", model, 5)));
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "alias");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(body["data"][0]["owned_by"], "prefixd");
  EXPECT_EQ(body["data"][0]["meta"]["n_ctx_train"], 2048);
  EXPECT_EQ(body["data"][0]["meta"]["n_params"], 1234);
  EXPECT_EQ(body["data"][0]["meta"]["architecture"], "llama");
  EXPECT_TRUE(body["data"][0]["meta"]["family"].is_string());
}

TEST(ApiResponses, MetricsTextHasHelpTypeAndValueForEveryCounter) {
  scheduler::SchedulerStats stats;
  stats.requests_total = 3;
  stats.prompt_tokens_total = 30;
  stats.prompt_tokens_fed_total = 20;
  stats.generated_tokens_total = 7;
  stats.running = 1;
  stats.queued = 2;
  metrics::Registry registry;
  add_scheduler_metrics(registry, stats);
  const std::string text = registry.text();
  for (const auto& [name, type, value] :
       {std::tuple{"prefixd_requests_total", "counter", "3"}, {"prefixd_prompt_tokens_total", "counter", "30"},
        {"prefixd_prompt_tokens_fed_total", "counter", "20"}, {"prefixd_generated_tokens_total", "counter", "7"},
        {"prefixd_requests_running", "gauge", "1"}, {"prefixd_requests_queued", "gauge", "2"}}) {
    EXPECT_NE(text.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " " + type + "\n"), std::string::npos) << name;
    EXPECT_NE(text.find(std::string("\n") + name + " " + value + "\n"), std::string::npos) << name;
  }
}

// The scheduler's steps whole and by phase, in seconds, with its waits and its decode steps.
TEST(ApiResponses, MetricsTextHasTheStepsWholeAndByPhase) {
  using namespace std::chrono_literals;
  scheduler::SchedulerStats stats;
  stats.steps.observe(3ms);
  stats.step_phases[static_cast<size_t>(scheduler::StepPhase::compute)].observe(2ms);
  stats.step_phases[static_cast<size_t>(scheduler::StepPhase::cache)].observe(1ms);
  for (const auto phase : {scheduler::StepPhase::sampling, scheduler::StepPhase::output, scheduler::StepPhase::scheduling}) {
    stats.step_phases[static_cast<size_t>(phase)].observe(0ms);
  }
  stats.idle = 2500ms;
  stats.decode_steps_total = 1;
  metrics::Registry registry;
  add_scheduler_metrics(registry, stats);
  const std::string text = registry.text();
  const std::string smallest = metrics::format_value(scheduler::SchedulerStats::kStepBounds.front());
  EXPECT_NE(text.find("\nprefixd_step_phase_seconds_bucket{phase=\"compute\",le=\"" + smallest + "\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("\nprefixd_step_phase_seconds_bucket{phase=\"sampling\",le=\"" + smallest + "\"} 1\n"), std::string::npos);
  for (const char* line :
       {"# TYPE prefixd_step_seconds histogram\n", "\nprefixd_step_seconds_bucket{le=\"0.0025\"} 0\n",
        "\nprefixd_step_seconds_bucket{le=\"0.005\"} 1\n", "\nprefixd_step_seconds_sum 0.003\n",
        "\nprefixd_step_seconds_count 1\n", "# TYPE prefixd_step_phase_seconds histogram\n",
        "\nprefixd_step_phase_seconds_sum{phase=\"compute\"} 0.002\n",
        "\nprefixd_step_phase_seconds_sum{phase=\"cache\"} 0.001\n",
        "\nprefixd_step_phase_seconds_count{phase=\"scheduling\"} 1\n",
        "# TYPE prefixd_scheduler_idle_seconds_total counter\n", "\nprefixd_scheduler_idle_seconds_total 2.5\n",
        "# TYPE prefixd_decode_steps_total counter\n", "\nprefixd_decode_steps_total 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

TEST(ApiResponses, IdsAreUniqueAndPrefixed) {
  IdGenerator ids;
  const auto a = ids.next("chatcmpl-");
  const auto b = ids.next("chatcmpl-");
  EXPECT_TRUE(a.starts_with("chatcmpl-"));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace prefixd::api
