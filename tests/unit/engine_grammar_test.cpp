// Constrained decoding on the real engine: libllama's grammar sampler keeps the random-weight tiny
// model's output inside the grammars json_schema_grammar builds, and generation ends with an
// end-of-generation token once the value is complete.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/structured/json_schema_grammar.h"
#include "api/tools/tool_calls.h"
#include "api/structured/json_schema_validator.h"
#include "engine/engine.h"
#include "support/fake_engine.h"

namespace prefixd {
namespace {

using engine::BatchToken;
using engine::DecodeStatus;
using engine::Engine;
using engine::Grammar;
using engine::SamplingParams;
using engine::Token;
using nlohmann::json;

engine::ContextOptions small_context() {
  engine::ContextOptions o;
  o.n_ctx = 1024;
  o.n_batch = 64;
  o.n_parallel = 1;
  o.n_holder_seqs = 1;
  o.n_threads = 1;  // one: ctest runs another test beside this one (tests/integration/server_process.cpp says why)
  return o;
}

Engine& tiny_engine() {
  // One load for the whole file: loading is the slow part, and every test clears the memory.
  static const std::unique_ptr<Engine> engine = engine::load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  return *engine;
}

struct Generation {
  std::string text;
  bool ended = false;  // an end-of-generation token came before max_tokens
  bool stuck = false;
  int tokens = 0;
};

Generation generate(Engine& e, std::optional<Grammar> grammar, std::uint32_t seed, int max_tokens) {
  e.clear();
  SamplingParams params;
  params.seed = seed;
  params.temperature = 1.0f;
  params.grammar = std::move(grammar);
  auto sampler = e.make_sampler(params);
  const std::vector<Token> prompt =
      e.vocab().tokenize("<|im_start|>user\nReply in JSON.<|im_end|>\n<|im_start|>assistant\n", false, true);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({prompt[i], static_cast<engine::Pos>(i), 0, i + 1 == prompt.size()});
  EXPECT_EQ(e.decode(batch), DecodeStatus::ok);
  auto row = static_cast<std::int32_t>(batch.size() - 1);
  Generation out;
  auto pos = static_cast<engine::Pos>(prompt.size());
  for (; out.tokens < max_tokens; ++out.tokens) {
    const Token token = sampler->sample(row);
    if (e.vocab().is_end_of_generation(token)) {
      out.ended = true;
      break;
    }
    out.text += e.vocab().piece(token, true);
    const BatchToken next{token, pos++, 0, true};
    EXPECT_EQ(e.decode(std::span(&next, 1)), DecodeStatus::ok);
    row = 0;
  }
  out.stuck = sampler->grammar_stuck();
  return out;
}

// Samples under the schema's grammar with several seeds: every reply must end by itself and be
// JSON that validates against the schema.
void expect_constrained_output_validates(const nlohmann::ordered_json& schema, int max_tokens = 400) {
  auto grammar = api::json_schema_grammar(schema);
  ASSERT_TRUE(grammar) << grammar.error().describe();
  ASSERT_EQ(tiny_engine().check_grammar(*grammar), std::nullopt) << grammar->text;
  for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    const Generation g = generate(tiny_engine(), *grammar, seed, max_tokens);
    EXPECT_TRUE(g.ended) << "seed " << seed << " ran to " << g.tokens << " tokens: " << g.text;
    EXPECT_FALSE(g.stuck);
    const json value = json::parse(g.text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << "seed " << seed << ": not JSON: " << g.text << "\n" << grammar->text;
    const auto invalid = api::validate_json(value, json::parse(schema.dump()));
    EXPECT_FALSE(invalid) << "seed " << seed << ": " << invalid->describe() << " in " << g.text;
  }
}

TEST(EngineGrammar, UnconstrainedRandomModelDoesNotWriteJson) {
  // The control for every test below: without a grammar the random model writes no valid JSON.
  for (std::uint32_t seed : {1u, 2u}) {
    const Generation g = generate(tiny_engine(), std::nullopt, seed, 40);
    EXPECT_TRUE(json::parse(g.text, nullptr, false).is_discarded()) << g.text;
  }
}

TEST(EngineGrammar, CheckGrammarReportsParseErrorsAsValues) {
  Engine& e = tiny_engine();
  EXPECT_EQ(e.check_grammar({.text = "root ::= \"a\" [0-9]*", .root = "root"}), std::nullopt);
  const auto broken = e.check_grammar({.text = "root ::= \"a", .root = "root"});
  ASSERT_TRUE(broken);
  EXPECT_TRUE(broken->starts_with("invalid grammar: ")) << *broken;
  EXPECT_GT(broken->size(), std::string("invalid grammar: ").size());
  EXPECT_TRUE(e.check_grammar({.text = "start ::= \"a\"", .root = "root"}));  // no such root
  EXPECT_TRUE(e.check_grammar({.text = "root ::= missing", .root = "root"}));  // undefined rule
  EXPECT_TRUE(e.check_grammar({.text = "  ", .root = "root"}));                // empty: would constrain nothing
  SamplingParams params;
  params.grammar = Grammar{.text = "root ::= (", .root = "root"};
  EXPECT_THROW(e.make_sampler(params), std::invalid_argument);
}

TEST(EngineGrammar, LiteralGrammarEndsWithEndOfGeneration) {
  // With nothing left to extend, the grammar leaves only end-of-generation tokens.
  for (std::uint32_t seed : {1u, 7u}) {
    const Generation g = generate(tiny_engine(), Grammar{.text = "root ::= \"{\\\"ok\\\": true}\""}, seed, 100);
    EXPECT_EQ(g.text, "{\"ok\": true}");
    EXPECT_TRUE(g.ended);
  }
}

TEST(EngineGrammar, ObjectWithScalarsValidates) {
  expect_constrained_output_validates(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 8},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "score": {"type": "number", "minimum": -5, "maximum": 5},
      "ratio": {"type": "number", "minimum": 0, "maximum": 1},
      "admin": {"type": "boolean"},
      "nickname": {"type": ["string", "null"], "maxLength": 4},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "minItems": 1, "maxItems": 3}
    },
    "required": ["name", "age", "admin", "tags"],
    "additionalProperties": false
  })"));
}

TEST(EngineGrammar, NestedAnyOfConstFormatsValidate) {
  expect_constrained_output_validates(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "kind": {"const": "event"},
      "when": {"type": "string", "format": "date-time"},
      "day": {"type": "string", "format": "date"},
      "id": {"type": "string", "format": "uuid"},
      "where": {"anyOf": [
        {"type": "object", "properties": {"lat": {"type": "integer", "minimum": -90, "maximum": 90}},
         "required": ["lat"], "additionalProperties": false},
        {"type": "string", "maxLength": 6},
        {"type": "null"}]},
      "level": {"oneOf": [{"enum": [1, 2, 3]}, {"enum": ["low", "high"]}]}
    },
    "required": ["kind", "when", "id", "where", "level"],
    "additionalProperties": false
  })"));
}

// A large enum (a trie) and repetitions beyond the engine's own limit (chunks) are grammars the
// engine builds, and sampling under the enum writes one of its values.
TEST(EngineGrammar, LargeEnumsAndLongRepetitionsAreBuiltAndSampled) {
  json values = json::array();
  for (int i = 0; i < 20'000; ++i) values.push_back("v" + std::to_string(i * 7919 % 100'003));
  const nlohmann::ordered_json schema = {{"enum", values}};
  auto grammar = api::json_schema_grammar(schema);
  ASSERT_TRUE(grammar) << grammar.error().describe();
  ASSERT_EQ(tiny_engine().check_grammar(*grammar), std::nullopt);
  for (std::uint32_t seed : {1u, 2u}) {
    const Generation g = generate(tiny_engine(), *grammar, seed, 40);
    EXPECT_TRUE(g.ended) << g.text;
    EXPECT_FALSE(api::validate_json(json::parse(g.text), json::parse(schema.dump()))) << g.text;
  }
  for (const char* long_counts : {R"({"type": "string", "minLength": 100000})", R"({"type": "string", "maxLength": 5000})",
                                  R"({"type": "array", "items": {"type": "null"}, "minItems": 100000, "maxItems": 250000})"}) {
    auto built = api::json_schema_grammar(nlohmann::ordered_json::parse(long_counts));
    ASSERT_TRUE(built) << built.error().describe();
    EXPECT_EQ(tiny_engine().check_grammar(*built), std::nullopt) << long_counts;
  }
  // The grammar engine's own limit, which the chunks stay under.
  EXPECT_NE(tiny_engine().check_grammar(Grammar{.text = "root ::= \"a\"{2500}", .root = "root"}), std::nullopt);
}

// A linked list rather than a tree: a random model keeps every optional member it may, so a tree
// whose nodes may have two children grows without end; a list ends at the first null.
TEST(EngineGrammar, RecursiveRefValidates) {
  expect_constrained_output_validates(nlohmann::ordered_json::parse(R"({
    "$ref": "#/$defs/node",
    "$defs": {"node": {
      "type": "object",
      "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 9},
                     "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
      "required": ["v", "next"],
      "additionalProperties": false}}
  })"), 600);
}

TEST(EngineGrammar, ControlTokensNeverAppearInsideStrings) {
  // A string admits any text; a control token ("<|extra_3|>") would be invisible in the reply.
  const Grammar grammar{.text = "root ::= \"\\\"\" [^\"]{1,40} \"\\\"\""};
  for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    const Generation g = generate(tiny_engine(), grammar, seed, 60);
    EXPECT_EQ(g.text.find("<|"), std::string::npos) << g.text;
  }
}

TEST(EngineGrammar, ToolCallGrammarWritesHermesCallOfAnAllowedTool) {
  const std::vector<api::ToolGrammarSpec> tools = {
      {"get_weather", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"], "additionalProperties": false})")},
      {"ping", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {}, "additionalProperties": false})")}};
  auto grammar = api::tool_call_grammar(tools);
  ASSERT_TRUE(grammar) << grammar.error().describe();
  const std::string open = "<tool_call>\n";
  const std::string close = "}\n</tool_call>";
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    const Generation g = generate(tiny_engine(), *grammar, seed, 200);
    ASSERT_TRUE(g.ended) << g.text;
    ASSERT_TRUE(g.text.starts_with(open)) << g.text;
    ASSERT_TRUE(g.text.ends_with("\n</tool_call>")) << g.text;
    const json call = json::parse(g.text.substr(open.size(), g.text.size() - open.size() - std::string("\n</tool_call>").size()), nullptr, false);
    ASSERT_FALSE(call.is_discarded()) << g.text;
    const std::string name = call.at("name").get<std::string>();
    const auto tool = std::find_if(tools.begin(), tools.end(), [&](const auto& t) { return t.name == name; });
    ASSERT_NE(tool, tools.end()) << name;
    EXPECT_FALSE(api::validate_json(call.at("arguments"), json::parse(tool->parameters.dump()))) << g.text;
  }
  // A named function: only that one.
  auto named = api::tool_call_grammar(std::span(tools).subspan(1, 1));
  ASSERT_TRUE(named);
  const Generation g = generate(tiny_engine(), *named, 5, 100);
  EXPECT_TRUE(g.ended);
  ASSERT_TRUE(g.text.starts_with("<tool_call>\n{\"name\": \"ping\", \"arguments\": {")) << g.text;
  EXPECT_TRUE(g.text.ends_with("}}\n</tool_call>")) << g.text;
}

// Llama 3's JSON calls: the same constraint in the other syntax, and the parser reads the call.
TEST(EngineGrammar, Llama3CallGrammarGivesACallTheLlama3ParserReads) {
  const std::vector<api::ToolGrammarSpec> tools = {
      {"get_weather", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}},
        "required": ["city"], "additionalProperties": false})")}};
  EXPECT_FALSE(api::tool_call_grammar(tools, 2, api::CallSyntax::llama3)) << "one call per reply";
  auto grammar = api::tool_call_grammar(tools, 1, api::CallSyntax::llama3);
  ASSERT_TRUE(grammar) << grammar.error().describe();
  const json declared = json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  for (std::uint32_t seed : {1u, 2u}) {
    const Generation g = generate(tiny_engine(), *grammar, seed, 100);
    ASSERT_TRUE(g.ended) << g.text;
    ASSERT_TRUE(g.text.starts_with("{\"name\": \"get_weather\", \"parameters\": {")) << g.text;
    const api::ParsedAssistant parsed = api::parse_tool_calls(g.text, api::ToolCallFormat::llama3, declared);
    ASSERT_EQ(parsed.tool_calls.size(), 1u) << g.text;
    EXPECT_EQ(parsed.content, "");
    const std::string city = json::parse(parsed.tool_calls[0].arguments).at("city");
    EXPECT_TRUE(city == "Paris" || city == "Oslo") << g.text;
  }
}

TEST(EngineGrammar, JsonObjectGrammarIsAcceptedAndStartsAnObject) {
  const Grammar grammar = api::json_object_grammar();
  ASSERT_EQ(tiny_engine().check_grammar(grammar), std::nullopt) << grammar.text;
  const Generation g = generate(tiny_engine(), grammar, 3, 60);
  ASSERT_FALSE(g.text.empty());
  EXPECT_EQ(g.text[0], '{') << g.text;
  if (g.ended) {
    EXPECT_TRUE(json::parse(g.text, nullptr, false).is_object()) << g.text;
  }
}

TEST(FakeEngineGrammar, RecordsRequestedGrammarsAndRefusesMissingRoot) {
  engine::FakeEngine fake;
  EXPECT_EQ(fake.check_grammar({.text = "root ::= \"x\"", .root = "root"}), std::nullopt);
  EXPECT_TRUE(fake.check_grammar({.text = "value ::= \"x\"", .root = "root"}));
  EXPECT_TRUE(fake.check_grammar({.text = "", .root = "root"}));
  SamplingParams params;
  params.grammar = Grammar{.text = "root ::= \"x\"", .root = "root"};
  fake.make_sampler(params);
  ASSERT_EQ(fake.grammars_requested().size(), 1u);
  EXPECT_EQ(fake.grammars_requested()[0], *params.grammar);
  params.grammar = Grammar{.text = "other ::= \"x\"", .root = "root"};
  EXPECT_THROW(fake.make_sampler(params), std::invalid_argument);
}

}  // namespace
}  // namespace prefixd
