// prefixd api — tool calls in generated text as it arrives, for streamed responses.
//
// ToolCallStream is fed the pieces of an output in order and returns deltas that the SSE layer
// turns into chunks: content text, and tool-call deltas in OpenAI's shape (tool_call_delta_json).
// Content is emitted as soon as it surely is content; what could still be the start of a call (a
// marker prefix such as "<tool_", whitespace that would belong to a following call, a call whose
// name is not yet known) is held back until it is decided. finish() resolves what is left: an
// unfinished marker or call becomes content, with a warning.
//
// Invariants (tests/unit/api_tool_call_stream_test.cpp checks them over random cuts):
//   - the emitted deltas do not depend on how the output was cut into pieces, only on the bytes;
//   - in whole_call mode, the concatenated content and each call's concatenated arguments equal
//     parse_tool_calls() of the whole output (same names, same ids for equally seeded ids);
//   - in as_generated mode the same holds for every output whose calls are all complete and
//     valid. A call is sent once its function name is known and its arguments begin; if the
//     arguments then break off (invalid JSON, or the output ends inside them), the call has
//     already been sent: it stays a call with the arguments sent so far, the rest of the text is
//     content, and finish() reports `broken_calls` and a warning (parse_tool_calls() would have
//     kept that call's text as content instead).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/tools/json_scan.h"
#include "api/tools/tool_calls.h"

namespace prefixd::api {

// One tool call's part of a chunk. The first delta of a call carries its id and name (and
// possibly the first arguments); later deltas carry only more arguments text.
struct ToolCallDelta {
  std::size_t index = 0;            // the call's position among this output's calls
  std::optional<std::string> id;    // first delta only
  std::optional<std::string> name;  // first delta only
  std::string arguments;            // the next bytes of the arguments text (may be empty)

  bool operator==(const ToolCallDelta&) const = default;
};

// Exactly one of the two is set.
struct AssistantDelta {
  std::string content;
  std::optional<ToolCallDelta> tool_call;

  bool operator==(const AssistantDelta&) const = default;
};

struct ToolCallStreamEnd {
  std::vector<AssistantDelta> deltas;  // what finish() released
  bool called_tools = false;           // some call was emitted: finish_reason "tool_calls"
  std::size_t broken_calls = 0;        // as_generated only: calls sent whose arguments broke off
  std::vector<std::string> warnings;   // every warning of the whole output, in order
};

// choices[].delta.tool_calls[i] of a chunk: {"index", "id", "type": "function", "function":
// {"name", "arguments"}} for a call's first delta, {"index", "function": {"arguments"}} after.
nlohmann::ordered_json tool_call_delta_json(const ToolCallDelta& delta);

class ToolCallStream {
 public:
  enum class ArgumentDelivery {
    as_generated,  // arguments in pieces as they arrive (after the function name is known)
    whole_call,    // a call only once its arguments are complete and valid: never a broken call
  };

  // `tools`: the request's tools (a call to any other function is content).
  ToolCallStream(ToolCallFormat format, const nlohmann::ordered_json& tools, ToolCallIdGenerator ids,
                 ArgumentDelivery delivery = ArgumentDelivery::as_generated);

  // The deltas this piece releases, content and calls in output order (consecutive pieces of the
  // same kind merged). REQUIRES: finish() not called yet.
  std::vector<AssistantDelta> feed(std::string_view piece);

  // The end of the output: releases what was held back. REQUIRES: called once.
  ToolCallStreamEnd finish();

 private:
  enum class Phase {
    content,        // between calls; markers are looked for
    after_call,     // whitespace (and llama3 ';') after a call is dropped
    hermes_close,   // after a hermes call's object: expecting "</tool_call>"
    array_next,     // after an element of a mistral array: ',' or ']'
    // Inside a call attempt (text kept in attempt_ until the call is decided):
    mistral_open,   // after [TOOL_CALLS]: '[', '{' or a function name
    mistral_name,   // [TOOL_CALLS]name...
    mistral_tag,    // after the name: "[ARGS]" or "[CALL_ID]"
    mistral_id,     // [CALL_ID]... up to "[ARGS]"
    object_open,    // expecting the call object's '{'
    key,            // a key string: "name" first, then "arguments"/"parameters"
    colon,
    name_value,     // the function name string
    comma,          // between the name and the arguments key
    arguments,      // the arguments object, byte by byte through JsonScanner
    object_tail,    // after the arguments: more members or '}'
  };
  enum class Shape { hermes, llama3, mistral_array, mistral_object, mistral_named };

  void step(char c);
  void content_byte(char c);
  void attempt_byte(char c);
  void begin_attempt(std::string marker, Phase phase, Shape shape);
  void fail_attempt(std::string_view reason, std::string_view unread);
  void name_known(char c);
  void arguments_begin();
  void arguments_byte(char c);
  void call_object_done();
  void call_done(Phase next);
  void commit_call();
  void break_call(std::string_view reason, char c);
  void replay(std::string_view text);
  void emit_content(std::string_view text);
  void emit_arguments(std::string_view text);
  void warn(std::string text);
  bool is_tool(std::string_view name) const;

  ToolCallFormat format_;
  std::vector<std::string> tools_;
  std::size_t longest_tool_name_ = 0;  // a longer name is surely not a call: no need to hold it
  ToolCallIdGenerator ids_;
  ArgumentDelivery delivery_;

  // Input not yet stepped through; failed attempts put their text back here to be read again.
  std::string input_;
  std::size_t input_pos_ = 0;
  std::vector<AssistantDelta> out_;

  Phase phase_ = Phase::content;
  std::string held_space_;   // content mode: whitespace that may precede a marker
  std::string held_marker_;  // content mode: a proper prefix of a marker
  bool at_call_boundary_;    // llama3: a bare '{' here starts a call

  // The call being read.
  Shape shape_ = Shape::hermes;
  std::string attempt_;           // its text from its marker on, until it is committed
  std::size_t marker_size_ = 0;   // the marker's bytes at the start of attempt_
  std::string attempt_space_;     // the whitespace held before its marker
  std::string token_;             // the key, name, tag or id being read
  bool in_token_ = false;
  bool name_read_ = false;
  std::string name_;
  std::string arguments_;         // whole_call: the arguments so far
  JsonScanner scanner_;
  bool committed_ = false;        // the call's first delta has been emitted
  bool extra_members_ = false;    // object_tail: inside members after the arguments
  std::size_t closing_matched_ = 0;

  std::size_t calls_ = 0;
  std::size_t broken_calls_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace prefixd::api
