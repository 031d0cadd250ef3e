#include "api/structured/output_grammar.h"

#include <format>
#include <vector>

#include "api/structured/json_schema_grammar.h"

namespace prefixd::api {
namespace {

ApiError schema_refused(std::string param, const SchemaError& error) {
  return invalid_param(std::move(param), std::format("the schema cannot be enforced: {}", error.describe()));
}

// The tools a forced reply may call, with their parameters' schemas in the order sent.
std::vector<ToolGrammarSpec> forced_tools(const ChatRequest& request) {
  std::vector<ToolGrammarSpec> out;
  const std::string named = request.tool_choice.is_object() ? request.tool_choice["function"]["name"].get<std::string>() : "";
  if (!request.tools.is_array()) return out;
  for (const auto& tool : request.tools) {
    const auto& function = tool["function"];
    const std::string name = function["name"].get<std::string>();
    if (!named.empty() && name != named) continue;
    ToolGrammarSpec spec{.name = name};
    if (const auto params = function.find("parameters"); params != function.end() && params->is_object()) spec.parameters = *params;
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace

std::expected<std::optional<engine::Grammar>, ApiError> output_grammar(const ChatRequest& request, ToolCallFormat format,
                                                                       const GrammarCheck& check, const GrammarLimits& limits) {
  std::optional<engine::Grammar> grammar;
  const bool forced_call = request.tool_choice == "required" || request.tool_choice.is_object();
  if (forced_call) {
    // Mistral's [TOOL_CALLS] is a control token, which a grammar cannot emit (control tokens are
    // masked under a grammar); the other syntaxes are plain text.
    if (format != ToolCallFormat::hermes && format != ToolCallFormat::llama3) {
      return std::unexpected(invalid_param(
          "tool_choice", std::format("this model's chat template writes tool calls as {}; a call can be forced only where it "
                                     "writes them as <tool_call> blocks (hermes) or Llama 3 JSON calls",
                                     tool_call_format_name(format))));
    }
    const std::vector<ToolGrammarSpec> tools = forced_tools(request);
    const bool llama3 = format == ToolCallFormat::llama3;
    const std::int32_t max_calls =
        request.tool_choice.is_object() || !request.parallel_tool_calls || llama3 ? 1 : kMaxForcedToolCalls;
    auto built = tool_call_grammar(tools, max_calls, llama3 ? CallSyntax::llama3 : CallSyntax::hermes, limits);
    if (!built) return std::unexpected(schema_refused("tools", built.error()));
    grammar = std::move(*built);
  } else if (request.response_format.kind == OutputFormat::Kind::json_object) {
    grammar = json_object_grammar();
  } else if (request.response_format.kind == OutputFormat::Kind::json_schema) {
    auto built = json_schema_grammar(request.response_format.schema, limits);
    if (!built) return std::unexpected(schema_refused("response_format.json_schema.schema", built.error()));
    grammar = std::move(*built);
  }
  if (grammar && check) {
    // The grammar is made from the request's schema or tools alone, so a grammar the engine will
    // not build is the request's to change: a 400 naming what it came from.
    if (auto refused = check(*grammar)) {
      const bool schema = request.response_format.kind == OutputFormat::Kind::json_schema;
      ApiError error = invalid_param(forced_call ? "tools" : schema ? "response_format.json_schema.schema" : "response_format",
                                     "the grammar for this schema cannot be built: " + *refused);
      error.code = "grammar_refused";
      return std::unexpected(error);
    }
  }
  return grammar;
}

}  // namespace prefixd::api
