#include "api/structured/json_schema_validator.h"

#include <algorithm>
#include <cmath>
#include <format>
#include <set>
#include <string_view>

namespace prefixd::api {
namespace {

using nlohmann::json;

const std::set<std::string, std::less<>> kKnown = {
    "title",     "description", "default",   "examples",  "$schema",     "$id",          "$comment",
    "deprecated", "readOnly",   "writeOnly", "$defs",     "definitions", "type",         "enum",
    "const",     "properties",  "required",  "additionalProperties",     "items",        "minItems",
    "maxItems",  "uniqueItems", "minLength", "maxLength", "format",      "minimum",      "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",   "$ref"};

// Unicode code points in a UTF-8 string (what minLength/maxLength count).
std::size_t code_points(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// A count keyword's bound, compared as a double: a schema may write it as 1e300 or 2.5, which no
// integer type holds (converting such a double to one is undefined). A bound that is no number
// throws json::type_error, which validate_json reports as a malformed schema.
double count_bound(const json& bound) { return bound.get<double>(); }

bool digits(std::string_view s, size_t at, size_t n) {
  if (at + n > s.size()) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(at), s.begin() + static_cast<std::ptrdiff_t>(at + n),
                     [](char c) { return c >= '0' && c <= '9'; });
}

int number_at(std::string_view s, size_t at, size_t n) { return std::stoi(std::string(s.substr(at, n))); }

bool valid_date(std::string_view s) {
  if (s.size() != 10 || !digits(s, 0, 4) || s[4] != '-' || !digits(s, 5, 2) || s[7] != '-' || !digits(s, 8, 2)) return false;
  const int month = number_at(s, 5, 2);
  const int day = number_at(s, 8, 2);
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

bool valid_time(std::string_view s) {
  if (s.size() < 9 || !digits(s, 0, 2) || s[2] != ':' || !digits(s, 3, 2) || s[5] != ':' || !digits(s, 6, 2)) return false;
  if (number_at(s, 0, 2) > 23 || number_at(s, 3, 2) > 59 || number_at(s, 6, 2) > 59) return false;
  size_t at = 8;
  if (s[at] == '.') {
    size_t n = 0;
    while (digits(s, at + 1 + n, 1)) ++n;
    if (n == 0) return false;
    at += 1 + n;
  }
  const std::string_view zone = s.substr(at);
  if (zone == "Z") return true;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && digits(zone, 1, 2) && zone[3] == ':' && digits(zone, 4, 2) &&
         number_at(zone, 1, 2) <= 23 && number_at(zone, 4, 2) <= 59;
}

bool valid_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return value.is_number_integer() || (value.is_number_float() && std::trunc(value.get<double>()) == value.get<double>());
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::optional<ValidationError> check(const json& value, const json& schema, const std::string& at, int depth = 0) const {
    auto fail = [&](std::string message) { return std::optional<ValidationError>(ValidationError{at, std::move(message)}); };
    if (depth > 256) return fail("schema references nest too deep");
    if (schema.is_boolean()) return schema.get<bool>() ? std::nullopt : fail("the schema false accepts nothing");
    if (!schema.is_object()) return fail("the schema is not an object");
    for (const auto& [key, _] : schema.items()) {
      if (!kKnown.contains(key)) return fail("unsupported keyword '" + key + "'");
    }
    if (schema.contains("$ref")) {
      const std::string ref = schema["$ref"].is_string() ? schema["$ref"].get<std::string>() : "";
      if (!ref.starts_with("#")) return fail("unsupported reference '" + ref + "'");
      try {
        if (auto e = check(value, root_.at(json::json_pointer(ref.substr(1))), at, depth + 1)) return e;
      } catch (const json::exception&) {
        return fail("reference '" + ref + "' does not resolve");
      }
    }
    if (schema.contains("type")) {
      const json& type = schema["type"];
      const std::vector<json> types = type.is_array() ? std::vector<json>(type.begin(), type.end()) : std::vector<json>{type};
      if (std::none_of(types.begin(), types.end(), [&](const json& t) { return t.is_string() && has_type(value, t.get<std::string>()); })) {
        return fail("not of type " + type.dump());
      }
    }
    if (schema.contains("const") && value != schema["const"]) return fail("not the constant " + schema["const"].dump());
    if (schema.contains("enum")) {
      const json& values = schema["enum"];
      if (std::find(values.begin(), values.end(), value) == values.end()) return fail("not one of " + values.dump());
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (!schema.contains(key)) continue;
      int matched = 0;
      std::optional<ValidationError> first_failure;
      for (const json& branch : schema[key]) {
        auto e = check(value, branch, at, depth + 1);
        if (!e) ++matched;
        else if (!first_failure) first_failure = e;
      }
      const auto branches = static_cast<int>(schema[key].size());
      const std::string k = key;
      if (k == "anyOf" && matched == 0) return fail("matches no branch of anyOf");
      if (k == "oneOf" && matched != 1) return fail(std::format("matches {} branches of oneOf, not exactly one", matched));
      if (k == "allOf" && matched != branches) return first_failure;
    }
    if (value.is_object()) return check_object(value, schema, at, depth);
    if (value.is_array()) return check_array(value, schema, at, depth);
    if (value.is_string()) return check_string(value.get<std::string>(), schema, at);
    if (value.is_number()) return check_number(value.get<double>(), schema, at);
    return std::nullopt;
  }

 private:
  std::optional<ValidationError> check_object(const json& value, const json& schema, const std::string& at, int depth) const {
    const json properties = schema.value("properties", json::object());
    for (const json& name : schema.value("required", json::array())) {
      if (!value.contains(name.get<std::string>())) return ValidationError{at, "missing required property " + name.dump()};
    }
    for (const auto& [key, member] : value.items()) {
      const std::string member_at = at + "." + key;
      if (properties.contains(key)) {
        if (auto e = check(member, properties[key], member_at, depth + 1)) return e;
      } else if (schema.contains("additionalProperties")) {
        if (auto e = check(member, schema["additionalProperties"], member_at, depth + 1)) return e;
      }
    }
    return std::nullopt;
  }

  std::optional<ValidationError> check_array(const json& value, const json& schema, const std::string& at, int depth) const {
    const auto n = static_cast<double>(value.size());
    if (schema.contains("minItems") && n < count_bound(schema["minItems"])) return ValidationError{at, "fewer items than minItems"};
    if (schema.contains("maxItems") && n > count_bound(schema["maxItems"])) return ValidationError{at, "more items than maxItems"};
    if (schema.value("uniqueItems", false)) {
      for (size_t i = 0; i < value.size(); ++i) {
        for (size_t j = i + 1; j < value.size(); ++j) {
          if (value[i] == value[j]) return ValidationError{at, "items are not unique"};
        }
      }
    }
    if (schema.contains("items")) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (auto e = check(value[i], schema["items"], std::format("{}[{}]", at, i), depth + 1)) return e;
      }
    }
    return std::nullopt;
  }

  static std::optional<ValidationError> check_string(const std::string& text, const json& schema, const std::string& at) {
    const auto n = static_cast<double>(code_points(text));
    if (schema.contains("minLength") && n < count_bound(schema["minLength"])) return ValidationError{at, "shorter than minLength"};
    if (schema.contains("maxLength") && n > count_bound(schema["maxLength"])) return ValidationError{at, "longer than maxLength"};
    if (schema.contains("format")) {
      const std::string format = schema["format"].is_string() ? schema["format"].get<std::string>() : "";
      bool ok = false;
      if (format == "date") ok = valid_date(text);
      else if (format == "time") ok = valid_time(text);
      else if (format == "date-time") ok = text.size() > 11 && valid_date(text.substr(0, 10)) && text[10] == 'T' && valid_time(text.substr(11));
      else if (format == "uuid") ok = valid_uuid(text);
      else return ValidationError{at, "unsupported format " + schema["format"].dump()};
      if (!ok) return ValidationError{at, "not a valid " + format};
    }
    return std::nullopt;
  }

  static std::optional<ValidationError> check_number(double v, const json& schema, const std::string& at) {
    if (schema.contains("minimum") && v < schema["minimum"].get<double>()) return ValidationError{at, "below minimum"};
    if (schema.contains("maximum") && v > schema["maximum"].get<double>()) return ValidationError{at, "above maximum"};
    if (schema.contains("exclusiveMinimum") && v <= schema["exclusiveMinimum"].get<double>()) return ValidationError{at, "not above exclusiveMinimum"};
    if (schema.contains("exclusiveMaximum") && v >= schema["exclusiveMaximum"].get<double>()) return ValidationError{at, "not below exclusiveMaximum"};
    return std::nullopt;
  }

  const json& root_;
};

}  // namespace

std::optional<ValidationError> validate_json(const json& value, const json& schema, const json* root) {
  try {
    return Validator(root != nullptr ? *root : schema).check(value, schema, "$");
  } catch (const json::exception& e) {
    return ValidationError{"$", std::string("malformed schema: ") + e.what()};
  }
}

}  // namespace prefixd::api
