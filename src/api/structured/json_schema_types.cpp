// The per-type part of the JSON Schema converter: objects, arrays, strings, numbers.
#include <cmath>
#include <limits>
#include <memory>

#include "api/structured/json_schema_converter.h"

namespace prefixd::api::detail {
namespace {

// One UTF-8 character per element.
std::vector<std::string> utf8_characters(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

// A trie of the listed property names, to spell "any key but these".
struct NameTrie {
  bool ends_a_name = false;
  std::map<std::string, std::unique_ptr<NameTrie>> children;  // by UTF-8 character
};

// A character class item for one UTF-8 character (ASCII escaped as \xHH).
std::string class_item(const std::string& character) {
  if (character.size() == 1) return std::format("\\x{:02x}", static_cast<unsigned char>(character[0]));
  return character;
}

// The rest of a key (through its closing quote) after the characters leading to `node`, such that
// the whole key is none of the trie's names. Keys use no escapes.
std::string other_key_rest(const NameTrie& node, GbnfBuilder& builder, const std::string& hint) {
  const std::string free_char = builder.add("key-char", R"([^"\\\x00-\x1f])");
  std::vector<std::string> alternatives;
  if (!node.ends_a_name) alternatives.push_back("\"\\\"\"");
  std::string excluded;
  int index = 0;
  for (const auto& [character, child] : node.children) {
    excluded += class_item(character);
    alternatives.push_back(gbnf_literal(character) + " " + other_key_rest(*child, builder, std::format("{}-{}", hint, index++)));
  }
  alternatives.push_back(std::format(R"([^"\\\x00-\x1f{}] {}* "\"")", excluded, free_char));
  return builder.add(hint, join_alternatives(alternatives));
}

}  // namespace

std::string SchemaConverter::convert_object(const json& schema, const std::string& path, std::string_view hint) {
  const std::string ws = builder_.primitive(JsonPrimitive::ws);
  const json properties = schema.value("properties", json::object());
  if (!properties.is_object()) refuse(path + ".properties", "must be an object");
  std::set<std::string> required;
  if (schema.contains("required")) {
    if (!schema["required"].is_array()) refuse(path + ".required", "must be an array of names");
    for (size_t i = 0; i < schema["required"].size(); ++i) {
      const json& name = schema["required"][i];
      if (!name.is_string()) refuse(std::format("{}.required[{}]", path, i), "must be a string");
      if (!properties.contains(name.get<std::string>())) {
        refuse(std::format("{}.required[{}]", path, i), "required property '" + name.get<std::string>() + "' is not listed in properties");
      }
      required.insert(name.get<std::string>());
    }
  }
  const json additional = schema.value("additionalProperties", json(true));
  std::string additional_member;  // empty: no other keys allowed
  if (!(additional.is_boolean() && !additional.get<bool>())) {
    NameTrie names;
    for (const auto& [name, _] : properties.items()) {
      NameTrie* node = &names;
      for (const std::string& c : utf8_characters(name)) {
        auto& child = node->children[c];
        if (!child) child = std::make_unique<NameTrie>();
        node = child.get();
      }
      node->ends_a_name = true;
    }
    const std::string key = builder_.add(std::string(hint) + "-other-key", "\"\\\"\" " + other_key_rest(names, builder_, std::string(hint) + "-other-key-rest"));
    const std::string value = convert(additional, path + ".additionalProperties", std::string(hint) + "-other-value");
    additional_member = builder_.add(std::string(hint) + "-other", key + " ws \":\" ws " + value);
  }
  // Members in the order of "properties". first(i): members i.. with none written before;
  // rest(i): members i.. after at least one. Each refers to the next, so the grammar stays linear.
  std::vector<std::pair<std::string, bool>> members;  // rule, required
  for (const auto& [name, property] : properties.items()) {
    const std::string value = convert(property, path + ".properties." + name, std::string(hint) + "-" + name);
    members.emplace_back(builder_.add(std::string(hint) + "-" + name + "-kv",
                                      gbnf_literal(json(name).dump()) + " ws \":\" ws " + value),
                         required.contains(name));
  }
  std::string rest = additional_member.empty() ? "" : builder_.add(std::string(hint) + "-rest", "( ws \",\" ws " + additional_member + " )*");
  std::string first = additional_member.empty() ? "" : builder_.add(std::string(hint) + "-first", "( " + additional_member + " " + rest + " )?");
  for (size_t i = members.size(); i-- > 0;) {
    const auto& [member, is_required] = members[i];
    const std::string tail = rest.empty() ? "" : " " + rest;
    const std::string rest_i = is_required ? "ws \",\" ws " + member + tail : "( ws \",\" ws " + member + " )?" + tail;
    std::string first_i;
    if (is_required) first_i = member + tail;
    else if (first.empty()) first_i = "( " + member + tail + " )?";
    else first_i = "( " + member + tail + " | " + first + " )";
    rest = builder_.add(std::format("{}-rest-{}", hint, i), rest_i);
    first = builder_.add(std::format("{}-first-{}", hint, i), first_i);
  }
  return builder_.add(hint, "\"{\" ws " + (first.empty() ? "" : first + " ws ") + "\"}\"");
}

std::string SchemaConverter::convert_array(const json& schema, const std::string& path, std::string_view hint) {
  if (schema.contains("uniqueItems") && schema["uniqueItems"] != json(false)) {
    refuse(path + ".uniqueItems", "uniqueItems is not supported");
  }
  const std::int64_t min_items = count_keyword(schema, "minItems", path).value_or(0);
  const std::optional<std::int64_t> max_items = count_keyword(schema, "maxItems", path);
  if (max_items && *max_items < min_items) refuse(path + ".maxItems", "maxItems is below minItems");
  const std::string ws = builder_.primitive(JsonPrimitive::ws);
  if (max_items && *max_items == 0) return builder_.add(hint, "\"[\" ws \"]\"");
  const std::string item = convert(schema.value("items", json(true)), path + ".items", std::string(hint) + "-item");
  const std::int64_t more_min = std::max<std::int64_t>(min_items - 1, 0);
  const std::string more = builder_.add(std::string(hint) + "-more", "ws \",\" ws " + item);
  const std::optional<std::int64_t> more_max = max_items ? std::optional<std::int64_t>(*max_items - 1) : std::nullopt;
  std::string items = item;
  if (const std::string repeated = builder_.repeat(more, more_min, more_max); !repeated.empty()) items += " " + repeated;
  if (min_items == 0) items = "( " + items + " ws )?";
  else items += " ws";
  return builder_.add(hint, "\"[\" ws " + items + " \"]\"");
}

std::string SchemaConverter::convert_string(const json& schema, const std::string& path, std::string_view hint) {
  const std::optional<std::int64_t> min_length = count_keyword(schema, "minLength", path);
  const std::optional<std::int64_t> max_length = count_keyword(schema, "maxLength", path);
  if (schema.contains("format")) {
    if (min_length || max_length) refuse(path + ".format", "format together with minLength/maxLength is not supported");
    const std::string format = schema["format"].is_string() ? schema["format"].get<std::string>() : "";
    const std::string date = R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))";
    const std::string time =
        R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
    std::string body;
    if (format == "date") body = date;
    else if (format == "time") body = time;
    else if (format == "date-time") body = date + " \"T\" " + time;
    else if (format == "uuid") body = R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})";
    else refuse(path + ".format", "unsupported format '" + schema["format"].dump() + "' (date, time, date-time, uuid are)");
    return builder_.add(std::string(hint) + "-" + format, "\"\\\"\" " + body + " \"\\\"\"");
  }
  if (!min_length && !max_length) return builder_.primitive(JsonPrimitive::string);
  if (max_length && *max_length < min_length.value_or(0)) refuse(path + ".maxLength", "maxLength is below minLength");
  const std::string characters = builder_.repeat(builder_.primitive(JsonPrimitive::character), min_length.value_or(0), max_length);
  return builder_.add(hint, "\"\\\"\" " + (characters.empty() ? "" : characters + " ") + "\"\\\"\"");
}

std::string SchemaConverter::convert_number(const json& schema, const std::string& path, bool integer) {
  std::optional<std::int64_t> lo;
  std::optional<std::int64_t> hi;
  constexpr double kLimit = 1e16;
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!schema.contains(key)) continue;
    const json& bound = schema[key];
    if (!bound.is_number() || std::fabs(bound.get<double>()) >= kLimit) refuse(path + "." + key, "must be a number below 1e16 in magnitude");
    const double v = bound.get<double>();
    const std::string k = key;
    // The tightest integer bounds (integers only can sit exactly on an integer bound).
    if (k == "minimum") lo = std::max(lo.value_or(std::numeric_limits<std::int64_t>::min()), static_cast<std::int64_t>(std::ceil(v)));
    if (k == "exclusiveMinimum") lo = std::max(lo.value_or(std::numeric_limits<std::int64_t>::min()), static_cast<std::int64_t>(std::floor(v)) + 1);
    if (k == "maximum") hi = std::min(hi.value_or(std::numeric_limits<std::int64_t>::max()), static_cast<std::int64_t>(std::floor(v)));
    if (k == "exclusiveMaximum") hi = std::min(hi.value_or(std::numeric_limits<std::int64_t>::max()), static_cast<std::int64_t>(std::ceil(v)) - 1);
  }
  if (!lo && !hi) return builder_.primitive(integer ? JsonPrimitive::integer : JsonPrimitive::number);
  if (lo && hi && *lo > *hi) refuse(path, "no integer lies within the bounds");
  if (integer || lo.value_or(-1) < 0) return builder_.add("bounded-integer", integer_range_gbnf(lo, hi));
  // lo >= 0: x.fraction lies in [x, x + 1), inside the bounds for every x below hi.
  std::string body = integer_range_gbnf(lo, hi) ;
  if (!hi || *hi > *lo) {
    const std::optional<std::int64_t> below = hi ? std::optional<std::int64_t>(*hi - 1) : std::nullopt;
    body = "(" + integer_range_gbnf(lo, below) + std::format(" (\".\" [0-9]{{1,{}}})? | ", kMaxIntegerDigits) + body + ")";
  }
  return builder_.add("bounded-number", body);
}

}  // namespace prefixd::api::detail
