// prefixd api — what a JSON request body may make the server build, checked before it is parsed.
//
// Parsing a body into nlohmann::json allocates a node for every value (and a heap block for every
// object, array and string), so the memory a parse takes is bounded by the body's values, not its
// bytes: 8 MB of `{},` are 2.7 million empty objects, about 250 MB while parsed, 30 times the
// body. What runs after parsing (copies, the chat template, canonical dumps) also walks values
// recursively, so nesting needs a bound of its own. Every request body is scanned once before it
// is parsed (one pass over the bytes, no allocation) and refused past either bound.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"

namespace prefixd::api {

// Deepest nesting of arrays and objects a body may have (the root object is level 1). Real
// requests nest a few levels, a tool's JSON schema perhaps a dozen; 100,000 levels fit in 200 KB
// and overflowed the stack of what walks them.
inline constexpr std::size_t kMaxJsonDepth = 128;

// Values (objects, arrays, strings, numbers, true, false, null; not object keys) a body may hold
// by default (--max-json-nodes). A value costs the parse from 16 bytes (a number in an array) to
// about 100 (an empty object or string, with its heap block): measured on the server, a body of
// 262,144 empty objects raised the resident set by 27 MiB while it was parsed, where 8 MB of them
// (2.7 million) took about 250 MB. Real requests hold far fewer: a 10,000-message chat about 30,000
// values (60,000 with content parts), 128 tools with their schemas a few thousand. A completion
// prompt of token ids holds one value per token, so the server raises the default to its context
// size plus kJsonNodesBesideTokenPrompt when that is larger (json_node_limit_for_context).
inline constexpr std::size_t kDefaultMaxJsonNodes = 262'144;
inline constexpr std::size_t kJsonNodesBesideTokenPrompt = 65'536;

// The default limit for a server whose prompts may hold `context_tokens`: a prompt of token ids
// that fills the context always fits.
std::size_t json_node_limit_for_context(std::size_t context_tokens);

// How deep a JSON text nests and how many values it holds, counted in one pass outside strings.
// Exact for the values valid JSON writes and for every valid prefix of it (so it also bounds what
// a parser builds before it meets an error); the parsed tree holds fewer where an object repeats a
// key (the last value wins). An arbitrary answer for other invalid text, which the parser refuses.
struct JsonShape {
  std::size_t depth = 0;  // deepest nesting of arrays and objects (0: none)
  std::size_t nodes = 0;  // values
};

// Stops counting once the depth exceeds `depth_limit` or the values exceed `node_limit` (the
// answer is then limit + 1 in that field), so a hostile body costs no more than the limit's scan.
JsonShape json_shape(std::string_view text, std::size_t depth_limit, std::size_t node_limit);

// The values of a parsed document, as json_shape counts them in its text (tests and fuzzing
// compare the two). Recursive: only for documents within kMaxJsonDepth.
std::size_t json_value_count(const nlohmann::ordered_json& value);

// The nesting depth of arrays and objects in JSON text; stops counting at `limit` + 1.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = kMaxJsonDepth);

// Why `body` must not be parsed: 400 `json_too_deep` past kMaxJsonDepth, 413 `json_too_many_nodes`
// past `max_nodes` values; nullopt when it may be.
std::optional<ApiError> refuse_unbounded_json(std::string_view body, std::size_t max_nodes);

}  // namespace prefixd::api
