// Internal to the JSON Schema converter (json_schema_grammar.cpp, json_schema_types.cpp): the
// walk over a schema that builds one GBNF rule per node. Not part of the api's interface.
#pragma once

#include <algorithm>
#include <format>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/structured/gbnf_builder.h"
#include "api/structured/json_schema_grammar.h"
#include "api/structured/json_schema_validator.h"

namespace prefixd::api::detail {

// Schemas are read in their written order: object keys follow the order of "properties".
using json = nlohmann::ordered_json;

// Thrown inside the converter only; the public functions turn it into an error value.
struct Refusal {
  SchemaError error;
};

[[noreturn]] inline void refuse(std::string path, std::string message) {
  throw Refusal{{std::move(path), std::move(message)}};
}

inline const std::set<std::string, std::less<>> kAnnotations = {"title",   "description", "default",  "examples",  "$schema",
                                                         "$id",     "$comment",    "deprecated", "readOnly", "writeOnly",
                                                         "$defs",   "definitions"};
inline const std::set<std::string, std::less<>> kTypeKeywords = {
    "type",      "properties", "required",  "additionalProperties", "items",   "minItems",
    "maxItems",  "uniqueItems", "minLength", "maxLength",            "format",  "minimum",
    "maximum",   "exclusiveMinimum", "exclusiveMaximum"};
inline const std::set<std::string, std::less<>> kCombinators = {"anyOf", "oneOf", "allOf", "$ref", "enum", "const"};
inline const char* const kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

// The schema's keywords that constrain values (everything but annotations).
inline std::vector<std::string> constraints_of(const json& schema) {
  std::vector<std::string> out;
  for (const auto& [key, _] : schema.items()) {
    if (!kAnnotations.contains(key)) out.push_back(key);
  }
  return out;
}

inline std::string join_alternatives(const std::vector<std::string>& alternatives) {
  std::string out;
  for (const std::string& a : alternatives) out += (out.empty() ? "" : " | ") + a;
  return alternatives.size() > 1 ? "(" + out + ")" : out;
}

// The deepest a schema may nest, counting each reference followed as a level.
inline constexpr int kMaxSchemaDepth = 256;

// The most JSON text one enum or const may list (its grammar grows with it).
inline constexpr std::size_t kMaxLiteralBytes = 4 << 20;

// minLength, maxLength, minItems, maxItems: a count the grammar can repeat up to.
inline std::optional<std::int64_t> count_keyword(const json& schema, const char* key, const std::string& path) {
  if (!schema.contains(key)) return std::nullopt;
  const json& v = schema[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) refuse(path + "." + key, "must be a non-negative integer");
  if (v.get<std::int64_t>() > kMaxRepetition) {
    refuse(path + "." + key, std::format("at most {} can be enforced, got {}", kMaxRepetition, v.get<std::int64_t>()));
  }
  return v.get<std::int64_t>();
}

class SchemaConverter {
 public:
  // Rules go to `builder`, which may hold other documents' rules (names never collide).
  SchemaConverter(const json& root, GbnfBuilder& builder) : root_(root), builder_(builder) {}

  // A GBNF expression (usually a rule name) for the values valid against `schema` at `path`.
  std::string convert(const json& schema, const std::string& path, std::string_view hint) {
    // The body's nesting is bounded before a schema gets here, but a chain of references is not:
    // each link is a level of this recursion.
    if (++depth_ > kMaxSchemaDepth) refuse(path, std::format("the schema nests deeper than {} levels (references included)", kMaxSchemaDepth));
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) refuse(path, "the schema false accepts no value");
      return builder_.primitive(JsonPrimitive::value);
    }
    if (!schema.is_object()) refuse(path, "a schema must be an object or a boolean");
    const std::vector<std::string> constraints = constraints_of(schema);
    for (const std::string& key : constraints) {
      if (!kTypeKeywords.contains(key) && !kCombinators.contains(key)) refuse(path + "." + key, "unsupported keyword '" + key + "'");
    }
    for (const char* alone : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (schema.contains(alone) && constraints.size() > 1) {
        refuse(path + "." + alone, std::string("'") + alone + "' beside other constraining keywords is not supported");
      }
    }
    if (schema.contains("$ref")) return convert_ref(schema["$ref"], path + ".$ref");
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1) refuse(path + ".allOf", "only an allOf of exactly one schema is supported");
      return convert(all[0], path + ".allOf[0]", hint);
    }
    for (const char* any : {"anyOf", "oneOf"}) {
      if (!schema.contains(any)) continue;
      const json& branches = schema[any];
      if (!branches.is_array() || branches.empty()) refuse(path + "." + any, "must be a non-empty array of schemas");
      std::vector<std::string> alternatives;
      for (size_t i = 0; i < branches.size(); ++i) {
        alternatives.push_back(convert(branches[i], std::format("{}.{}[{}]", path, any, i), std::format("{}-{}", hint, i)));
      }
      return builder_.add(hint, join_alternatives(alternatives));
    }
    if (schema.contains("enum") || schema.contains("const")) return convert_literals(schema, path, hint);
    return convert_typed(schema, path, hint);
  }

 private:
  std::string convert_ref(const json& ref, const std::string& path) {
    if (!ref.is_string() || !ref.get<std::string>().starts_with("#")) {
      refuse(path, "only references inside the schema (\"#/$defs/...\", \"#/definitions/...\") are supported");
    }
    const std::string pointer = ref.get<std::string>().substr(1);
    // A reference back to a schema still being resolved, with no character of a value written
    // since, describes a value that must begin with itself: no text is one.
    if (std::ranges::find(headless_refs_, pointer) != headless_refs_.end()) {
      refuse(path, "'" + ref.get<std::string>() + "' refers back to itself before any part of a value is written");
    }
    headless_refs_.push_back(pointer);
    struct Pop {
      std::vector<std::string>& refs;
      ~Pop() { refs.pop_back(); }
    } pop{headless_refs_};
    if (auto known = ref_rules_.find(pointer); known != ref_rules_.end()) return known->second;
    const json* target = nullptr;
    try {
      target = &root_.at(json::json_pointer(pointer));
    } catch (const json::exception&) {
      refuse(path, "reference '" + ref.get<std::string>() + "' does not resolve");
    }
    std::string target_path = "$";
    for (const std::string& token : pointer_tokens(pointer)) target_path += "." + token;
    const std::string hint = pointer.empty() ? "root-ref" : "ref" + pointer;
    const std::string name = builder_.reserve(hint);
    ref_rules_.emplace(pointer, name);  // before converting: a recursive reference finds it
    builder_.define(name, convert(*target, target_path, hint + "-body"));
    return name;
  }

  // "/$defs/a~1b" -> {"$defs", "a/b"}.
  static std::vector<std::string> pointer_tokens(const std::string& pointer) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at < pointer.size()) {
      const size_t next = std::min(pointer.find('/', at + 1), pointer.size());
      std::string token = pointer.substr(at + 1, next - at - 1);
      for (size_t i = 0; (i = token.find('~', i)) != std::string::npos; ++i) {
        token.replace(i, 2, i + 1 < token.size() && token[i + 1] == '1' ? "/" : "~");
      }
      out.push_back(std::move(token));
      at = next;
    }
    return out;
  }

  std::string convert_literals(const json& schema, const std::string& path, std::string_view hint) {
    const HeadlessScope consumes(*this);  // a literal starts with a character
    std::vector<json> values;
    std::string keyword = "enum";
    if (schema.contains("const")) {
      values.push_back(schema["const"]);
      keyword = "const";
    } else {
      if (!schema["enum"].is_array() || schema["enum"].empty()) refuse(path + ".enum", "must be a non-empty array");
      values.assign(schema["enum"].begin(), schema["enum"].end());
    }
    // Sibling keywords narrow the listed values: keep those valid against the rest of the schema.
    json rest = schema;
    rest.erase("enum");
    rest.erase("const");
    if (schema.contains("enum") && schema.contains("const")) rest["enum"] = schema["enum"];
    // A malformed count is refused as the typed path refuses it, not read as a filter.
    for (const char* count : {"minLength", "maxLength", "minItems", "maxItems"}) {
      if (rest.contains(count) && (!rest[count].is_number_integer() || rest[count].get<std::int64_t>() < 0)) {
        refuse(path + "." + count, "must be a non-negative integer");
      }
    }
    const bool narrowed = !constraints_of(rest).empty();
    const nlohmann::json rest_validated = narrowed ? nlohmann::json::parse(rest.dump()) : nlohmann::json();
    std::vector<std::string> texts;
    std::set<std::string, std::less<>> seen;
    std::size_t bytes = 0;
    for (const json& value : values) {
      std::string text = value.dump();
      if (narrowed && validate_json(nlohmann::json::parse(text), rest_validated, &root_as_validated())) continue;
      bytes += text.size();
      if (bytes > kMaxLiteralBytes) {
        refuse(path + "." + keyword, std::format("the listed values exceed {} bytes of JSON text", kMaxLiteralBytes));
      }
      if (seen.insert(text).second) texts.push_back(std::move(text));
    }
    if (texts.empty()) refuse(path + "." + keyword, "no listed value satisfies the schema's other keywords");
    return builder_.one_of_literals(hint, texts);
  }

  std::string convert_typed(const json& schema, const std::string& path, std::string_view hint) {
    const HeadlessScope consumes(*this);  // every typed value starts with a character
    std::vector<std::string> types;
    if (!schema.contains("type")) {
      types.assign(std::begin(kTypes), std::end(kTypes));
    } else if (schema["type"].is_string()) {
      types.push_back(schema["type"].get<std::string>());
    } else if (schema["type"].is_array() && !schema["type"].empty()) {
      for (const json& t : schema["type"]) {
        if (!t.is_string()) refuse(path + ".type", "type names must be strings");
        types.push_back(t.get<std::string>());
      }
    } else {
      refuse(path + ".type", "must be a type name or a non-empty array of them");
    }
    const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
    std::vector<std::string> alternatives;
    for (const std::string& type : types) {
      if (type == "integer" && has_number) continue;  // every integer is a number
      const std::string type_hint = std::format("{}-{}", hint, type);
      if (type == "object") alternatives.push_back(convert_object(schema, path, type_hint));
      else if (type == "array") alternatives.push_back(convert_array(schema, path, type_hint));
      else if (type == "string") alternatives.push_back(convert_string(schema, path, type_hint));
      else if (type == "number" || type == "integer") alternatives.push_back(convert_number(schema, path, type == "integer"));
      else if (type == "boolean") alternatives.push_back(builder_.primitive(JsonPrimitive::boolean));
      else if (type == "null") alternatives.push_back(builder_.primitive(JsonPrimitive::null));
      else refuse(path + ".type", "unknown type '" + type + "'");
    }
    return builder_.add(hint, join_alternatives(alternatives));
  }

  std::string convert_object(const json& schema, const std::string& path, std::string_view hint);
  std::string convert_array(const json& schema, const std::string& path, std::string_view hint);
  std::string convert_string(const json& schema, const std::string& path, std::string_view hint);
  std::string convert_number(const json& schema, const std::string& path, bool integer);

  // The root in the validator's representation, made on first use.
  const nlohmann::json& root_as_validated() {
    if (!root_validated_) root_validated_ = nlohmann::json::parse(root_.dump());
    return *root_validated_;
  }

  // While converting a value that begins with a character, no reference is at its head: the
  // references being resolved are set aside and restored afterwards.
  class HeadlessScope {
   public:
    explicit HeadlessScope(SchemaConverter& c) : c_(c), saved_(std::exchange(c.headless_refs_, {})) {}
    ~HeadlessScope() { c_.headless_refs_ = std::move(saved_); }
    HeadlessScope(const HeadlessScope&) = delete;
    HeadlessScope& operator=(const HeadlessScope&) = delete;

   private:
    SchemaConverter& c_;
    std::vector<std::string> saved_;
  };

  const json& root_;
  int depth_ = 0;  // convert() calls in progress
  // JSON pointers of the references being resolved with nothing written since the first of them.
  std::vector<std::string> headless_refs_;
  std::optional<nlohmann::json> root_validated_;
  GbnfBuilder& builder_;
  std::map<std::string, std::string> ref_rules_;  // JSON pointer -> rule name
};

}  // namespace prefixd::api::detail
