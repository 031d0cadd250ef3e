// Fuzz target: JSON Schema to grammar (api/json_schema_grammar.h), which turns every
// response_format schema and every forced tool's parameters into the grammar a request samples
// under.
//
// Each input is one schema, converted as a response format and as a tool's parameters under a
// small rule budget. Besides the sanitizers (and any exception escaping, which the server would
// answer with a 500), it checks the converter's promises: a refusal names a path inside the schema
// and says why; a grammar has a root rule, stays within the budget's order of size, and every
// rule it refers to is defined.
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/structured/json_schema_grammar.h"
#include "api/openai/request_parser.h"
#include "fuzz_check.h"

namespace prefixd::fuzz {
namespace {

using json = nlohmann::ordered_json;

constexpr api::GrammarLimits kLimits{.max_rules = 2000};

void check_refusal(const api::SchemaError& error) {
  require(error.path.starts_with("$"), "a refusal names a path inside the schema");
  require(!error.message.empty(), "a refusal says why");
}

// Every rule name a body refers to is defined ("root" first).
void check_grammar(const engine::Grammar& grammar) {
  require(grammar.text.starts_with("root ::= "), "the grammar starts with its root rule");
  std::set<std::string> defined;
  std::istringstream lines(grammar.text);
  for (std::string line; std::getline(lines, line);) {
    const size_t arrow = line.find(" ::= ");
    require(arrow != std::string::npos, "every line is a rule");
    require(defined.insert(line.substr(0, arrow)).second, "rule names are unique");
  }
  lines = std::istringstream(grammar.text);
  for (std::string line; std::getline(lines, line);) {
    const std::string body = line.substr(line.find(" ::= ") + 5);
    bool quoted = false, in_class = false;
    std::string word;
    auto flush = [&] {
      if (!word.empty()) require(defined.contains(word), "every rule referred to is defined");
      word.clear();
    };
    for (size_t i = 0; i < body.size(); ++i) {
      const char c = body[i];
      if ((quoted || in_class) && c == '\\') {
        ++i;
      } else if (quoted) {
        quoted = c != '"';
      } else if (in_class) {
        in_class = c != ']';
      } else if (c == '"' || c == '[') {
        flush();
        quoted = c == '"';
        in_class = c == '[';
      } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') {
        word.push_back(c);
      } else if (c == '{') {
        flush();
        while (i < body.size() && body[i] != '}') ++i;  // a repetition count
      } else {
        flush();
      }
    }
    flush();
  }
}

void convert(const json& schema) {
  if (auto grammar = api::json_schema_grammar(schema, kLimits)) {
    check_grammar(*grammar);
  } else {
    check_refusal(grammar.error());
  }
  const api::ToolGrammarSpec tool{.name = "f", .parameters = schema};
  if (auto grammar = api::tool_call_grammar(std::span(&tool, 1), 2, api::CallSyntax::hermes, kLimits)) {
    check_grammar(*grammar);
  } else {
    check_refusal(grammar.error());
  }
}

}  // namespace
}  // namespace prefixd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Bodies deeper than this are refused before any schema is read.
  if (prefixd::api::json_nesting_depth(text) > prefixd::api::kMaxJsonDepth) return 0;
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
  if (schema.is_discarded()) return 0;
  prefixd::fuzz::convert(schema);
  return 0;
}
