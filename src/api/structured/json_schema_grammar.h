// prefixd api — constrained output: JSON Schema to GBNF, the generic JSON-object grammar and the
// grammar of a tool call in the Hermes format the chat template renders.
//
// The grammars are plain GBNF text for engine::SamplingParams::grammar (root rule "root"); check
// them with Engine::check_grammar before a request is queued. Supported schema subset (anything
// else is refused with the JSON path of the node at fault, never ignored):
//   type (a name or a list); enum, const (any JSON values, up to kMaxLiteralBytes of JSON text per
//   keyword); boolean schemas true/false as values;
//   object: properties, required, additionalProperties (false, true or a schema; absent means true);
//   array: items, minItems, maxItems (counts up to kMaxRepetition; uniqueItems false only);
//   string: minLength, maxLength (counts up to kMaxRepetition), format date, time, date-time, uuid;
//   integer and number: minimum, maximum, exclusiveMinimum, exclusiveMaximum;
//   anyOf, oneOf (as anyOf: when branches overlap a value may match several), allOf of one schema;
//   $ref to "#", "#/$defs/..." or "#/definitions/..." (also recursive, but never back to itself
//   before a character of the value: such a schema describes no text);
//   annotations (title, description, default, examples, $schema, $id, $comment, deprecated,
//   readOnly, writeOnly) are ignored.
// What the grammars produce, always valid against the schema, is narrower in places:
//   - object keys come in the order of "properties" (optional ones may be left out); additional
//     keys, where allowed, follow them and never repeat a listed name or use escapes;
//   - at most one space or newline between tokens, no whitespace before or after the value;
//   - numbers have at most 16 integral and 16 fraction digits; a bounded number is an integer
//     within the bounds, with a fraction only where no bound lies below zero;
//   - strings are written without escapes only where a format says so (date, uuid...).
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/types.h"

namespace prefixd::api {

// Why a schema cannot be turned into a grammar. `path` names the node: "$" is the schema itself,
// "$.properties.name.pattern" a keyword inside it, "$.anyOf[1]" an array element.
struct SchemaError {
  std::string path;
  std::string message;
  std::string describe() const { return path + ": " + message; }
};

// What one request's grammar may hold, counted in the grammar engine's rules (ours plus those its
// repetitions expand to): they bound the time to build the request's sampler, which the
// scheduler does between two steps, and its memory. The per-token cost is bounded by the grammar's
// shape instead (enums as tries, repetitions in chunks: gbnf_builder.h).
inline constexpr std::int64_t kDefaultMaxGrammarRules = 50'000;
struct GrammarLimits {
  std::int64_t max_rules = kDefaultMaxGrammarRules;
};

// The grammar of JSON texts that are valid against `schema` (root rule "root").
// Parse the schema as nlohmann::ordered_json: a plain nlohmann::json sorts keys, and the grammar
// then orders properties alphabetically. A grammar beyond `limits` is refused at "$".
std::expected<engine::Grammar, SchemaError> json_schema_grammar(const nlohmann::ordered_json& schema,
                                                                const GrammarLimits& limits = {});

// The grammar of any JSON object (response_format {"type": "json_object"}).
engine::Grammar json_object_grammar();

// One function a tool call may name, with the JSON Schema of its arguments (an object schema;
// an absent or empty schema allows any object).
struct ToolGrammarSpec {
  std::string name;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();
};

// The grammar of a reply made of 1..max_calls tool calls, each exactly as the chat template renders
// one (separated by "\n"):
//   <tool_call>\n{"name": "<name>", "arguments": <arguments>}\n</tool_call>
// naming one of `tools` with arguments valid against its parameters. tool_choice "required" passes
// every tool, a named function only that one. Errors name the tool: "$.tools[i].parameters...".
// How a template writes one call: hermes as above; llama3 as a bare object
//   {"name": "<name>", "parameters": <arguments>}
// (Llama 3.x's JSON tool calling, one call per reply: max_calls must be 1).
enum class CallSyntax { hermes, llama3 };
std::expected<engine::Grammar, SchemaError> tool_call_grammar(std::span<const ToolGrammarSpec> tools,
                                                              std::int32_t max_calls = 1,
                                                              CallSyntax syntax = CallSyntax::hermes,
                                                              const GrammarLimits& limits = {});

}  // namespace prefixd::api
