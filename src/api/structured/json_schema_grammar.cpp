#include "api/structured/json_schema_grammar.h"

#include "api/structured/json_schema_converter.h"

namespace prefixd::api {

using detail::Refusal;
using detail::SchemaConverter;
using json = nlohmann::ordered_json;

namespace {

std::optional<SchemaError> beyond(const GbnfBuilder& builder, const GrammarLimits& limits, std::string path) {
  if (builder.engine_rules() <= limits.max_rules) return std::nullopt;
  return SchemaError{std::move(path), std::format("the grammar needs {} rules, more than the {} this server builds "
                                                  "for one request (--max-grammar-rules)",
                                                  builder.engine_rules(), limits.max_rules)};
}

}  // namespace

std::expected<engine::Grammar, SchemaError> json_schema_grammar(const json& schema, const GrammarLimits& limits) {
  try {
    GbnfBuilder builder;
    const std::string root = SchemaConverter(schema, builder).convert(schema, "$", "value");
    if (auto error = beyond(builder, limits, "$")) return std::unexpected(*error);
    return engine::Grammar{.text = builder.text(root), .root = "root"};
  } catch (const Refusal& refusal) {
    return std::unexpected(refusal.error);
  }
}

engine::Grammar json_object_grammar() {
  GbnfBuilder builder;
  const std::string object = builder.primitive(JsonPrimitive::object);
  return {.text = builder.text(object), .root = "root"};
}

std::expected<engine::Grammar, SchemaError> tool_call_grammar(std::span<const ToolGrammarSpec> tools, std::int32_t max_calls,
                                                              CallSyntax syntax, const GrammarLimits& limits) {
  if (tools.empty()) return std::unexpected(SchemaError{"$.tools", "no tool to call"});
  if (max_calls < 1) return std::unexpected(SchemaError{"$.tools", "at least one call must be allowed"});
  if (syntax == CallSyntax::llama3 && max_calls != 1) {
    return std::unexpected(SchemaError{"$.tools", "Llama 3 calls come one per reply"});
  }
  const bool hermes = syntax == CallSyntax::hermes;
  GbnfBuilder builder;
  std::vector<std::string> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolGrammarSpec& tool = tools[i];
    const std::string path = std::format("$.tools[{}].parameters", i);
    // An absent or empty parameters schema means "any object", as tools without arguments send {}.
    const json parameters = tool.parameters.is_null() || tool.parameters.empty()
                                ? json{{"type", "object"}}
                                : tool.parameters;
    try {
      // Each tool's schema is its own document: its $refs resolve inside it.
      const std::string arguments = SchemaConverter(parameters, builder).convert(parameters, "$", "args-" + tool.name);
      const std::string open = hermes ? "<tool_call>\n{\"name\": " + json(tool.name).dump() + ", \"arguments\": "
                                      : "{\"name\": " + json(tool.name).dump() + ", \"parameters\": ";
      const std::string close = hermes ? "}\n</tool_call>" : "}";
      calls.push_back(builder.add("call-" + tool.name, gbnf_literal(open) + " " + arguments + " " + gbnf_literal(close)));
    } catch (const Refusal& refusal) {
      SchemaError error = refusal.error;
      error.path = path + error.path.substr(1);
      return std::unexpected(error);
    }
  }
  if (auto error = beyond(builder, limits, "$.tools")) return std::unexpected(*error);
  const std::string call = builder.add("tool-call", detail::join_alternatives(calls));
  const std::string root = max_calls == 1 ? call : std::format("{} (\"\\n\" {}){{0,{}}}", call, call, max_calls - 1);
  return engine::Grammar{.text = builder.text(root), .root = "root"};
}

}  // namespace prefixd::api
