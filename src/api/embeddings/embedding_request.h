// prefixd api — the bodies of the embedding and rerank endpoints, parsed and checked: OpenAI's
// POST /v1/embeddings, llama-server's POST /embedding, and the rerank APIs (POST /v1/rerank in
// Jina's and Cohere's shape, or with `texts` in Hugging Face TEI's). Pure functions: no model.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/chat_request.h"
#include "api/errors.h"
#include "api/openai/request_parser.h"

namespace prefixd::api {

// Which embedding endpoint a body came to: they take the same inputs and answer in other shapes.
enum class EmbeddingsEndpoint {
  openai,  // /v1/embeddings: {"data": [{"object": "embedding", "index", "embedding": [...]}], "usage"}
  native,  // /embedding: [{"index", "embedding": [[...]]}], one vector per token under pooling none
};

// Inputs a request may carry: OpenAI's limit.
inline constexpr std::size_t kMaxEmbeddingInputs = 2048;

// How llama.cpp normalizes a pooled embedding (embd_normalize): -1 none, 0 the largest magnitude
// scaled to int16's range, 1 taxicab, 2 Euclidean, p > 2 the p-norm.
inline constexpr std::int32_t kEuclidean = 2;

struct EmbeddingsRequest {
  // Each input: text (tokenized with the model's special tokens added) or token ids used as they are.
  std::vector<std::variant<std::string, TokenPrompt>> inputs;
  bool base64 = false;                  // encoding_format "base64": little-endian float32 bytes
  std::int32_t normalize = kEuclidean;  // embd_normalize, else the server's --embd-normalize
  std::optional<std::int64_t> dimensions;
  CacheFields cache;
  std::string param;  // the field the inputs came in ("input" or "content"): what errors name
};

// `input` (OpenAI: a string, an array of strings, an array of token ids, or an array of such
// arrays) or, at /embedding, llama-server's `content` in the same shapes; `encoding_format`
// (float, base64), `dimensions`, `embd_normalize`, `model`, and the cache fields (cache_prompt,
// cache_salt, prompt_cache_key, user). Token ids must be below options.vocab_size.
std::expected<EmbeddingsRequest, ApiError> parse_embeddings_request(std::string_view body, const ParseOptions& options,
                                                                    EmbeddingsEndpoint endpoint,
                                                                    std::int32_t default_normalize);

struct RerankRequest {
  std::string query;
  std::vector<std::string> documents;
  std::optional<std::size_t> top_n;  // the best this many; all when absent
  bool return_documents = false;     // each result carries its document's text
  bool tei = false;                  // the body sent `texts` (TEI): a bare array of {index, score} answers
  bool sort = true;                  // results best first (prefixd's `sort: false`: in input order)
  CacheFields cache;
};

// `query` (a string), `documents` (strings, or objects with a string `text`) or TEI's `texts`,
// `top_n` (at least 1), `return_documents` (or TEI's `return_text`), `sort`, `model`.
std::expected<RerankRequest, ApiError> parse_rerank_request(std::string_view body, const ParseOptions& options);

}  // namespace prefixd::api
