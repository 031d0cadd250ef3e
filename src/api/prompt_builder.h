// prefixd api — turns a validated request into the scheduler's GenerationRequest: renders the
// chat template, tokenizes, checks the prompt length, and computes the cache namespace (with the
// caller's tenant in it), scope and, under session isolation, the shareable prefix length.
#pragma once

#include <cstdint>
#include <expected>
#include <string>

#include "api/cache_isolation.h"
#include "api/chat_template.h"
#include "api/errors.h"
#include "api/tenants.h"
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
  // `isolation` and `shared_prefix_text` (the system prompt every session of a tenant shares under
  // session isolation; empty: none) decide CacheOptions::shared_prefix. Throws
  // std::invalid_argument when the template cannot render the shared prefix.
  PromptBuilder(const engine::Vocabulary& vocab, ChatTemplate chat_template, std::string model_key,
                std::string runtime_signature, CacheIsolation isolation = CacheIsolation::tenant,
                std::string_view shared_prefix_text = {});

  // Thread-safe. Rejects a template that refuses the conversation, an empty prompt and a prompt
  // longer than `max_prompt_tokens`. `tenant` is the caller's: a namespace field of its own and
  // the request's cache scope.
  std::expected<scheduler::GenerationRequest, ApiError> build(const ChatRequest& request,
                                                              std::int32_t max_prompt_tokens,
                                                              std::string_view tenant = kDefaultTenant) const;
  std::expected<scheduler::GenerationRequest, ApiError> build(const CompletionRequest& request,
                                                              std::int32_t max_prompt_tokens,
                                                              std::string_view tenant = kDefaultTenant) const;

  // The prompt text of a chat (what POST /apply-template shows), or the template's refusal.
  std::expected<std::string, ApiError> render(const ChatRequest& request) const;
  // What POST /tokenize answers.
  std::vector<engine::Token> tokenize(std::string_view text, bool add_special, bool parse_special) const {
    return vocab_.tokenize(text, add_special, parse_special);
  }

  const ChatTemplate& chat_template() const { return template_; }
  CacheIsolation isolation() const { return isolation_; }
  std::size_t shared_prefix_tokens() const { return shared_prefix_.size(); }

 private:
  std::expected<scheduler::GenerationRequest, ApiError> finish(const CommonParams& params,
                                                               std::vector<engine::Token> prompt,
                                                               std::string template_signature,
                                                               std::int32_t max_prompt_tokens,
                                                               const char* prompt_param, std::string_view tenant) const;

  const engine::Vocabulary& vocab_;
  ChatTemplate template_;
  std::string model_key_;
  std::string runtime_signature_;
  CacheIsolation isolation_;
  SharedPrefix shared_prefix_;
};

}  // namespace prefixd::api
