#include "api/stream_relay.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "api/errors.h"

namespace prefixd::api {

scheduler::StreamEvent cancel_and_drain(scheduler::RequestStream& stream) {
  stream.cancel();
  const auto deadline = std::chrono::steady_clock::now() + kDrainLimit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto event = stream.next(kPollInterval);
    if (event && event->kind == scheduler::StreamEvent::Kind::done) return std::move(*event);
  }
  scheduler::StreamEvent gave_up{.kind = scheduler::StreamEvent::Kind::done, .finish = scheduler::FinishReason::cancelled};
  gave_up.error = "the scheduler did not finish the cancelled request in time";
  return gave_up;
}

CollectedCompletion collect_completion(scheduler::RequestStream& stream, const std::function<bool()>& should_abort) {
  CollectedCompletion out;
  // Checked on a clock, not only when the stream is idle: a fast decoder may never leave it idle.
  auto next_check = std::chrono::steady_clock::now() + kPollInterval;
  for (;;) {
    auto event = stream.next(kPollInterval);
    if (event && event->kind == scheduler::StreamEvent::Kind::done) {
      out.done = std::move(*event);
      return out;
    }
    if (event) {
      out.text += event->text;
      for (auto& t : event->logprobs) out.logprobs.push_back(std::move(t));
    }
    if (const auto now = std::chrono::steady_clock::now(); now >= next_check) {
      next_check = now + kPollInterval;
      if (should_abort && should_abort()) {
        out.done = cancel_and_drain(stream);
        return out;
      }
    }
  }
}

SseRelay::SseRelay(std::shared_ptr<scheduler::RequestStream> stream, ResponseMeta meta, bool include_usage,
                   StopCheck should_stop, std::optional<ToolCallStream> tool_calls, ReplyDone after_reply)
    : stream_(std::move(stream)),
      meta_(std::move(meta)),
      include_usage_(include_usage),
      should_stop_(std::move(should_stop)),
      tool_calls_(std::move(tool_calls)),
      after_reply_(std::move(after_reply)) {}

SseRelay::~SseRelay() { abort(); }

void SseRelay::abort() {
  if (ended_) return;
  ended_ = true;
  cancel_and_drain(*stream_);
}

SseRelay::Step SseRelay::pump(const Write& write) {
  if (ended_) return Step::finished;
  if (!opened_) {
    opened_ = true;
    // OpenAI opens a chat stream with the role; clients that assemble messages rely on it.
    if (meta_.endpoint == Endpoint::chat && !write(sse_data(role_chunk(meta_)))) {
      abort();
      return Step::aborted;
    }
  }
  auto event = stream_->next(kPollInterval);
  // Write everything already waiting, so a fast decoder does not cost one wake-up per token.
  while (event) {
    const bool last = event->kind == scheduler::StreamEvent::Kind::done;
    if (!write_event(*event, write)) {
      if (last) {
        ended_ = true;  // the request is over anyway; nothing to cancel
      } else {
        abort();
      }
      return Step::aborted;
    }
    if (last) {
      ended_ = true;
      return Step::finished;
    }
    event = stream_->next(std::chrono::milliseconds(0));
  }
  // Checked on a clock, not only when idle: a fast decoder may never leave the stream idle.
  if (const auto now = std::chrono::steady_clock::now(); now >= next_check_) {
    next_check_ = now + kPollInterval;
    if (auto stop = should_stop_ ? should_stop_() : std::nullopt) {
      abort();
      // Best effort: a client that is gone does not read it, one that stays learns why.
      write(sse_data(stop->to_json()) + std::string(kSseDone));
      return Step::aborted;
    }
  }
  return Step::more;
}

std::string SseRelay::delta_frames(const std::vector<AssistantDelta>& deltas,
                                   std::vector<scheduler::GeneratedLogprobs> logprobs) {
  for (auto& t : logprobs) pending_logprobs_.push_back(std::move(t));
  std::string frames;
  for (const AssistantDelta& d : deltas) {
    const auto carried = std::exchange(pending_logprobs_, {});
    frames += sse_data(d.tool_call ? tool_call_chunk(meta_, *d.tool_call, carried, text_offset_)
                                   : text_chunk(meta_, d.content, carried, text_offset_));
  }
  return frames;
}

bool SseRelay::write_event(const scheduler::StreamEvent& event, const Write& write) {
  if (event.kind == scheduler::StreamEvent::Kind::text) {
    if (event.text.empty() && event.logprobs.empty()) return true;
    if (after_reply_) reply_text_ += event.text;
    if (tool_calls_) {
      const std::string frames = delta_frames(tool_calls_->feed(event.text), event.logprobs);
      return frames.empty() || write(frames);
    }
    return write(sse_data(text_chunk(meta_, event.text, event.logprobs, text_offset_)));
  }
  std::string frames;
  const char* finish_reason = nullptr;
  if (tool_calls_ && event.finish != scheduler::FinishReason::error) {
    ToolCallStreamEnd end = tool_calls_->finish();
    frames += delta_frames(end.deltas, {});
    if (!pending_logprobs_.empty()) frames += sse_data(text_chunk(meta_, "", std::exchange(pending_logprobs_, {}), text_offset_));
    for (const std::string& warning : end.warnings) spdlog::warn("{}: tool call: {}", meta_.id, warning);
    if (end.called_tools) finish_reason = tool_call_finish_reason(event.finish);
  }
  if (event.finish == scheduler::FinishReason::error) {
    // Mid-stream the status line is long gone; OpenAI clients raise an APIError for an
    // {"error": ...} payload.
    frames += sse_data(internal_error(event.error.empty() ? "generation failed" : event.error).to_json());
  } else {
    frames += sse_data(finish_chunk(meta_, event, finish_reason));
    if (include_usage_) frames += sse_data(usage_chunk(meta_, event));
  }
  frames += kSseDone;
  const bool written = write(frames);
  if (after_reply_ && (event.finish == scheduler::FinishReason::stop || event.finish == scheduler::FinishReason::length)) {
    after_reply_(reply_text_);
  }
  return written;
}

}  // namespace prefixd::api
