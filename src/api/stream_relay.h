// prefixd api — moves one request's events from its scheduler::RequestStream to the client.
//
// Both relays run on an HTTP worker thread and poll: the scheduler never blocks on a slow client,
// and a client that goes away (or a server that stops) is noticed within one poll interval, after
// which the request is cancelled and its stream drained to the final `done` event.
#pragma once

#include "api/tools/tool_call_stream.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/errors.h"
#include "api/reasoning/reasoning.h"
#include "api/openai/responses.h"
#include "scheduler/request.h"

namespace prefixd::api {

inline constexpr std::chrono::milliseconds kPollInterval{50};
// A stream silent this long (a long prompt waiting or in prefill) gets a keep-alive: agents abort
// a stream that delivers no event for a while (qwen-code after 240 s, Claude Code after 300 s),
// HTTP clients a body that stays silent (Node's fetch after 300 s), and only a write tells a
// client that closed its connection from one that waits.
inline constexpr std::chrono::seconds kKeepAliveInterval{15};
// After cancel(), how long to wait for the scheduler's `done` before giving up on the stream.
inline constexpr std::chrono::seconds kDrainLimit{30};

// Cancels `stream` (unless done) and waits for its `done` event. Returns that event, or a
// synthesized cancelled one if the scheduler did not answer within kDrainLimit.
scheduler::StreamEvent cancel_and_drain(scheduler::RequestStream& stream);

struct CollectedCompletion {
  std::string text;
  std::vector<scheduler::GeneratedLogprobs> logprobs;
  scheduler::StreamEvent done;
};

// Non-streaming: gathers all text until `done`. `should_abort` is polled while waiting; when it
// turns true the request is cancelled and the result's finish reason is `cancelled`.
CollectedCompletion collect_completion(scheduler::RequestStream& stream, const std::function<bool()>& should_abort);

// What one wire protocol writes for the events of a streamed reply: the relay below does the
// waiting, the client checks and the cancelling; a format only turns events into frames.
class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  // Frames before the first event (OpenAI's role chunk, Anthropic's message_start); may be empty.
  virtual std::string open() = 0;
  // The frames of one text event (possibly none while a tool-call parser holds text back). With a
  // reasoning template, the event holds only the answer's text; the reasoning comes before it
  // through reasoning().
  virtual std::string text(const scheduler::StreamEvent& event) = 0;
  // The frames of a piece of the reply's reasoning (reasoning.h): OpenAI's reasoning_content,
  // Anthropic's thinking block, the Responses API's reasoning item. Never called with "".
  virtual std::string reasoning(std::string_view text) = 0;
  // The last frames, of the `done` event: the finish, usage, the end of the stream.
  virtual std::string done(const scheduler::StreamEvent& event) = 0;
  // The frames that end a stream the server stopped (shutdown, the client gone) with `why`.
  virtual std::string stopped(const ApiError& why) = 0;
  // Frames that add nothing to the reply but that clients count as activity: SDKs drop SSE
  // comments and Anthropic's `ping` before an agent's stream watchdog sees them, so each protocol
  // sends an event of its own that changes nothing (an empty delta, a repeated in-progress).
  virtual std::string keep_alive() { return ": keep-alive\n\n"; }
  // The frames of a prompt-processing progress event (return_progress); may be empty.
  virtual std::string progress(const scheduler::PromptProgress& progress) = 0;
};

// OpenAI's chat and legacy completion chunks, ending with [DONE]. `tool_calls`: the parser for a
// chat whose tools the model may call (tool_calls.h); the text then goes out as content and
// tool-call deltas, and a reply that called ends "tool_calls".
std::unique_ptr<StreamFormat> openai_stream_format(ResponseMeta meta, bool include_usage,
                                                   std::optional<ToolCallStream> tool_calls = std::nullopt);

struct RelayOptions {
  bool progress = false;  // the request asked for prompt-processing progress (return_progress)
  std::chrono::milliseconds keep_alive = kKeepAliveInterval;
};

// Streaming: turns events into SSE frames, one pump() call at a time.
class SseRelay {
 public:
  enum class Step { more, finished, aborted };
  using Write = std::function<bool(std::string_view frame)>;  // false: the client is gone
  // Polled while streaming: an error means the request must stop now (the server is shutting
  // down, the client went away); the stream then ends with the format's stopped() frames.
  using StopCheck = std::function<std::optional<ApiError>()>;
  // Called with the whole reply (its answer, and its reasoning when the template reasons) once a
  // reply that ran to its end was sent.
  using ReplyDone = std::function<void(const SplitReply& reply)>;

  // `reasoning`: splits the reply's reasoning from its answer (a template that reasons); the
  // answer alone reaches format->text() and `after_reply`.
  SseRelay(std::shared_ptr<scheduler::RequestStream> stream, std::unique_ptr<StreamFormat> format, StopCheck should_stop,
           ReplyDone after_reply = {}, std::optional<ReasoningSplitter> reasoning = std::nullopt,
           RelayOptions options = {});
  ~SseRelay();  // aborts if the stream has not finished
  SseRelay(const SseRelay&) = delete;
  SseRelay& operator=(const SseRelay&) = delete;

  // Waits up to kPollInterval for events and writes what arrived. `finished` means the final
  // frames were written; `aborted` means the request was cancelled.
  Step pump(const Write& write);
  // Cancels and drains unless already finished. Idempotent.
  void abort();
  // The next pump() that writes no event writes a keep-alive, however recent the last write: the
  // transport wants a write to learn whether a client that ended its input is still there.
  void keep_alive_now() { last_write_ = {}; }

 private:
  bool write_event(const scheduler::StreamEvent& event, const Write& write);
  // The frames of the reasoning and the answer in `split`; `event` carries the log-probabilities.
  std::string split_frames(SplitReply split, const scheduler::StreamEvent& event);

  std::shared_ptr<scheduler::RequestStream> stream_;
  std::unique_ptr<StreamFormat> format_;
  StopCheck should_stop_;
  std::chrono::steady_clock::time_point next_check_ = std::chrono::steady_clock::now();
  RelayOptions options_;
  std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
  bool opened_ = false;
  bool ended_ = false;
  ReplyDone after_reply_;
  std::optional<ReasoningSplitter> reasoning_;
  SplitReply reply_;  // kept only for after_reply_
};

}  // namespace prefixd::api
