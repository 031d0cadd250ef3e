// prefixd api — JSON request bodies in, validated requests (or the ApiError to answer) out.
//
// Pure functions: no model, no scheduler, no I/O, so every rejection rule is unit-testable.
// Tokenizing and the prompt-length check happen later (prompt_builder.h), where the vocabulary is.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/chat_request.h"
#include "api/errors.h"
#include "api/body/json_bounds.h"
#include "engine/types.h"
#include "scheduler/request.h"

namespace prefixd::api {

struct ParseOptions {
  std::vector<std::string> model_names;  // accepted values of `model` (served id, alias)
  bool cache_prompt_default = true;      // false: the server runs with --no-cache-prompt
  std::int32_t vocab_size = 0;           // token ids in a prompt must be below this; 0: unchecked
  // The seed of a request that sends none (--seed); kRandomSeed: a random one per request.
  std::uint32_t default_seed = engine::kRandomSeed;
  std::size_t max_json_nodes = kDefaultMaxJsonNodes;  // values a body may hold (--max-json-nodes)
  ImageLimits images;                    // image parts; none accepted without a vision projector
  // Whether a request may ask for reuse by shifting (n_cache_reuse > 0): the cache is on and the
  // model's K/V can be moved (a dense model on a memory that shifts).
  bool shift_reuse = false;
};

// The body parsed, or why not: nested deeper than kMaxJsonDepth or holding more than `max_nodes`
// values (refused before parsing: json_bounds.h), malformed, or not an object. Every request body
// the server parses goes through here. Objects keep their keys in the order sent: what a client
// sends on to the chat template (tools, schemas, call arguments, kwargs) is rendered by `tojson` in
// that order, as Hugging Face's tojson and llama-server render it, so nothing here may sort it.
std::expected<nlohmann::ordered_json, ApiError> parse_json_object(std::string_view body, std::size_t max_nodes);

std::expected<ChatRequest, ApiError> parse_chat_request(std::string_view body, const ParseOptions& options);
std::expected<CompletionRequest, ApiError> parse_completion_request(std::string_view body,
                                                                    const ParseOptions& options);

// llama-server's native POST /completion: the completion fields (its names: n_predict, cache_prompt,
// stop, seed, temperature, ...) and the native ones.
struct NativeCompletionRequest {
  CompletionRequest completion;
  std::int32_t n_probs = 0;    // alternatives per generated token in completion_probabilities; 0: none
  bool return_tokens = false;  // the generated token ids in `tokens`
  std::int32_t id_slot = -1;   // accepted; requests are placed by the scheduler, whatever slot is asked
  // response_fields: a whole (not streamed) answer keeps only these, each a path of keys joined by
  // '/' that comes out under its last key; empty: the whole answer.
  std::vector<std::string> response_fields;
};
std::expected<NativeCompletionRequest, ApiError> parse_native_completion_request(std::string_view body,
                                                                                 const ParseOptions& options);

// llama-server's POST /infill: the native fields and the text around the cursor. Its prompt is
// assembled from these (native/infill_prompt.h); `native.completion.prompt` stays unset.
struct InfillChunk {
  std::string filename;  // "tmp" when the chunk names none, as llama-server labels it
  std::string text;
};
struct InfillRequest {
  NativeCompletionRequest native;
  std::string input_prefix;                   // the text before the cursor
  std::string input_suffix;                   // the text after it
  std::variant<std::string, TokenPrompt> prompt;  // continues the prefix at the cursor; may be empty
  std::vector<InfillChunk> input_extra;       // other files' text, oldest first
};
std::expected<InfillRequest, ApiError> parse_infill_request(std::string_view body, const ParseOptions& options);

}  // namespace prefixd::api
