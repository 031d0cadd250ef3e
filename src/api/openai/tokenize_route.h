// prefixd api — llama.cpp's helper routes: POST /tokenize, what a text or a chat becomes as prompt
// tokens; POST /detokenize, the text tokens stand for; and POST /apply-template, the prompt text a
// chat renders to.
#pragma once

#include <cstdint>
#include <expected>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "api/prompt/prompt_builder.h"
#include "api/openai/request_parser.h"

namespace prefixd::api {

// The answer {"tokens": [...]} for a body that is either llama.cpp's {"content", "add_special"
// (false), "parse_special" (true)}, or a chat request ({"messages", "tools", ...}), whose tokens
// are exactly those generation feeds: the chat template applied, special-token strings of the
// client's text read as text. A text or chat surely longer than `max_prompt_tokens` is refused
// (context_length_exceeded) without being tokenized.
std::expected<nlohmann::json, ApiError> tokenize_answer(std::string_view body, const PromptBuilder& prompts,
                                                        const ParseOptions& parse_options,
                                                        std::int32_t max_prompt_tokens);

// The answer {"content": TEXT} for llama.cpp's {"tokens": [ids]}: the bytes the tokens stand for,
// special tokens written out (as llama-server's /detokenize does).
std::expected<nlohmann::json, ApiError> detokenize_answer(std::string_view body, const engine::Vocabulary& vocab,
                                                          std::size_t max_json_nodes);

// The answer {"prompt": TEXT} for a chat request body: the template's rendering of it
// (PromptBuilder::render). A conversation no prompt of `max_prompt_tokens` could hold is refused
// from the raw body, before it is parsed and rendered (whose cost grows with its size).
std::expected<nlohmann::json, ApiError> apply_template_answer(std::string_view body, const PromptBuilder& prompts,
                                                              const ParseOptions& parse_options,
                                                              std::int32_t max_prompt_tokens);

}  // namespace prefixd::api
