// JSON Schema to GBNF: the rules produced for each feature, refusals with the path of the node at
// fault, and the validator the constrained-output tests rely on. (engine_grammar_test.cpp samples
// under these grammars from the real model.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/gbnf_builder.h"
#include "api/json_schema_grammar.h"
#include "api/json_schema_validator.h"

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
  EXPECT_NE(array.find("value-array-item ( ws \",\" ws value-array-item ){1,3} ws \"]\""), std::string::npos) << array;
  EXPECT_NE(grammar_of(R"({"type": "array", "maxItems": 0})").find("\"[\" ws \"]\""), std::string::npos);
}

TEST(JsonSchemaGrammar, EnumAndConstAreLiteralsFilteredBySiblings) {
  const std::string text = grammar_of(R"({"type": "string", "enum": ["x", 1, "yy", null]})");
  EXPECT_NE(text.find(R"("\"x\"" | "\"yy\"")"), std::string::npos) << text;
  EXPECT_EQ(text.find("\"1\""), std::string::npos) << text;
  EXPECT_NE(grammar_of(R"({"const": {"a": [1, true]}})").find(R"("{\"a\":[1,true]}")"), std::string::npos);
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
