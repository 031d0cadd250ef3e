// ToolCallStream, continued: a call attempt, from its marker to its committed first delta, then
// its arguments (the grammar in tool_calls.h). Until the call is committed its text is kept in
// attempt_, so that a call that turns out not to be one goes back to content unchanged.
#include <format>
#include <utility>

#include "api/tools/tool_call_stream.h"

namespace prefixd::api {
namespace {

bool is_space(char c) { return is_json_space(c); }

// Characters of a mistral function name written bare ([TOOL_CALLS]name[ARGS]).
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

}  // namespace

void ToolCallStream::attempt_byte(char c) {
  if (!committed_) attempt_ += c;
  const bool space = is_space(c);
  switch (phase_) {
    case Phase::object_open:
      if (space) return;
      if (c == '{') {
        phase_ = Phase::key;
        return;
      }
      return fail_attempt("expected a JSON object after the marker", "");
    case Phase::mistral_open:
      if (space) return;
      if (c == '[') {
        shape_ = Shape::mistral_array;
        phase_ = Phase::object_open;
      } else if (c == '{') {
        phase_ = Phase::key;
      } else if (is_name_char(c)) {
        shape_ = Shape::mistral_named;
        token_ = c;
        phase_ = Phase::mistral_name;
      } else {
        fail_attempt("expected '[', '{' or a function name after [TOOL_CALLS]", "");
      }
      return;
    case Phase::mistral_name:
      if (is_name_char(c)) {
        token_ += c;
        if (token_.size() > longest_tool_name_) fail_attempt(std::format("unknown function \"{}...\"", token_), "");
        return;
      }
      if (c != '[') return fail_attempt("expected [ARGS] after the function name", "");
      name_ = std::exchange(token_, {});
      if (!is_tool(name_)) return fail_attempt(std::format("unknown function \"{}\"", name_), "");
      name_read_ = true;
      phase_ = Phase::mistral_tag;
      return;
    case Phase::mistral_tag: {
      token_ += c;
      if (token_ == "ARGS]") {
        token_.clear();
        phase_ = Phase::arguments;
        return;
      }
      if (token_ == "CALL_ID]") {
        token_.clear();
        phase_ = Phase::mistral_id;
        return;
      }
      const bool prefix = std::string_view("ARGS]").starts_with(token_) || std::string_view("CALL_ID]").starts_with(token_);
      if (!prefix) fail_attempt("expected [ARGS] after the function name", "");
      return;
    }
    case Phase::mistral_id:
      if (c == '[') phase_ = Phase::mistral_tag;
      return;
    case Phase::key:
    case Phase::name_value:
      if (!in_token_) {
        if (space) return;
        if (c != '"') {
          return fail_attempt(phase_ == Phase::name_value ? "the function name is not a string"
                              : name_read_          ? "expected \"arguments\" after the function name"
                                                    : "the call object does not start with \"name\"",
                              "");
        }
        in_token_ = true;
        token_.clear();
        return;
      }
      if (c == '\\' || static_cast<unsigned char>(c) < 0x20) return fail_attempt("unexpected character in a key or name", "");
      if (c != '"') {
        token_ += c;
        // Text that can no longer be a key or a tool's name is released now, not at its end.
        const std::size_t longest = phase_ == Phase::name_value ? longest_tool_name_ : std::string_view("parameters").size();
        if (token_.size() > longest) fail_attempt(std::format("unknown function or key \"{}...\"", token_), "");
        return;
      }
      in_token_ = false;
      if (phase_ == Phase::name_value) {
        name_ = std::exchange(token_, {});
        if (!is_tool(name_)) return fail_attempt(std::format("unknown function \"{}\"", name_), "");
        name_read_ = true;
        phase_ = Phase::comma;
        return;
      }
      if (!name_read_ ? token_ != "name" : token_ != "arguments" && token_ != "parameters") {
        return fail_attempt(name_read_ ? "expected \"arguments\" after the function name"
                                       : "the call object does not start with \"name\"",
                            "");
      }
      token_.clear();
      phase_ = Phase::colon;
      return;
    case Phase::colon:
      if (space) return;
      if (c != ':') return fail_attempt("expected ':' in the call object", "");
      phase_ = name_read_ ? Phase::arguments : Phase::name_value;
      return;
    case Phase::comma:
      if (space) return;
      if (c != ',') return fail_attempt("expected ',' and the arguments after the function name", "");
      phase_ = Phase::key;
      return;
    case Phase::arguments:
      if (arguments_.empty() && !committed_) {
        if (space) return;
        if (c != '{') return fail_attempt("the arguments are not a JSON object", "");
        arguments_begin();
      }
      arguments_byte(c);
      return;
    default:
      return;
  }
}

void ToolCallStream::arguments_begin() {
  if (delivery_ == ArgumentDelivery::as_generated) commit_call();
}

void ToolCallStream::arguments_byte(char c) {
  const JsonScanner::Step step = scanner_.feed(c);
  if (step == JsonScanner::Step::invalid) {
    if (committed_) return break_call("its arguments are not valid JSON", c);
    return fail_attempt("the arguments are not valid JSON", "");
  }
  if (committed_) {
    emit_arguments(std::string_view(&c, 1));
  } else {
    arguments_ += c;
  }
  if (step == JsonScanner::Step::more) return;
  if (!committed_) commit_call();
  extra_members_ = false;
  if (shape_ == Shape::mistral_named) return call_done(Phase::after_call);
  phase_ = Phase::object_tail;
}

void ToolCallStream::commit_call() {
  committed_ = true;
  out_.push_back({.tool_call = ToolCallDelta{.index = calls_++, .id = ids_.next(), .name = name_, .arguments = std::exchange(arguments_, {})}});
  attempt_.clear();
  attempt_space_.clear();
}

void ToolCallStream::break_call(std::string_view reason, char c) {
  ++broken_calls_;
  warn(std::format("tool call {} ({}) was sent but {}; the rest is content", calls_ - 1, name_, reason));
  call_done(Phase::after_call);
  replay(std::string(1, c));
}

}  // namespace prefixd::api
