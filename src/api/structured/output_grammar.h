// prefixd api — the grammar a chat reply must follow: response_format (any JSON object, or JSON
// valid against a schema) or a forced tool call (tool_choice "required" or a named function), in
// the call syntax of the model's template.
#pragma once

#include <expected>
#include <functional>
#include <optional>
#include <string>

#include "api/errors.h"
#include "api/structured/json_schema_grammar.h"
#include "api/openai/request_parser.h"
#include "api/tools/tool_calls.h"
#include "engine/types.h"

namespace prefixd::api {

// Most calls a forced reply may hold when parallel_tool_calls is on.
inline constexpr std::int32_t kMaxForcedToolCalls = 8;

// nullopt when the reply is free. A 400 naming the field (and the schema node) when a schema uses
// what the converter does not support, when tools must be called but the template has no call
// syntax that can be forced, or when `check` (Engine::check_grammar) refuses the grammar.
using GrammarCheck = std::function<std::optional<std::string>(const engine::Grammar&)>;
// Grammars beyond `limits` are 400s too: every grammar refused here comes from what the client sent.
std::expected<std::optional<engine::Grammar>, ApiError> output_grammar(const ChatRequest& request, ToolCallFormat format,
                                                                       const GrammarCheck& check,
                                                                       const GrammarLimits& limits = {});

}  // namespace prefixd::api
