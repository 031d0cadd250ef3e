// The incremental JSON syntax checker under the tool-call parsers.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "api/tools/json_scan.h"

namespace prefixd::api {
namespace {

// The byte at which the scanner decides, and what it decided; `more` when the text runs out.
std::pair<std::size_t, JsonScanner::Step> scan(std::string_view text, JsonScanner scanner = {}) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const JsonScanner::Step step = scanner.feed(text[i]);
    if (step != JsonScanner::Step::more) return {i, step};
  }
  return {text.size(), JsonScanner::Step::more};
}

TEST(ApiJsonScan, ObjectsCompleteAtTheirClosingBrace) {
  for (std::string_view text : {R"({})", R"({"a": 1})", R"( { "a" : [ 1 , -0.5e+3 , 0 , true , false , null , "x\"\\\/\b\f\n\r\t\u00eF" ] , "b" : { } } )",
                                 R"({"a":{"b":[[],[{}]]},"c":"}{]["})", R"({"n": 10E2, "m": -0, "k": 1.25})"}) {
    SCOPED_TRACE(text);
    const auto [at, step] = scan(text);
    EXPECT_EQ(step, JsonScanner::Step::complete);
    EXPECT_EQ(at, text.find_last_of('}'));
    EXPECT_TRUE(nlohmann::json::accept(text));
  }
}

TEST(ApiJsonScan, InvalidTextIsRejectedAtTheFirstImpossibleByte) {
  const std::vector<std::pair<std::string_view, std::size_t>> cases = {
      {R"({"a": 01})", 7}, {R"({"a": tru})", 9}, {R"({"a" 1})", 5}, {R"({"a": "\x"})", 8}, {R"([1,])", 3},
      {R"({"a": 1,})", 8}, {"{\"a\": \"x\ny\"}", 8}, {R"({"a": "\u12G4"})", 11}, {R"({a: 1})", 1}, {R"({"a": .5})", 6},
      {R"({"a": 1.})", 8}, {R"({"a": 1e})", 8}, {R"({"a": -})", 7}, {R"({"a": 1}})", 8},
  };
  for (const auto& [text, byte] : cases) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(nlohmann::json::accept(text));
    const auto [at, step] = scan(text);
    if (std::string_view(text) == R"({"a": 1}})") {
      // The object is complete at the first '}', before the stray one.
      EXPECT_EQ(step, JsonScanner::Step::complete);
      EXPECT_EQ(at, 7u);
      continue;
    }
    EXPECT_EQ(step, JsonScanner::Step::invalid);
    EXPECT_EQ(at, byte);
  }
}

TEST(ApiJsonScan, PrefixesOfValidTextAskForMore) {
  const std::string_view text = R"({"city": "Par\"is", "n": [1.5, {"x": null}]})";
  for (std::size_t size = 0; size < text.size(); ++size) {
    EXPECT_EQ(scan(text.substr(0, size)).second, JsonScanner::Step::more) << size;
  }
}

TEST(ApiJsonScan, ResumesInsideAnObjectAfterAComma) {
  EXPECT_EQ(scan(R"( "id": "a1b2c3d4e"})", JsonScanner::inside_object_after_comma()).second, JsonScanner::Step::complete);
  EXPECT_EQ(scan(R"(})", JsonScanner::inside_object_after_comma()).second, JsonScanner::Step::invalid);
}

}  // namespace
}  // namespace prefixd::api
