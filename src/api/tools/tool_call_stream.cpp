#include "api/tools/tool_call_stream.h"

#include <algorithm>
#include <format>
#include <utility>

namespace prefixd::api {
namespace {

bool is_space(char c) { return is_json_space(c); }

// The text that opens a call anywhere in content. Invariant relied on by content_byte: no marker
// contains its own first byte again, so after a mismatch a marker can only start at the last byte.
std::string_view marker_of(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::hermes:
      return "<tool_call>";
    case ToolCallFormat::llama3:
      return "<|python_tag|>";
    case ToolCallFormat::mistral:
      return "[TOOL_CALLS]";
    case ToolCallFormat::none:
      break;
  }
  return {};
}

constexpr std::string_view kHermesClose = "</tool_call>";

}  // namespace

nlohmann::ordered_json tool_call_delta_json(const ToolCallDelta& delta) {
  nlohmann::ordered_json out;
  out["index"] = delta.index;
  if (delta.id) {
    out["id"] = *delta.id;
    out["type"] = "function";
  }
  nlohmann::ordered_json function = nlohmann::ordered_json::object();
  if (delta.name) function["name"] = *delta.name;
  function["arguments"] = delta.arguments;
  out["function"] = std::move(function);
  return out;
}

ToolCallStream::ToolCallStream(ToolCallFormat format, const nlohmann::ordered_json& tools, ToolCallIdGenerator ids,
                               ArgumentDelivery delivery)
    : format_(format),
      tools_(tool_names(tools)),
      ids_(std::move(ids)),
      delivery_(delivery),
      at_call_boundary_(format == ToolCallFormat::llama3) {
  for (const std::string& name : tools_) longest_tool_name_ = std::max(longest_tool_name_, name.size());
}

std::vector<AssistantDelta> ToolCallStream::feed(std::string_view piece) {
  out_.clear();
  if (format_ == ToolCallFormat::none) {
    emit_content(piece);
    return std::exchange(out_, {});
  }
  input_.assign(piece);
  input_pos_ = 0;
  while (input_pos_ < input_.size()) step(input_[input_pos_++]);
  input_.clear();
  return std::exchange(out_, {});
}

ToolCallStreamEnd ToolCallStream::finish() {
  out_.clear();
  // Each round resolves the phase the output ended in; a failed attempt puts its text back to be
  // read again as content, which may hold another (shorter) attempt, so this ends.
  for (;;) {
    while (input_pos_ < input_.size()) step(input_[input_pos_++]);
    input_.clear();
    input_pos_ = 0;
    switch (phase_) {
      case Phase::content:
        if (!held_marker_.empty()) warn(std::format("the output ends with \"{}\", the start of a tool call marker", held_marker_));
        emit_content(held_space_ + held_marker_);
        held_space_.clear();
        held_marker_.clear();
        break;
      case Phase::after_call:
        break;
      case Phase::hermes_close:
        warn(std::format("tool call {} ({}) is not closed by </tool_call>", calls_ - 1, name_));
        phase_ = Phase::after_call;
        replay(kHermesClose.substr(0, closing_matched_));
        continue;
      case Phase::array_next:
      case Phase::object_tail:
        warn(std::format("the output ends before tool call {} ({}) is closed", calls_ - 1, name_));
        phase_ = Phase::after_call;
        break;
      default:
        if (committed_) {
          ++broken_calls_;
          warn(std::format("the output ends inside the arguments of tool call {} ({}), already sent", calls_ - 1, name_));
          phase_ = Phase::after_call;
          break;
        }
        fail_attempt("the output ends inside a tool call", "");
        continue;
    }
    break;
  }
  return {.deltas = std::exchange(out_, {}), .called_tools = calls_ > 0, .broken_calls = broken_calls_, .warnings = warnings_};
}

void ToolCallStream::step(char c) {
  switch (phase_) {
    case Phase::content:
      content_byte(c);
      return;
    case Phase::after_call:
      if (is_space(c) || (format_ == ToolCallFormat::llama3 && c == ';')) return;
      phase_ = Phase::content;
      at_call_boundary_ = format_ == ToolCallFormat::llama3;
      content_byte(c);
      return;
    case Phase::hermes_close:
      if (closing_matched_ == 0 && is_space(c)) return;
      if (c == kHermesClose[closing_matched_]) {
        if (++closing_matched_ == kHermesClose.size()) call_done(Phase::after_call);
        return;
      }
      warn(std::format("tool call {} ({}) is not closed by </tool_call>", calls_ - 1, name_));
      phase_ = Phase::after_call;
      replay(std::string(kHermesClose.substr(0, closing_matched_)) + c);
      return;
    case Phase::array_next:
      if (is_space(c)) return;
      if (c == ']') {
        call_done(Phase::after_call);
      } else if (c == ',') {
        call_done(Phase::after_call);
        begin_attempt(",", Phase::object_open, Shape::mistral_array);
      } else {
        warn(std::format("the [TOOL_CALLS] array is not closed after tool call {}", calls_ - 1));
        call_done(Phase::after_call);
        replay(std::string(1, c));
      }
      return;
    case Phase::object_tail:
      if (!extra_members_) {
        if (is_space(c)) return;
        if (c == '}') return call_object_done();
        if (c == ',') {
          extra_members_ = true;
          scanner_ = JsonScanner::inside_object_after_comma();
          return;
        }
      } else {
        const JsonScanner::Step step = scanner_.feed(c);
        if (step == JsonScanner::Step::more) return;
        if (step == JsonScanner::Step::complete) return call_object_done();
      }
      warn(std::format("tool call {} ({}): the call object is not well formed after its arguments", calls_ - 1, name_));
      call_done(Phase::after_call);
      replay(std::string(1, c));
      return;
    default:
      attempt_byte(c);
      return;
  }
}

void ToolCallStream::content_byte(char c) {
  const std::string_view marker = marker_of(format_);
  if (!held_marker_.empty()) {
    held_marker_ += c;
    if (held_marker_ == marker) {
      held_marker_.clear();
      const Shape shape = format_ == ToolCallFormat::hermes    ? Shape::hermes
                          : format_ == ToolCallFormat::llama3 ? Shape::llama3
                                                               : Shape::mistral_object;
      begin_attempt(std::string(marker), format_ == ToolCallFormat::mistral ? Phase::mistral_open : Phase::object_open,
                    shape);
      return;
    }
    if (marker.starts_with(held_marker_)) return;
    held_marker_.pop_back();
    emit_content(held_space_ + held_marker_);
    held_space_.clear();
    held_marker_.clear();
    at_call_boundary_ = false;
    content_byte(c);
    return;
  }
  if (is_space(c)) {
    held_space_ += c;
    return;
  }
  if (c == marker.front()) {
    held_marker_ = c;
    return;
  }
  if (at_call_boundary_ && c == '{') {
    begin_attempt("{", Phase::key, Shape::llama3);
    return;
  }
  held_space_ += c;
  emit_content(held_space_);
  held_space_.clear();
  at_call_boundary_ = false;
}

void ToolCallStream::begin_attempt(std::string marker, Phase phase, Shape shape) {
  phase_ = phase;
  shape_ = shape;
  marker_size_ = marker.size();
  attempt_ = std::move(marker);
  attempt_space_ = std::exchange(held_space_, {});
  token_.clear();
  in_token_ = false;
  name_read_ = false;
  name_.clear();
  arguments_.clear();
  scanner_ = JsonScanner{};
  committed_ = false;
  closing_matched_ = 0;
}

void ToolCallStream::fail_attempt(std::string_view reason, std::string_view unread) {
  warn(std::format("not a tool call, kept as content: {}", reason));
  emit_content(attempt_space_ + attempt_.substr(0, marker_size_));
  std::string rest = attempt_.substr(marker_size_);
  rest.append(unread);
  phase_ = Phase::content;
  at_call_boundary_ = false;
  attempt_.clear();
  attempt_space_.clear();
  replay(rest);
}

void ToolCallStream::call_object_done() {
  extra_members_ = false;
  if (shape_ == Shape::hermes) {
    phase_ = Phase::hermes_close;
    closing_matched_ = 0;
  } else if (shape_ == Shape::mistral_array) {
    phase_ = Phase::array_next;
  } else {
    call_done(Phase::after_call);
  }
}

void ToolCallStream::call_done(Phase next) {
  phase_ = next;
  committed_ = false;
  token_.clear();
  attempt_.clear();
  attempt_space_.clear();
}

void ToolCallStream::replay(std::string_view text) { input_.insert(input_pos_, text); }

void ToolCallStream::emit_content(std::string_view text) {
  if (text.empty()) return;
  if (!out_.empty() && !out_.back().tool_call) {
    out_.back().content.append(text);
    return;
  }
  out_.push_back({.content = std::string(text)});
}

void ToolCallStream::emit_arguments(std::string_view text) {
  if (!out_.empty() && out_.back().tool_call && out_.back().tool_call->index + 1 == calls_) {
    out_.back().tool_call->arguments.append(text);
    return;
  }
  out_.push_back({.tool_call = ToolCallDelta{.index = calls_ - 1, .arguments = std::string(text)}});
}

void ToolCallStream::warn(std::string text) { warnings_.push_back(std::move(text)); }

bool ToolCallStream::is_tool(std::string_view name) const {
  return std::ranges::find(tools_, name) != tools_.end();
}

}  // namespace prefixd::api
