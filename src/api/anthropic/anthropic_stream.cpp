#include "api/anthropic/anthropic_stream.h"

#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;

// One server-sent event with its name, as Anthropic's SDKs read them.
std::string sse_event(std::string_view name, const ordered_json& payload) {
  return std::string("event: ") + std::string(name) + "\ndata: " + dump_json(payload) + "\n\n";
}

class AnthropicStreamFormat final : public StreamFormat {
 public:
  AnthropicStreamFormat(ResponseMeta meta, std::optional<ToolCallStream> tool_calls, std::optional<std::int32_t> breakpoint)
      : meta_(std::move(meta)), tool_calls_(std::move(tool_calls)), breakpoint_(breakpoint) {}

  // Usage is known when the reply ends: message_start carries zeros, message_delta the counts.
  std::string open() override {
    ordered_json message = {{"id", meta_.id},
                            {"type", "message"},
                            {"role", "assistant"},
                            {"model", meta_.model},
                            {"content", ordered_json::array()},
                            {"stop_reason", nullptr},
                            {"stop_sequence", nullptr},
                            {"usage", messages_usage_json({})}};
    return sse_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
           sse_event("ping", {{"type", "ping"}});
  }

  std::string text(const scheduler::StreamEvent& event) override {
    if (event.text.empty()) return {};
    if (!tool_calls_) return text_delta(event.text);
    return deltas(tool_calls_->feed(event.text));
  }

  std::string done(const scheduler::StreamEvent& event) override {
    if (event.finish == scheduler::FinishReason::error) {
      return close_block() + error_event(internal_error(event.error.empty() ? "generation failed" : event.error));
    }
    std::string frames;
    if (tool_calls_) {
      ToolCallStreamEnd end = tool_calls_->finish();
      frames += deltas(end.deltas);
      for (const std::string& warning : end.warnings) spdlog::warn("{}: tool call: {}", meta_.id, warning);
    }
    frames += close_block();
    const MessagesUsage usage = messages_usage(event.usage, breakpoint_);
    ordered_json delta = {{"stop_reason", messages_stop_reason(event, called_tools_)},
                          {"stop_sequence", event.stop_sequence.empty() ? ordered_json(nullptr) : ordered_json(event.stop_sequence)}};
    ordered_json message_delta = {{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", messages_usage_json(usage)}};
    message_delta["prompt_cache"] = prompt_cache_json(event.cache);
    message_delta["timings"] = timings_json(event);
    frames += sse_event("message_delta", message_delta);
    return frames + sse_event("message_stop", {{"type", "message_stop"}});
  }

  std::string stopped(const ApiError& why) override { return close_block() + error_event(why); }

  // Claude Code's and qwen-code's stream watchdogs count content events only (their SDKs drop
  // `ping`): before any output the first text block opens early, and an empty delta goes on the
  // open block. An empty text block adds nothing to the message a client sends back.
  std::string keep_alive() override {
    std::string frames;
    if (open_ == Block::none && index_ == 0) frames += open_text_block();
    if (open_ == Block::text) return frames + delta_event("text_delta", "text", "");
    if (open_ == Block::thinking) return frames + delta_event("thinking_delta", "thinking", "");
    return sse_event("ping", {{"type", "ping"}});
  }

  // Progress rides on a ping, which every SDK skips and a raw reader of the stream sees.
  std::string progress(const scheduler::PromptProgress& progress) override {
    return sse_event("ping", {{"type", "ping"}, {"prompt_progress", prompt_progress_json(progress)}});
  }

  // Reasoning comes first, in a thinking block of its own.
  std::string reasoning(std::string_view text) override {
    std::string frames;
    if (open_ != Block::thinking) {
      frames += close_block();
      frames += sse_event("content_block_start",
                          {{"type", "content_block_start"},
                           {"index", index_},
                           {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
      open_ = Block::thinking;
    }
    return frames + delta_event("thinking_delta", "thinking", text);
  }

 private:
  enum class Block { none, thinking, text, tool_use };

  std::string error_event(const ApiError& error) { return sse_event("error", anthropic_error_json(error)); }

  std::string close_block() {
    if (open_ == Block::none) return {};
    std::string frames;
    // A thinking block ends with its signature (empty: see messages_body).
    if (open_ == Block::thinking) {
      frames += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                  {"index", index_},
                                                  {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    }
    open_ = Block::none;
    return frames + sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}});
  }

  std::string open_text_block() {
    open_ = Block::text;
    return sse_event("content_block_start", {{"type", "content_block_start"},
                                             {"index", index_},
                                             {"content_block", {{"type", "text"}, {"text", ""}}}});
  }

  std::string delta_event(std::string_view type, std::string_view field, std::string_view text) {
    return sse_event("content_block_delta",
                     {{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", type}, {field, text}}}});
  }

  std::string text_delta(const std::string& text) {
    std::string frames;
    if (open_ != Block::text) {
      frames += close_block();  // first: it moves the index on
      frames += open_text_block();
    }
    return frames + delta_event("text_delta", "text", text);
  }

  // A call's first delta opens its tool_use block; its arguments arrive as input_json_delta.
  std::string call_delta(const ToolCallDelta& call) {
    std::string frames;
    if (call.name) {
      frames += close_block();
      frames += sse_event("content_block_start",
                          {{"type", "content_block_start"},
                           {"index", index_},
                           {"content_block", {{"type", "tool_use"}, {"id", call.id.value_or("")}, {"name", *call.name},
                                              {"input", ordered_json::object()}}}});
      open_ = Block::tool_use;
      called_tools_ = true;
    }
    if (call.arguments.empty()) return frames;
    return frames + sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                      {"index", index_},
                                                      {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
  }

  std::string deltas(const std::vector<AssistantDelta>& parsed) {
    std::string frames;
    for (const AssistantDelta& d : parsed) {
      if (d.tool_call) {
        frames += call_delta(*d.tool_call);
      } else if (!d.content.empty()) {
        frames += text_delta(d.content);
      }
    }
    return frames;
  }

  ResponseMeta meta_;
  std::optional<ToolCallStream> tool_calls_;
  std::optional<std::int32_t> breakpoint_;
  Block open_ = Block::none;
  int index_ = 0;  // of the open block, or of the next one
  bool called_tools_ = false;
};

}  // namespace

std::unique_ptr<StreamFormat> anthropic_stream_format(ResponseMeta meta, std::optional<ToolCallStream> tool_calls,
                                                      std::optional<std::int32_t> breakpoint_tokens) {
  return std::make_unique<AnthropicStreamFormat>(std::move(meta), std::move(tool_calls), breakpoint_tokens);
}

}  // namespace prefixd::api
