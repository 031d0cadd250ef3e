// Relays between a RequestStream and a client: text is forwarded in order, the end of a request
// produces the right final frames, and a client that goes away cancels its request.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "api/stream_relay.h"

namespace prefixd::api {
namespace {

using nlohmann::json;
using scheduler::FinishReason;
using scheduler::RequestStream;
using scheduler::StreamEvent;

StreamEvent text(std::string s) { return StreamEvent{.kind = StreamEvent::Kind::text, .text = std::move(s)}; }

StreamEvent done(FinishReason finish, std::string error = {}) {
  StreamEvent event{.kind = StreamEvent::Kind::done, .finish = finish, .error = std::move(error)};
  event.usage = {.prompt_tokens = 5, .completion_tokens = 2, .cached_tokens = 0};
  return event;
}

// Plays the scheduler's part of cancellation: once the stream is cancelled, it pushes the final
// `done` event, as the real scheduler promises to.
class CancellationResponder {
 public:
  explicit CancellationResponder(std::shared_ptr<RequestStream> stream)
      : thread_([stream](std::stop_token stop) {
          while (!stop.stop_requested()) {
            if (stream->cancelled()) {
              stream->push(done(FinishReason::cancelled));
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
        }) {}

 private:
  std::jthread thread_;
};

std::vector<json> frames_to_json(const std::vector<std::string>& frames, bool& saw_done) {
  std::vector<json> out;
  saw_done = false;
  for (const auto& chunk : frames) {
    std::size_t at = 0;
    while (at < chunk.size()) {
      const auto end = chunk.find("\n\n", at);
      EXPECT_NE(end, std::string::npos) << chunk;
      const std::string frame = chunk.substr(at, end - at);
      EXPECT_TRUE(frame.starts_with("data: ")) << frame;
      if (frame == "data: [DONE]") {
        saw_done = true;
      } else {
        EXPECT_FALSE(saw_done) << "a frame after [DONE]";
        out.push_back(json::parse(frame.substr(6)));
      }
      at = end + 2;
    }
  }
  return out;
}

ResponseMeta chat_meta() { return {.endpoint = Endpoint::chat, .id = "chatcmpl-x", .created = 1, .model = "m"}; }

TEST(ApiStreamRelay, CollectGathersTextInOrderUntilDone) {
  RequestStream stream;
  stream.push(text("Hel"));
  stream.push(text("lo"));
  stream.push(done(FinishReason::length));
  const auto collected = collect_completion(stream, [] { return false; });
  EXPECT_EQ(collected.text, "Hello");
  EXPECT_EQ(collected.done.finish, FinishReason::length);
  EXPECT_EQ(collected.done.usage.prompt_tokens, 5);
  EXPECT_FALSE(stream.cancelled());
}

TEST(ApiStreamRelay, CollectCancelsWhenTheClientIsGone) {
  auto stream = std::make_shared<RequestStream>();
  CancellationResponder responder(stream);
  stream->push(text("partial"));
  const auto collected = collect_completion(*stream, [] { return true; });
  EXPECT_TRUE(stream->cancelled());
  EXPECT_EQ(collected.done.finish, FinishReason::cancelled);
}

TEST(ApiStreamRelay, CollectNoticesAbortWhileTextKeepsFlowing) {
  // A fast decoder never leaves the stream idle; the abort check must not wait for a lull.
  auto stream = std::make_shared<RequestStream>();
  std::jthread producer([stream](std::stop_token stop) {
    while (!stop.stop_requested() && !stream->cancelled()) {
      stream->push(text("t"));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stream->push(done(FinishReason::cancelled));
  });
  const auto t0 = std::chrono::steady_clock::now();
  const auto collected = collect_completion(*stream, [] { return true; });
  EXPECT_EQ(collected.done.finish, FinishReason::cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(ApiStreamRelay, SseRelayNoticesAbortWhileTextKeepsFlowing) {
  auto stream = std::make_shared<RequestStream>();
  std::jthread producer([stream](std::stop_token stop) {
    while (!stop.stop_requested() && !stream->cancelled()) {
      stream->push(text("t"));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stream->push(done(FinishReason::cancelled));
  });
  SseRelay relay(stream, openai_stream_format(chat_meta(), false), [] { return std::optional<ApiError>(server_busy("stopping")); });
  SseRelay::Step step = SseRelay::Step::more;
  std::string written;
  for (int i = 0; i < 200 && step == SseRelay::Step::more; ++i) {
    step = relay.pump([&written](std::string_view frame) {
      written += frame;
      return true;
    });
  }
  EXPECT_EQ(step, SseRelay::Step::aborted);
  EXPECT_TRUE(stream->cancelled());
  // The stream ends with the reason as an error event, then [DONE], not in the middle of nowhere.
  const auto error_at = written.rfind("data: {\"error\"");
  ASSERT_NE(error_at, std::string::npos);
  EXPECT_NE(written.find("stopping", error_at), std::string::npos);
  EXPECT_TRUE(written.ends_with("data: [DONE]\n\n"));
}

TEST(ApiStreamRelay, SseRelayWritesRoleTextFinishUsageAndDone) {
  auto stream = std::make_shared<RequestStream>();
  SseRelay relay(stream, openai_stream_format(chat_meta(), /*include_usage=*/true), [] { return std::optional<ApiError>(); });
  std::vector<std::string> written;
  auto write = [&](std::string_view frame) {
    written.emplace_back(frame);
    return true;
  };
  stream->push(text("a"));
  stream->push(text("b"));
  stream->push(done(FinishReason::stop));
  SseRelay::Step step = SseRelay::Step::more;
  for (int i = 0; i < 100 && step == SseRelay::Step::more; ++i) step = relay.pump(write);
  ASSERT_EQ(step, SseRelay::Step::finished);

  bool saw_done = false;
  const auto chunks = frames_to_json(written, saw_done);
  EXPECT_TRUE(saw_done);
  ASSERT_EQ(chunks.size(), 5u);  // role, "a", "b", finish, usage
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(chunks[2]["choices"][0]["delta"]["content"], "b");
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[3]["usage"]["prompt_tokens"], 5);
  EXPECT_TRUE(chunks[3].contains("prompt_cache"));
  EXPECT_EQ(chunks[4]["choices"], json::array());
  EXPECT_EQ(chunks[4]["usage"]["completion_tokens"], 2);
  for (const auto& chunk : chunks) EXPECT_EQ(chunk["id"], "chatcmpl-x");
  EXPECT_FALSE(stream->cancelled());
  EXPECT_EQ(relay.pump(write), SseRelay::Step::finished);  // idempotent after the end
}

// A chat whose tools the model may call: the generated text goes out as content and OpenAI's
// delta.tool_calls (id and name first, then the arguments in pieces), and the reply ends
// "tool_calls"; the same text non-streamed gives the same call.
TEST(ApiStreamRelay, SseRelaySendsToolCallDeltasAndEndsWithToolCalls) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])");
  const std::vector<std::string> pieces = {"Let me check.\n<tool", "_call>\n{\"name\": \"get_weather\", \"argu",
                                           "ments\": {\"city\": \"Pa", "ris\"}}\n</tool_call>"};
  auto stream = std::make_shared<RequestStream>();
  SseRelay relay(stream,
                 openai_stream_format(chat_meta(), /*include_usage=*/false,
                                      ToolCallStream(ToolCallFormat::hermes, tools, ToolCallIdGenerator(7))),
                 [] { return std::optional<ApiError>(); });
  std::vector<std::string> written;
  for (const auto& p : pieces) stream->push(text(p));
  stream->push(done(FinishReason::stop));
  while (relay.pump([&](std::string_view f) {
    written.emplace_back(f);
    return true;
  }) == SseRelay::Step::more) {
  }
  bool saw_done = false;
  const auto chunks = frames_to_json(written, saw_done);
  EXPECT_TRUE(saw_done);
  std::string content;
  std::string arguments;
  std::string id;
  std::string name;
  int call_chunks = 0;
  for (const auto& chunk : chunks) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    ++call_chunks;
    const json& call = delta["tool_calls"][0];
    EXPECT_EQ(call["index"], 0);
    if (call.contains("id")) {
      EXPECT_TRUE(id.empty()) << "the id comes once";
      id = call["id"];
      name = call["function"]["name"];
      EXPECT_EQ(call["type"], "function");
    }
    arguments += call["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(content, "Let me check.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(arguments), json({{"city", "Paris"}}));
  EXPECT_GT(call_chunks, 1) << "arguments arrive in pieces";
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");

  std::string whole;
  for (const auto& p : pieces) whole += p;
  const ParsedAssistant parsed = parse_tool_calls(whole, ToolCallFormat::hermes, tools, ToolCallIdGenerator(7));
  const auto body = tool_call_body(chat_meta(), parsed, done(FinishReason::stop));
  const auto& message = body["choices"][0]["message"];
  EXPECT_EQ(message["content"], "Let me check.");
  EXPECT_EQ(message["tool_calls"][0]["id"], id);
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], arguments);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(tool_call_body(chat_meta(), parsed, done(FinishReason::length))["choices"][0]["finish_reason"], "length");
}

TEST(ApiStreamRelay, WithoutIncludeUsageThereIsNoUsageOnlyChunk) {
  auto stream = std::make_shared<RequestStream>();
  SseRelay relay(stream, openai_stream_format(chat_meta(), /*include_usage=*/false), [] { return std::optional<ApiError>(); });
  std::vector<std::string> written;
  stream->push(done(FinishReason::length));
  while (relay.pump([&](std::string_view f) {
    written.emplace_back(f);
    return true;
  }) == SseRelay::Step::more) {
  }
  bool saw_done = false;
  const auto chunks = frames_to_json(written, saw_done);
  ASSERT_EQ(chunks.size(), 2u);  // role, finish (which still carries usage)
  EXPECT_EQ(chunks[1]["usage"]["total_tokens"], 7);
  EXPECT_TRUE(saw_done);
}

TEST(ApiStreamRelay, FailedWriteCancelsTheRequest) {
  auto stream = std::make_shared<RequestStream>();
  CancellationResponder responder(stream);
  SseRelay relay(stream, openai_stream_format(chat_meta(), false), [] { return std::optional<ApiError>(); });
  stream->push(text("a"));
  int writes = 0;
  const auto write = [&](std::string_view) { return ++writes < 2; };  // the role chunk goes out, then the client is gone
  SseRelay::Step step = SseRelay::Step::more;
  for (int i = 0; i < 100 && step == SseRelay::Step::more; ++i) step = relay.pump(write);
  EXPECT_EQ(step, SseRelay::Step::aborted);
  EXPECT_TRUE(stream->cancelled());
}

TEST(ApiStreamRelay, AbortRequestWhileIdleCancels) {
  auto stream = std::make_shared<RequestStream>();
  CancellationResponder responder(stream);
  std::atomic<bool> gone = false;
  SseRelay relay(stream, openai_stream_format(chat_meta(), false), [&] { return gone.load() ? std::optional<ApiError>(server_busy("gone")) : std::nullopt; });
  const auto write = [](std::string_view) { return true; };
  EXPECT_EQ(relay.pump(write), SseRelay::Step::more);
  gone = true;
  EXPECT_EQ(relay.pump(write), SseRelay::Step::aborted);
  EXPECT_TRUE(stream->cancelled());
}

TEST(ApiStreamRelay, DestroyingAnUnfinishedRelayCancels) {
  auto stream = std::make_shared<RequestStream>();
  CancellationResponder responder(stream);
  { SseRelay relay(stream, openai_stream_format(chat_meta(), false), [] { return std::optional<ApiError>(); }); }
  EXPECT_TRUE(stream->cancelled());
}

TEST(ApiStreamRelay, GenerationErrorBecomesAnErrorPayloadThenDone) {
  auto stream = std::make_shared<RequestStream>();
  SseRelay relay(stream, openai_stream_format(chat_meta(), true), [] { return std::optional<ApiError>(); });
  std::vector<std::string> written;
  stream->push(done(FinishReason::error, "decode failed"));
  while (relay.pump([&](std::string_view f) {
    written.emplace_back(f);
    return true;
  }) == SseRelay::Step::more) {
  }
  bool saw_done = false;
  const auto chunks = frames_to_json(written, saw_done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1]["error"]["message"], "decode failed");
  EXPECT_TRUE(saw_done);
}

}  // namespace
}  // namespace prefixd::api

namespace prefixd::api {
namespace {

// A reasoning template's reply: the reasoning goes out as delta.reasoning_content, the answer as
// content, whatever pieces the markers arrive in; after_reply gets both apart.
TEST(ApiStreamRelay, ReasoningAndAnswerLeaveApartWhateverPiecesTheMarkersArriveIn) {
  auto stream = std::make_shared<RequestStream>();
  SplitReply replied;
  SseRelay relay(stream, openai_stream_format(chat_meta(), /*include_usage=*/false), [] { return std::optional<ApiError>(); },
                 [&](const SplitReply& reply) { replied = reply; }, ReasoningSplitter(ReasoningSyntax{}, /*starts_inside=*/true));
  std::vector<std::string> written;
  auto write = [&](std::string_view frame) {
    written.emplace_back(frame);
    return true;
  };
  for (const char* piece : {"Plan: ", "look it up.</th", "ink>\n\nIt ", "rains."}) stream->push(text(piece));
  stream->push(done(FinishReason::stop));
  SseRelay::Step step = SseRelay::Step::more;
  for (int i = 0; i < 100 && step == SseRelay::Step::more; ++i) step = relay.pump(write);
  ASSERT_EQ(step, SseRelay::Step::finished);
  bool saw_done = false;
  std::string reasoning, content;
  for (const json& chunk : frames_to_json(written, saw_done)) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Plan: look it up.");
  EXPECT_EQ(content, "It rains.");
  EXPECT_EQ(replied.reasoning, "Plan: look it up.");
  EXPECT_EQ(replied.content, "It rains.");
}

}  // namespace
}  // namespace prefixd::api

namespace prefixd::api {
namespace {

// A long prefill sends nothing for minutes: the relay writes keep-alive chunks meanwhile (chunks
// that add nothing, since SDKs drop SSE comments before an agent's watchdog sees them), and the
// first one a client that left cannot take ends the request.
TEST(ApiStreamRelay, ASilentStreamIsKeptAliveAndAClientThatLeftIsNoticedByTheWrite) {
  auto stream = std::make_shared<RequestStream>();
  CancellationResponder responder(stream);
  SseRelay relay(stream, openai_stream_format(chat_meta(), false), [] { return std::optional<ApiError>(); }, {}, std::nullopt,
                 RelayOptions{.keep_alive = std::chrono::milliseconds(20)});
  std::vector<std::string> written;
  bool client_there = true;
  auto write = [&](std::string_view frame) {
    if (!client_there) return false;
    written.emplace_back(frame);
    return true;
  };
  const auto silent_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < silent_until) ASSERT_EQ(relay.pump(write), SseRelay::Step::more);
  bool saw_done = false;
  const std::vector<json> chunks = frames_to_json(written, saw_done);
  const auto keep_alives = std::ranges::count_if(chunks, [](const json& c) {
    return c["object"] == "chat.completion.chunk" && c["choices"].size() == 1 && c["choices"][0]["index"] == 0 &&
           c["choices"][0]["delta"] == json::object() && c["choices"][0]["finish_reason"].is_null();
  });
  EXPECT_GE(keep_alives, 2) << "the role chunk, then an empty delta every 20 ms of silence";
  EXPECT_EQ(keep_alives + 1, static_cast<std::ptrdiff_t>(chunks.size())) << "nothing else was sent";
  client_there = false;
  SseRelay::Step step = SseRelay::Step::more;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (step == SseRelay::Step::more && std::chrono::steady_clock::now() < deadline) step = relay.pump(write);
  EXPECT_EQ(step, SseRelay::Step::aborted);
  EXPECT_TRUE(stream->cancelled());
}

}  // namespace
}  // namespace prefixd::api
