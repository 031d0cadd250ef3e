// prefixd api — turns a validated request into the scheduler's GenerationRequest: renders the
// chat template, tokenizes, checks the prompt length, and computes the cache namespace.
#pragma once

#include <cstdint>
#include <expected>
#include <string>

#include "api/chat_template.h"
#include "api/errors.h"
#include "api/request_parser.h"
#include "engine/engine.h"
#include "scheduler/request.h"

namespace prefixd::api {

// The model's own template when it has one that parses; otherwise ChatML (logged).
ChatTemplate model_chat_template(const engine::ModelInfo& model, const engine::Vocabulary& vocab);

class PromptBuilder {
 public:
  // `vocab` must outlive the builder. `model_key` identifies the weights in the cache namespace
  // (the model fingerprint), `runtime_signature` the context settings that change K/V
  // (engine::ModelInfo::runtime_signature); see NamespaceFields.
  PromptBuilder(const engine::Vocabulary& vocab, ChatTemplate chat_template, std::string model_key,
                std::string runtime_signature);

  // Thread-safe. Rejects a template that refuses the conversation, an empty prompt and a prompt
  // longer than `max_prompt_tokens`.
  std::expected<scheduler::GenerationRequest, ApiError> build(const ChatRequest& request,
                                                              std::int32_t max_prompt_tokens) const;
  std::expected<scheduler::GenerationRequest, ApiError> build(const CompletionRequest& request,
                                                              std::int32_t max_prompt_tokens) const;

  // The prompt text of a chat (what POST /apply-template shows), or the template's refusal.
  std::expected<std::string, ApiError> render(const ChatRequest& request) const;
  // What POST /tokenize answers.
  std::vector<engine::Token> tokenize(std::string_view text, bool add_special, bool parse_special) const {
    return vocab_.tokenize(text, add_special, parse_special);
  }

  const ChatTemplate& chat_template() const { return template_; }

 private:
  std::expected<scheduler::GenerationRequest, ApiError> finish(const CommonParams& params,
                                                               std::vector<engine::Token> prompt,
                                                               std::string template_signature,
                                                               std::int32_t max_prompt_tokens,
                                                               const char* prompt_param) const;

  const engine::Vocabulary& vocab_;
  ChatTemplate template_;
  std::string model_key_;
  std::string runtime_signature_;
};

}  // namespace prefixd::api
