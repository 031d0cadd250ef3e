// prefixd api — moves one request's events from its scheduler::RequestStream to the client.
//
// Both relays run on an HTTP worker thread and poll: the scheduler never blocks on a slow client,
// and a client that goes away (or a server that stops) is noticed within one poll interval, after
// which the request is cancelled and its stream drained to the final `done` event.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/responses.h"
#include "scheduler/request.h"

namespace prefixd::api {

inline constexpr std::chrono::milliseconds kPollInterval{50};
// After cancel(), how long to wait for the scheduler's `done` before giving up on the stream.
inline constexpr std::chrono::seconds kDrainLimit{30};

// Cancels `stream` (unless done) and waits for its `done` event. Returns that event, or a
// synthesized cancelled one if the scheduler did not answer within kDrainLimit.
scheduler::StreamEvent cancel_and_drain(scheduler::RequestStream& stream);

struct CollectedCompletion {
  std::string text;
  scheduler::StreamEvent done;
};

// Non-streaming: gathers all text until `done`. `should_abort` is polled while waiting; when it
// turns true the request is cancelled and the result's finish reason is `cancelled`.
CollectedCompletion collect_completion(scheduler::RequestStream& stream, const std::function<bool()>& should_abort);

// Streaming: turns events into SSE frames, one pump() call at a time (httplib calls its chunked
// content provider repeatedly).
class SseRelay {
 public:
  enum class Step { more, finished, aborted };
  using Write = std::function<bool(std::string_view frame)>;  // false: the client is gone

  SseRelay(std::shared_ptr<scheduler::RequestStream> stream, ResponseMeta meta, bool include_usage,
           std::function<bool()> should_abort);
  ~SseRelay();  // aborts if the stream has not finished
  SseRelay(const SseRelay&) = delete;
  SseRelay& operator=(const SseRelay&) = delete;

  // Waits up to kPollInterval for events and writes what arrived. `finished` means the final
  // frames ([DONE] included) were written; `aborted` means the request was cancelled.
  Step pump(const Write& write);
  // Cancels and drains unless already finished. Idempotent.
  void abort();

 private:
  bool write_event(const scheduler::StreamEvent& event, const Write& write);

  std::shared_ptr<scheduler::RequestStream> stream_;
  ResponseMeta meta_;
  bool include_usage_;
  std::function<bool()> should_abort_;
  std::chrono::steady_clock::time_point next_check_ = std::chrono::steady_clock::now();
  bool opened_ = false;
  bool ended_ = false;
};

}  // namespace prefixd::api
