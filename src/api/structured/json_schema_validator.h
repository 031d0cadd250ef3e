// prefixd api — checks a JSON value against a JSON Schema, in the subset json_schema_grammar
// supports (json_schema_grammar.h): what lets a caller double-check constrained output, and what
// the tests hold the grammars to.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::api {

struct ValidationError {
  std::string path;     // where in the value: "$", "$.items[2].name"
  std::string message;  // which constraint failed
  std::string describe() const { return path + ": " + message; }
};

// nullopt when `value` is valid against `schema`. $ref resolves inside `root` (the schema itself
// when null). A keyword outside the supported subset fails validation ("unsupported keyword"), so a
// value is never called valid against a constraint that was not checked. oneOf is checked as
// JSON Schema defines it (exactly one branch).
std::optional<ValidationError> validate_json(const nlohmann::json& value, const nlohmann::json& schema,
                                             const nlohmann::json* root = nullptr);

}  // namespace prefixd::api
