// JSON Schema to GBNF: the rules produced for each feature, refusals with the path of the node at
// fault, and the validator the constrained-output tests rely on. (engine_grammar_test.cpp samples
// under these grammars from the real model.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <vector>

#include "api/structured/gbnf_builder.h"
#include "api/structured/json_schema_grammar.h"
#include "api/structured/json_schema_validator.h"

namespace prefixd::api {
namespace {

using json = nlohmann::ordered_json;

std::string grammar_of(const char* schema) {
  auto grammar = json_schema_grammar(json::parse(schema));
  EXPECT_TRUE(grammar) << grammar.error().describe();
  return grammar ? grammar->text : "";
}

SchemaError refusal_of(const char* schema) {
  auto grammar = json_schema_grammar(json::parse(schema));
  EXPECT_FALSE(grammar) << grammar->text;
  return grammar ? SchemaError{} : grammar.error();
}

TEST(JsonSchemaGrammar, ObjectKeysFollowPropertyOrderWithOptionalOnesSkippable) {
  const std::string text = grammar_of(R"({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
      "required": ["a"], "additionalProperties": false})");
  const size_t b = text.find(R"("\"b\"" ws ":" ws)");
  const size_t a = text.find(R"("\"a\"" ws ":" ws)");
  ASSERT_NE(b, std::string::npos) << text;
  ASSERT_NE(a, std::string::npos) << text;
  // "b" is optional: the first member is either b then the rest, or the rest starting at a.
  EXPECT_LT(b, a) << text;
  EXPECT_NE(text.find("value-object-first-0 ::= ( value-object-b-kv value-object-rest-1 | value-object-first-1 )"), std::string::npos) << text;
  EXPECT_NE(text.find("value-object-first-1 ::= value-object-a-kv\n"), std::string::npos) << text;
  EXPECT_NE(text.find("value-object-rest-1 ::= ws \",\" ws value-object-a-kv\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("json-member"), std::string::npos) << "no other key may appear:\n" << text;
}

TEST(JsonSchemaGrammar, AdditionalKeysNeverRepeatAListedName) {
  const std::string text = grammar_of(R"({"type": "object", "properties": {"a": {"type": "null"}},
      "additionalProperties": {"type": "boolean"}})");
  // After a key's first character "a" the key must go on; any other first character is free.
  EXPECT_NE(text.find(R"(value-object-other-key-rest ::= ("\"" | "a" value-object-other-key-rest-0 | [^"\\\x00-\x1f\x61] key-char* "\""))"),
            std::string::npos) << text;
  EXPECT_NE(text.find(R"(value-object-other-key-rest-0 ::= [^"\\\x00-\x1f] key-char* "\"")"), std::string::npos) << text;
}

TEST(JsonSchemaGrammar, WhitespaceIsAtMostOneCharacter) {
  const std::string text = json_object_grammar().text;
  EXPECT_NE(text.find("ws ::= [ \\n]?\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("ws*"), std::string::npos);
}

TEST(JsonSchemaGrammar, StringLengthsAndArrayCountsBecomeRepetitions) {
  EXPECT_NE(grammar_of(R"({"type": "string", "minLength": 2, "maxLength": 5})").find("json-char{2,5}"), std::string::npos);
  const std::string array = grammar_of(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 4})");
  EXPECT_NE(array.find("value-array-item value-array-more{1,3} ws \"]\""), std::string::npos) << array;
  EXPECT_NE(array.find("value-array-more ::= ws \",\" ws value-array-item\n"), std::string::npos) << array;
  EXPECT_NE(grammar_of(R"({"type": "array", "maxItems": 0})").find("\"[\" ws \"]\""), std::string::npos);
}

TEST(JsonSchemaGrammar, EnumAndConstAreLiteralsFilteredBySiblings) {
  const std::string text = grammar_of(R"({"type": "string", "enum": ["x", 1, "yy", null]})");
  // The values' common first character once, then one branch per next character.
  EXPECT_NE(text.find(R"(value ::= "x\"" | "yy\"")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(value-2 ::= "\"" value)"), std::string::npos) << text;
  EXPECT_EQ(text.find("\"1\""), std::string::npos) << text;
  EXPECT_NE(grammar_of(R"({"const": {"a": [1, true]}})").find(R"("{\"a\":[1,true]}")"), std::string::npos);
}

// Each rule's alternatives outside quoted literals and character classes.
std::vector<int> alternatives_per_rule(const std::string& grammar) {
  std::vector<int> out;
  std::istringstream lines(grammar);
  for (std::string line; std::getline(lines, line);) {
    int bars = 0;
    bool quoted = false, in_class = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if ((quoted || in_class) && c == '\\') ++i;
      else if (!in_class && c == '"') quoted = !quoted;
      else if (!quoted && c == '[') in_class = true;
      else if (in_class && c == ']') in_class = false;
      else if (!quoted && !in_class && c == '|') ++bars;
    }
    out.push_back(bars + 1);
  }
  return out;
}

// A flat alternation of N values makes the grammar engine follow N stacks on every masked token;
// as a trie it follows one per possible next character, whatever N.
TEST(JsonSchemaGrammar, ALargeEnumBecomesATrieWithFewAlternativesPerRule) {
  json values = json::array();
  for (int i = 0; i < 100'000; ++i) values.push_back("item-" + std::to_string(i * 7919 % 1'000'003));
  auto grammar = json_schema_grammar(json{{"enum", values}});
  ASSERT_TRUE(grammar) << grammar.error().describe();
  const std::vector<int> alternatives = alternatives_per_rule(grammar->text);
  EXPECT_LE(*std::ranges::max_element(alternatives), 11) << "ten digits, and the end of a value";
  EXPECT_GT(alternatives.size(), 1000u) << "the trie has a rule per branching node";
  // Under a tight rule budget the same schema is refused at its root, naming the flag.
  auto refused = json_schema_grammar(json{{"enum", values}}, {.max_rules = 1000});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().path, "$");
  EXPECT_NE(refused.error().message.find("--max-grammar-rules"), std::string::npos) << refused.error().message;
}

TEST(JsonSchemaGrammar, EnumValuesThatPrefixOthersStayValues) {
  const std::string text = grammar_of(R"({"enum": [123, 1, 2, 12]})");
  // 1 and 12 end values and may go on: what follows them is optional.
  EXPECT_NE(text.find("value ::= (\"3\")?\n"), std::string::npos) << text;
  EXPECT_NE(text.find("value-2 ::= (\"2\" value)?\n"), std::string::npos) << text;
  EXPECT_NE(text.find("value-3 ::= \"1\" value-2 | \"2\"\n"), std::string::npos) << text;
}

TEST(JsonSchemaGrammar, LongRepetitionsAreWrittenInChunksTheEngineAccepts) {
  const std::string text = grammar_of(R"({"type": "string", "minLength": 100000})");
  EXPECT_NE(text.find("chunk-of-json-char ::= json-char{1000}"), std::string::npos) << text;
  EXPECT_NE(text.find("chunk-of-json-char{100} json-char*"), std::string::npos) << text;
  const std::string bounded = grammar_of(R"({"type": "string", "maxLength": 2500})");
  // 0..2500 as fewer than two chunks and up to 999 more, or two chunks and up to 500 more.
  EXPECT_NE(bounded.find("(chunk-of-json-char? json-char{0,999} | chunk-of-json-char{2} json-char{0,500})"), std::string::npos)
      << bounded;
  const std::string items = grammar_of(R"({"type": "array", "items": {"type": "null"}, "minItems": 100000})");
  EXPECT_NE(items.find("chunk-of-value-array-more{99} value-array-more{999} value-array-more*"), std::string::npos) << items;
}

TEST(JsonSchemaGrammar, CountsBeyondTheLimitAreRefusedAtTheirKeyword) {
  EXPECT_EQ(refusal_of(R"({"type": "string", "minLength": 2000000})").path, "$.minLength");
  EXPECT_EQ(refusal_of(R"({"type": "array", "maxItems": 1000001})").path, "$.maxItems");
}

// Beside an enum a count only filters the values, so any size is allowed; one that is no
// non-negative integer is refused at its keyword, never converted (1e136 fits no integer).
TEST(JsonSchemaGrammar, CountsBesideAnEnumFilterAtAnySizeAndMalformedOnesAreRefused) {
  EXPECT_EQ(refusal_of(R"({"minLength": 1e136, "enum": ["a", "bb"]})").path, "$.minLength");
  EXPECT_EQ(refusal_of(R"({"maxItems": -1, "enum": [[1]]})").path, "$.maxItems");
  EXPECT_EQ(refusal_of(R"({"minLength": 11111111111111111111111111111, "enum": ["a"]})").path, "$.minLength");
  EXPECT_EQ(refusal_of(R"({"minLength": 5000000, "enum": ["a", "bb"]})").path, "$.enum");
  EXPECT_EQ(grammar_of(R"({"minLength": 2, "enum": ["a", "bb"]})"), grammar_of(R"({"enum": ["bb"]})"));
  EXPECT_TRUE(validate_json(json::parse(R"("abc")"), json::parse(R"({"minLength": 1e136})")));
  EXPECT_FALSE(validate_json(json::parse(R"("abc")"), json::parse(R"({"maxLength": 1e136})")));
}

// A schema whose value must begin with itself describes no text; the grammar engine would refuse
// its left recursion, and the refusal belongs to the client, at the reference.
TEST(JsonSchemaGrammar, AReferenceBackToItselfBeforeAnyCharacterIsRefused) {
  EXPECT_EQ(refusal_of(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})").path, "$.$defs.a.$ref");
  EXPECT_EQ(refusal_of(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})").path, "$.anyOf[0].$ref");
  EXPECT_EQ(refusal_of(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}},
      "$ref": "#/$defs/a"})").path, "$.$defs.b.anyOf[1].$ref");
  // After a character of the value, the same reference is an ordinary recursion.
  grammar_of(R"({"type": "array", "items": {"$ref": "#"}})");
  grammar_of(R"({"anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": {"$ref": "#"}}}]})");
}

// Strict JSON parsers refuse a \u escape of a lone surrogate (a sampled "\udabb" made replies
// nlohmann could not read): escapes name a code point outside the surrogates, or a pair.
TEST(JsonSchemaGrammar, StringEscapesNeverSpellALoneSurrogate) {
  const std::string text = grammar_of(R"({"type": "string"})");
  EXPECT_NE(text.find(R"(json-char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" json-code-unit))"), std::string::npos) << text;
  EXPECT_NE(text.find(R"([dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("[0-9a-fA-F]{4}"), std::string::npos) << text;
}

TEST(JsonSchemaGrammar, IntegerRangesAreExact) {
  EXPECT_EQ(integer_range_gbnf(0, 120), "(([0-9]) | ([1-9] [0-9]{1}) | (\"1\" (\"0\" ([0-9]) | [1-1] [0-9]{1} | \"2\" (\"0\"))))");
  EXPECT_EQ(integer_range_gbnf(100, 150), "((\"1\" (\"0\" ([0-9]) | [1-4] [0-9]{1} | \"5\" (\"0\"))))");
  EXPECT_EQ(integer_range_gbnf(-3, -1), "(\"-\" ([1-3]))");
  EXPECT_EQ(integer_range_gbnf(7, 7), "((\"7\"))");
}

TEST(JsonSchemaGrammar, RecursiveRefBecomesASelfReferencingRule) {
  const std::string text = grammar_of(R"({"$ref": "#/definitions/list", "definitions": {"list": {"type": "object",
      "properties": {"next": {"anyOf": [{"$ref": "#/definitions/list"}, {"type": "null"}]}}, "additionalProperties": false}}})");
  EXPECT_NE(text.find("root ::= ref-definitions-list\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ref-definitions-list-body-object-next ::= (ref-definitions-list | "), std::string::npos) << text;
}

TEST(JsonSchemaGrammar, TypeArraysAndMissingTypeMeanAlternatives) {
  const std::string text = grammar_of(R"({"type": ["string", "null"]})");
  EXPECT_NE(text.find("value ::= (json-string | json-null)"), std::string::npos) << text;
  EXPECT_NE(grammar_of("{}").find("json-object | json-array"), std::string::npos);
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreRefusedWithTheirPath) {
  EXPECT_EQ(refusal_of(R"({"type": "object", "properties": {"name": {"type": "string", "pattern": "^a"}}})").path,
            "$.properties.name.pattern");
  EXPECT_EQ(refusal_of(R"({"anyOf": [{"type": "string"}, {"not": {"type": "null"}}]})").path, "$.anyOf[1].not");
  EXPECT_EQ(refusal_of(R"({"if": {}, "then": {}})").path, "$.if");
  EXPECT_EQ(refusal_of(R"({"type": "object", "patternProperties": {"x": {}}})").path, "$.patternProperties");
  EXPECT_EQ(refusal_of(R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})").path, "$.allOf");
  EXPECT_EQ(refusal_of(R"({"type": "array", "uniqueItems": true})").path, "$.uniqueItems");
  EXPECT_EQ(refusal_of(R"({"type": "string", "format": "email"})").path, "$.format");
  EXPECT_EQ(refusal_of(R"({"type": "integer", "multipleOf": 2})").path, "$.multipleOf");
  EXPECT_EQ(refusal_of(R"({"$ref": "https://example.com/s.json"})").path, "$.$ref");
  EXPECT_EQ(refusal_of(R"({"$ref": "#/$defs/missing"})").path, "$.$ref");
  EXPECT_EQ(refusal_of(R"({"$ref": "#/$defs/a", "$defs": {"a": {"type": "string", "pattern": "x"}}})").path, "$.$defs.a.pattern");
  EXPECT_EQ(refusal_of(R"({"type": "object", "properties": {}, "required": ["x"], "additionalProperties": false})").path,
            "$.required[0]");
  EXPECT_EQ(refusal_of(R"({"type": "string", "enum": [1, 2]})").path, "$.enum");
  EXPECT_EQ(refusal_of(R"({"type": "integer", "minimum": 5, "maximum": 4})").path, "$");
  EXPECT_EQ(refusal_of("false").path, "$");
}

TEST(JsonSchemaGrammar, ToolCallGrammarRendersTheHermesShape) {
  const std::vector<ToolGrammarSpec> tools = {{"f", json::parse(R"({"type": "object", "properties": {"x": {"type": "null"}}})")},
                                              {"g", json()}};
  auto grammar = tool_call_grammar(tools, 2);
  ASSERT_TRUE(grammar) << grammar.error().describe();
  EXPECT_NE(grammar->text.find(R"("<tool_call>\n{\"name\": \"f\", \"arguments\": ")"), std::string::npos) << grammar->text;
  EXPECT_NE(grammar->text.find(R"("}\n</tool_call>")"), std::string::npos) << grammar->text;
  EXPECT_NE(grammar->text.find(R"(root ::= tool-call ("\n" tool-call){0,1})"), std::string::npos) << grammar->text;
  const std::vector<ToolGrammarSpec> bad = {{"ok", json()}, {"bad", json::parse(R"({"type": "object", "not": {}})")}};
  auto refused = tool_call_grammar(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().path, "$.tools[1].parameters.not");
}

TEST(JsonSchemaValidator, AcceptsValidAndNamesTheFailingPlace) {
  const json schema = json::parse(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer",
      "maximum": 3}}, "d": {"type": "string", "format": "date"}}, "required": ["a"], "additionalProperties": false})");
  EXPECT_FALSE(validate_json(json::parse(R"({"a": [1, 2], "d": "2024-02-29"})"), schema));
  EXPECT_EQ(validate_json(json::parse(R"({"a": [1, 4]})"), schema)->path, "$.a[1]");
  EXPECT_EQ(validate_json(json::parse(R"({"a": [], "x": 1})"), schema)->path, "$.x");
  EXPECT_EQ(validate_json(json::parse(R"({"d": "2024-13-01", "a": []})"), schema)->path, "$.d");
  EXPECT_TRUE(validate_json(json::parse("{}"), schema));
  EXPECT_TRUE(validate_json(json::parse("1"), json::parse(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})")));
  EXPECT_TRUE(validate_json(json::parse(R"("a")"), json::parse(R"({"pattern": "a"})")));  // never unchecked
}

}  // namespace
}  // namespace prefixd::api
