#include "api/responses/responses_stream.h"

#include <algorithm>
#include <format>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;

class ResponsesStreamFormat final : public StreamFormat {
 public:
  ResponsesStreamFormat(ResponseMeta meta, ResponsesRequest request, std::optional<ToolCallStream> tool_calls,
                        ResponseCompleted completed)
      : meta_(std::move(meta)),
        request_(std::move(request)),
        tool_calls_(std::move(tool_calls)),
        completed_(std::move(completed)),
        suffix_(meta_.id.substr(meta_.id.find('_') + 1)) {}

  std::string open() override {
    const ordered_json response = response_in_progress(meta_, request_);
    std::string frames = event("response.created", {{"response", response}});  // numbered first
    return frames + event("response.in_progress", {{"response", response}});
  }

  std::string text(const scheduler::StreamEvent& e) override {
    if (e.text.empty()) return {};
    if (!tool_calls_) return text_delta(e.text);
    std::string frames;
    for (const AssistantDelta& d : tool_calls_->feed(e.text)) frames += apply(d);
    return frames;
  }

  std::string done(const scheduler::StreamEvent& e) override {
    if (e.finish == scheduler::FinishReason::error) {
      std::string frames = close_item();  // events are numbered in the order they are written
      return frames + error_event(internal_error(e.error.empty() ? "generation failed" : e.error));
    }
    std::string frames;
    if (tool_calls_) {
      ToolCallStreamEnd end = tool_calls_->finish();
      for (const AssistantDelta& d : end.deltas) frames += apply(d);
      for (const std::string& warning : end.warnings) spdlog::warn("{}: tool call: {}", meta_.id, warning);
    }
    frames += close_item();
    if (std::ranges::none_of(output_, [](const ordered_json& item) { return item["type"] != "reasoning"; })) {
      // A reply with no text (or only reasoning) still has its message.
      frames += text_delta("");
      frames += close_item();
    }
    ordered_json response = response_object(meta_, request_, output_, e);
    const std::string status = response["status"];
    frames += event(status == "incomplete" ? "response.incomplete" : "response.completed", {{"response", response}});
    if (completed_ && (e.finish == scheduler::FinishReason::stop || e.finish == scheduler::FinishReason::length)) {
      completed_(response, reply_);
    }
    return frames;
  }

  std::string stopped(const ApiError& why) override {
    std::string frames = close_item();
    return frames + error_event(why);
  }

  // Before the first output item, response.in_progress again (every client types it; a repeat
  // replaces the snapshot, which has no output yet); later a comment, since the reply is flowing.
  std::string keep_alive() override {
    if (!output_.empty() || open_ != Item::none) return StreamFormat::keep_alive();
    return event("response.in_progress", {{"response", response_in_progress(meta_, request_)}});
  }

  std::string progress(const scheduler::PromptProgress& progress) override {
    if (!output_.empty() || open_ != Item::none) return {};
    return event("response.in_progress",
                 {{"response", response_in_progress(meta_, request_)}, {"prompt_progress", prompt_progress_json(progress)}});
  }

  // Reasoning comes first, as a reasoning item with one reasoning_text part.
  std::string reasoning(std::string_view text) override {
    std::string frames;
    if (open_ != Item::reasoning) {
      frames += close_item();
      item_id_ = "rs_" + suffix_;
      open_ = Item::reasoning;
      item_text_.clear();
      output_.push_back({{"type", "reasoning"}, {"id", item_id_}, {"summary", ordered_json::array()},
                         {"content", ordered_json::array()}, {"status", "in_progress"}});
      frames += event("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", output_.back()}});
    }
    item_text_ += text;
    reply_.reasoning += text;
    return frames + event("response.reasoning_text.delta",
                          {{"item_id", item_id_}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"delta", text}});
  }

 private:
  enum class Item { none, reasoning, message, call };

  std::string event(const char* type, ordered_json fields) {
    ordered_json payload = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [key, value] : fields.items()) payload[key] = std::move(value);
    return std::string("event: ") + type + "\ndata: " + dump_json(payload) + "\n\n";
  }

  std::string error_event(const ApiError& error) {
    return event("error", {{"code", error.code.empty() ? ordered_json(nullptr) : ordered_json(error.code)},
                           {"message", error.message},
                           {"param", error.param.empty() ? ordered_json(nullptr) : ordered_json(error.param)}});
  }

  std::string apply(const AssistantDelta& d) {
    if (!d.tool_call) return d.content.empty() ? std::string() : text_delta(d.content);
    const ToolCallDelta& call = *d.tool_call;
    std::string frames;
    if (call.name) {
      frames += close_item();
      reply_.tool_calls.push_back(ToolCall{.id = call.id.value_or(""), .name = *call.name});
      item_id_ = std::format("fc_{}_{}", suffix_, reply_.tool_calls.size() - 1);
      open_ = Item::call;
      output_.push_back({{"type", "function_call"}, {"id", item_id_}, {"call_id", reply_.tool_calls.back().id},
                         {"name", *call.name}, {"arguments", ""}, {"status", "in_progress"}});
      frames += event("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", output_.back()}});
    }
    if (call.arguments.empty() || open_ != Item::call) return frames;
    reply_.tool_calls.back().arguments += call.arguments;
    return frames + event("response.function_call_arguments.delta",
                          {{"item_id", item_id_}, {"output_index", output_.size() - 1}, {"delta", call.arguments}});
  }

  std::string text_delta(const std::string& text) {
    std::string frames;
    if (open_ != Item::message) {
      frames += close_item();
      // The reply's first message is msg_X, as response_output names it; one after a call gets its index.
      const bool first = std::ranges::none_of(output_, [](const ordered_json& item) { return item["type"] != "reasoning"; });
      item_id_ = first ? "msg_" + suffix_ : std::format("msg_{}_{}", suffix_, output_.size());
      open_ = Item::message;
      item_text_.clear();
      output_.push_back({{"type", "message"}, {"id", item_id_}, {"status", "in_progress"}, {"role", "assistant"},
                         {"content", ordered_json::array()}});
      frames += event("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", output_.back()}});
      frames += event("response.content_part.added", {{"item_id", item_id_}, {"output_index", output_.size() - 1}, {"content_index", 0},
                                                      {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", ordered_json::array()}}}});
    }
    if (text.empty()) return frames;
    item_text_ += text;
    reply_.content += text;
    return frames + event("response.output_text.delta",
                          {{"item_id", item_id_}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"delta", text}});
  }

  std::string close_item() {
    std::string frames;
    const std::size_t index = output_.size() - 1;
    if (open_ == Item::message) {
      const ordered_json part = {{"type", "output_text"}, {"text", item_text_}, {"annotations", ordered_json::array()}};
      frames += event("response.output_text.done", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", item_text_}});
      frames += event("response.content_part.done", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", part}});
      output_[index]["content"] = ordered_json::array({part});
    } else if (open_ == Item::reasoning) {
      const ordered_json part = {{"type", "reasoning_text"}, {"text", item_text_}};
      frames += event("response.reasoning_text.done", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", item_text_}});
      output_[index]["content"] = ordered_json::array({part});
    } else if (open_ == Item::call) {
      const std::string& arguments = reply_.tool_calls.back().arguments;
      frames += event("response.function_call_arguments.done", {{"item_id", item_id_}, {"output_index", index}, {"arguments", arguments}});
      output_[index]["arguments"] = arguments;
    } else {
      return frames;
    }
    output_[index]["status"] = "completed";
    frames += event("response.output_item.done", {{"output_index", index}, {"item", output_[index]}});
    open_ = Item::none;
    return frames;
  }

  ResponseMeta meta_;
  ResponsesRequest request_;
  std::optional<ToolCallStream> tool_calls_;
  ResponseCompleted completed_;
  const std::string suffix_;
  ordered_json output_ = ordered_json::array();
  ParsedAssistant reply_;
  Item open_ = Item::none;
  std::string item_id_;
  std::string item_text_;
  std::int64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<StreamFormat> responses_stream_format(ResponseMeta meta, ResponsesRequest request,
                                                      std::optional<ToolCallStream> tool_calls, ResponseCompleted completed) {
  return std::make_unique<ResponsesStreamFormat>(std::move(meta), std::move(request), std::move(tool_calls),
                                                 std::move(completed));
}

}  // namespace prefixd::api
