// What a stream sends while the prompt waits or is prefilled, in each protocol: keep-alives that
// agents' stream watchdogs count (they never see SSE comments, and Claude Code's and qwen-code's
// SDKs drop Anthropic's ping), that add nothing to the reply, and prompt-processing progress when
// the request asked for it (return_progress).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/anthropic/anthropic_stream.h"
#include "api/responses/responses_api.h"
#include "api/responses/responses_stream.h"
#include "api/stream_relay.h"

namespace prefixd::api {
namespace {

using nlohmann::json;
using scheduler::StreamEvent;

struct Frame {
  std::string event;  // empty for a data-only frame
  json data;          // null for a comment
  std::string raw;
};

// Splits written SSE text into frames, each either a comment or an (event, data) pair.
std::vector<Frame> parse(const std::string& text) {
  std::vector<Frame> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << text.substr(at);
    if (end == std::string::npos) break;
    Frame frame{.raw = text.substr(at, end - at)};
    std::size_t line_at = 0;
    while (line_at <= frame.raw.size()) {
      const auto line_end = std::min(frame.raw.find('\n', line_at), frame.raw.size());
      const std::string line = frame.raw.substr(line_at, line_end - line_at);
      if (line.starts_with("event: ")) frame.event = line.substr(7);
      if (line.starts_with("data: ") && line != "data: [DONE]") frame.data = json::parse(line.substr(6));
      line_at = line_end + 1;
    }
    out.push_back(std::move(frame));
    at = end + 2;
  }
  return out;
}

scheduler::PromptProgress progress(std::int32_t processed) {
  return {.total = 4096, .cached = 1024, .processed = processed, .elapsed_ms = 850};
}

StreamEvent done_event() {
  StreamEvent e{.kind = StreamEvent::Kind::done, .finish = scheduler::FinishReason::stop};
  e.usage = {.prompt_tokens = 5, .completion_tokens = 2, .cached_tokens = 0};
  return e;
}

ResponseMeta meta(Endpoint endpoint, std::string id) {
  return {.endpoint = endpoint, .id = std::move(id), .created = 1, .model = "m"};
}

TEST(StreamLiveness, OpenAiKeepAlivesAreChunksThatAddNothing) {
  auto chat = openai_stream_format(meta(Endpoint::chat, "chatcmpl-x"), false);
  const std::vector<Frame> frames = parse(chat->keep_alive());
  ASSERT_EQ(frames.size(), 1U);
  const json& chunk = frames[0].data;
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["id"], "chatcmpl-x");
  ASSERT_EQ(chunk["choices"].size(), 1U);
  EXPECT_EQ(chunk["choices"][0]["index"], 0) << "the Vercel AI SDK requires every choice's index";
  EXPECT_EQ(chunk["choices"][0]["delta"], json::object());
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(chunk.contains("usage")) << "a usage on a keep-alive would be read as the reply's";

  auto completion = openai_stream_format(meta(Endpoint::completion, "cmpl-x"), false);
  const json text_chunk = parse(completion->keep_alive()).at(0).data;
  EXPECT_EQ(text_chunk["choices"][0]["text"], "");
}

TEST(StreamLiveness, OpenAiProgressHasLlamaServersShape) {
  auto chat = openai_stream_format(meta(Endpoint::chat, "chatcmpl-x"), false);
  const json chunk = parse(chat->progress(progress(2048))).at(0).data;
  EXPECT_EQ(chunk["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", nullptr}}));
  EXPECT_EQ(chunk["prompt_progress"], (json{{"total", 4096}, {"cache", 1024}, {"processed", 2048}, {"time_ms", 850.0}}));
}

TEST(StreamLiveness, TheRelaySendsProgressOnlyWhenAskedFor) {
  for (const bool asked : {false, true}) {
    auto stream = std::make_shared<scheduler::RequestStream>();
    SseRelay relay(stream, openai_stream_format(meta(Endpoint::chat, "chatcmpl-x"), false),
                   [] { return std::optional<ApiError>(); }, {}, std::nullopt, RelayOptions{.progress = asked});
    stream->push(StreamEvent{.kind = StreamEvent::Kind::progress, .progress = progress(1024)});
    stream->push(StreamEvent{.kind = StreamEvent::Kind::progress, .progress = progress(4095)});
    stream->push(StreamEvent{.kind = StreamEvent::Kind::text, .text = "Hi"});
    stream->push(done_event());
    std::string written;
    while (relay.pump([&](std::string_view f) { written += f; return true; }) == SseRelay::Step::more) {
    }
    int with_progress = 0;
    std::string content;
    for (const Frame& f : parse(written)) {
      if (f.data.is_null()) continue;
      if (f.data.contains("prompt_progress")) ++with_progress;
      const json& delta = f.data["choices"][0]["delta"];
      if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
    }
    EXPECT_EQ(with_progress, asked ? 2 : 0);
    EXPECT_EQ(content, "Hi") << "progress adds nothing to the reply";
  }
}

// The Messages events a client assembles a message from: content blocks by index.
struct Assembled {
  std::vector<std::string> types;
  std::vector<std::string> texts;
  int message_starts = 0;
  int pings = 0;
};

Assembled assemble(const std::vector<Frame>& frames) {
  Assembled out;
  for (const Frame& f : frames) {
    if (f.event == "message_start") ++out.message_starts;
    if (f.event == "ping") ++out.pings;
    if (f.event == "content_block_start") {
      EXPECT_EQ(f.data["index"].get<std::size_t>(), out.types.size()) << "blocks open in index order";
      out.types.push_back(f.data["content_block"]["type"]);
      out.texts.emplace_back();
    }
    if (f.event == "content_block_delta") {
      const auto index = f.data["index"].get<std::size_t>();
      EXPECT_LT(index, out.types.size());
      if (index >= out.types.size()) continue;
      const json& delta = f.data["delta"];
      if (delta["type"] == "text_delta") out.texts[index] += delta["text"].get<std::string>();
      if (delta["type"] == "thinking_delta") out.texts[index] += delta["thinking"].get<std::string>();
    }
  }
  return out;
}

TEST(StreamLiveness, MessagesKeepAlivesOpenTheTextBlockEarlyAndTheReplyContinuesInIt) {
  auto format = anthropic_stream_format(meta(Endpoint::chat, "msg_x"), std::nullopt, std::nullopt);
  std::string written = format->open();
  const std::string first = format->keep_alive();  // each call in order: a format's frames are numbered
  const std::vector<Frame> first_frames = parse(first);
  ASSERT_EQ(first_frames.size(), 2U);
  EXPECT_EQ(first_frames[0].event, "content_block_start") << "watchdogs count content events, not pings";
  EXPECT_EQ(first_frames[1].event, "content_block_delta");
  written += first;
  written += format->keep_alive();
  written += format->text(StreamEvent{.text = "Hel"});
  written += format->text(StreamEvent{.text = "lo"});
  written += format->done(done_event());
  const Assembled message = assemble(parse(written));
  EXPECT_EQ(message.message_starts, 1) << "message_start is never repeated (the SDK's MessageStream rejects it)";
  EXPECT_EQ(message.types, std::vector<std::string>{"text"}) << "one block: the keep-alives' is the reply's";
  EXPECT_EQ(message.texts, std::vector<std::string>{"Hello"});
}

TEST(StreamLiveness, MessagesReasoningAfterAnEarlyTextBlockGetsABlockOfItsOwn) {
  auto format = anthropic_stream_format(meta(Endpoint::chat, "msg_x"), std::nullopt, std::nullopt);
  std::string written = format->open();
  written += format->keep_alive();
  written += format->reasoning("Think.");
  written += format->keep_alive();
  written += format->text(StreamEvent{.text = "Answer."});
  written += format->done(done_event());
  const Assembled message = assemble(parse(written));
  EXPECT_EQ(message.types, (std::vector<std::string>{"text", "thinking", "text"}));
  EXPECT_EQ(message.texts, (std::vector<std::string>{"", "Think.", "Answer."}))
      << "the early block stays empty, and an empty text block adds nothing to a message sent back";
}

TEST(StreamLiveness, MessagesProgressRidesOnAPing) {
  auto format = anthropic_stream_format(meta(Endpoint::chat, "msg_x"), std::nullopt, std::nullopt);
  const std::vector<Frame> frames = parse(format->progress(progress(100)));
  ASSERT_EQ(frames.size(), 1U);
  EXPECT_EQ(frames[0].event, "ping");
  EXPECT_EQ(frames[0].data["prompt_progress"]["processed"], 100);
}

TEST(StreamLiveness, ResponsesRepeatInProgressUntilTheFirstOutput) {
  ParseOptions options;
  options.model_names = {"m"};
  auto request = parse_responses_request(R"({"model": "m", "input": "hi", "stream": true})", options);
  ASSERT_TRUE(request.has_value());
  auto format = responses_stream_format(meta(Endpoint::chat, "resp_x"), *request, std::nullopt, {});
  std::vector<Frame> frames = parse(format->open());
  ASSERT_EQ(frames.size(), 2U);
  EXPECT_EQ(frames[0].event, "response.created");
  std::string waiting = format->keep_alive();
  waiting += format->progress(progress(10));
  for (const Frame& f : parse(waiting)) {
    EXPECT_EQ(f.event, "response.in_progress");
    EXPECT_EQ(f.data["response"]["status"], "in_progress");
    EXPECT_EQ(f.data["response"]["output"], json::array()) << "a repeat replaces the snapshot: it must have no output";
    frames.push_back(f);
  }
  EXPECT_EQ(frames.back().data["prompt_progress"]["processed"], 10);
  for (std::size_t i = 0; i < frames.size(); ++i) EXPECT_EQ(frames[i].data["sequence_number"], i);
  (void)format->text(StreamEvent{.text = "Hi"});
  EXPECT_TRUE(format->progress(progress(20)).empty()) << "no in_progress once output began";
  const std::vector<Frame> later = parse(format->keep_alive());
  ASSERT_EQ(later.size(), 1U);
  EXPECT_TRUE(later[0].data.is_null()) << "a comment once text flows: " << later[0].raw;
}

}  // namespace
}  // namespace prefixd::api
