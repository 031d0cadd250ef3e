// prefixd api — tool calls in what a model generates: which syntax its template teaches, and the
// calls (OpenAI's `tool_calls`) and remaining text (`content`) of an output.
//
// Pure functions over text; nothing here knows the scheduler or HTTP. The response layer:
//   format = detect_tool_call_format(template source)         once, at startup
//   not streaming:  parse_tool_calls(text, format, request tools, ToolCallIdGenerator{})
//   streaming:      ToolCallStream (tool_call_stream.h), fed each piece of generated text
// and uses tool_calls_json / tool_call_delta_json for the bodies. With format `none`, no tools in
// the request or tool_choice "none", it skips all of this and returns the text as content.
//
// Syntaxes recognised (a call's JSON object must name the function first):
//   hermes   <tool_call>{"name": "f", "arguments": {...}}</tool_call>, any number, whitespace
//            around the JSON allowed (prefixd's own templates, Qwen 2.5/3, Hermes)
//   llama3   {"name": "f", "parameters": {...}} at the start of the output or after <|python_tag|>;
//            more calls follow after ';' or whitespace ("arguments" accepted for "parameters")
//   mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] (extra members such as "id" are
//            skipped), or [TOOL_CALLS]f[ARGS]{...} (optionally f[CALL_ID]x[ARGS]{...}), repeated
//
// Exact text returned (what the API compares with the re-rendered assistant turn):
//   - ToolCall::name is the name string's bytes as written (names with escapes are not calls).
//   - ToolCall::arguments is the model's own bytes of the arguments object, from its '{' to its
//     '}', unchanged: valid JSON (strictly checked), compact exactly when the model wrote it
//     compact. A template that renders string arguments verbatim (prefixd's ChatML and Qwen's do)
//     therefore re-renders the call's arguments byte for byte when the client sends them back
//     unchanged. canonical_arguments() gives the compact form for comparing reformatted copies.
//   - content is the output with every call's text removed, where a call's text includes its
//     markers (<tool_call>...</tool_call>, <|python_tag|>, [TOOL_CALLS], the mistral array's
//     brackets and commas, llama3's ';') and the whitespace runs directly before and after it.
//     An output without calls is returned unchanged, whitespace included.
// A call that is not well formed (invalid JSON, cut off by the end of the output, an unknown
// function, an unknown shape such as <|python_tag|>brave_search.call(...)) is not a call: its text
// stays in content, in place, and a warning says why.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::api {

enum class ToolCallFormat { none, hermes, llama3, mistral };

// The syntax a chat template teaches its model, from the template's source: mistral when it
// names [TOOL_CALLS] or [AVAILABLE_TOOLS]; hermes when it names <tool_call>; llama3 when it names
// <|python_tag|>, or has Llama 3 headers (<|start_header_id|>) and an ipython role or "parameters"
// calls; none otherwise (tools are then still rendered, and the output is plain content).
ToolCallFormat detect_tool_call_format(std::string_view chat_template_source);

// "none", "hermes", "llama3", "mistral": for logs.
std::string_view tool_call_format_name(ToolCallFormat format);

struct ToolCall {
  std::string id;         // "call_" + 24 letters and digits
  std::string name;       // a function the request's tools define
  std::string arguments;  // JSON object text, as the model wrote it (see above)

  bool operator==(const ToolCall&) const = default;
};

struct ParsedAssistant {
  std::string content;                // "" when the output was only calls (the API sends null)
  std::vector<ToolCall> tool_calls;   // in the order generated: OpenAI's parallel calls
  std::string reasoning;              // what the model thought before answering (reasoning.h), or ""
  std::vector<std::string> warnings;  // why some text that looked like a call stayed content
};

// Tool call ids: "call_" + 24 characters from [A-Za-z0-9]. A fixed seed repeats the sequence
// (tests); the default seed comes from std::random_device.
class ToolCallIdGenerator {
 public:
  ToolCallIdGenerator();
  explicit ToolCallIdGenerator(std::uint64_t seed);
  std::string next();

 private:
  std::mt19937_64 random_;
};

// The function names a request's `tools` define: [{"type": "function", "function": {"name"}}]
// (a bare {"name"} is accepted too). Anything else contributes no name.
std::vector<std::string> tool_names(const nlohmann::ordered_json& tools);

// The calls and content of a complete output. Ids are drawn from `ids` in call order. Equal to
// what a ToolCallStream in whole_call mode emits for the same text cut into any pieces.
ParsedAssistant parse_tool_calls(std::string_view output, ToolCallFormat format, const nlohmann::ordered_json& tools,
                                 ToolCallIdGenerator ids = ToolCallIdGenerator{});

// Compact JSON with members in their original order ({"a":1,"b":[2,3]}): arguments that differ
// only in whitespace (a client that re-serialised them) have equal canonical forms. The parser's
// arguments are left as written; compare canonical_arguments(sent) with
// canonical_arguments(generated) to know whether a call came back unchanged in meaning, and the
// raw strings to know whether it came back byte for byte. Text that is not valid JSON is
// returned unchanged.
std::string canonical_arguments(std::string_view arguments_json);

// message.tool_calls of a non-streaming body: [{"id", "type": "function", "function": {"name",
// "arguments"}}].
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls);

}  // namespace prefixd::api
