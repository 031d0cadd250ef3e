#include "api/tools/tool_definitions.h"

#include <algorithm>
#include <cctype>
#include <format>
#include <utility>

#include "api/body/field_reader.h"

namespace prefixd::api {

using fields::reject;

void FunctionTools::add(nlohmann::ordered_json function, const std::string& name_field,
                        const std::string& parameters_field) {
  const auto name = function.find("name");
  if (name == function.end() || !name->is_string()) reject(name_field, std::format("'{}' must be a string", name_field));
  const std::string& text = name->get_ref<const std::string&>();
  // The tool-call parsers find a call by its name in generated text: letters, digits, '_' and '-'
  // only, so that a name never contains the syntax around it.
  if (text.empty() || text.size() > max_name_bytes_ ||
      !std::ranges::all_of(text, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; })) {
    reject(name_field, std::format("'{}' must be 1 to {} letters, digits, '_' or '-'", name_field, max_name_bytes_));
  }
  if (!names_.insert(text).second) reject(name_field, std::format("function '{}' is defined twice", text));
  if (const auto parameters = function.find("parameters"); parameters != function.end()) {
    if (parameters->is_null()) {
      function.erase(parameters);
    } else if (!parameters->is_object()) {
      reject(parameters_field, std::format("'{}' must be a JSON Schema object", parameters_field));
    }
  }
  tools_.push_back({{"type", "function"}, {"function", std::move(function)}});
}

}  // namespace prefixd::api
