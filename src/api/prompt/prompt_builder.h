// prefixd api — turns a validated request into the scheduler's GenerationRequest: renders the
// chat template, tokenizes, checks the prompt length, and computes the cache namespace (with the
// caller's tenant in it), scope and, under session isolation, the shareable prefix length.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/adapters/adapter_table.h"
#include "api/control/cache_isolation.h"
#include "api/prompt/chat_template.h"
#include "api/errors.h"
#include "api/prompt/prompt_limit.h"
#include "api/prompt/turn_layout.h"
#include "api/openai/request_parser.h"
#include "api/prompt/special_text.h"
#include "api/prompt/template_coverage.h"
#include "api/auth/tenants.h"
#include "engine/engine.h"
#include "scheduler/request.h"

namespace prefixd::api {

// The model's own template when it has one that parses; otherwise ChatML (logged).
ChatTemplate model_chat_template(const engine::ModelInfo& model, const engine::Vocabulary& vocab);
// `source` when it is not empty (throws std::invalid_argument naming the parser's reason when it
// does not parse), else the model's (model_chat_template).
ChatTemplate chat_template_for(const std::string& source, const engine::ModelInfo& model, const engine::Vocabulary& vocab);

struct PromptOptions {
  // --allow-special-in-content: special-token strings in messages become control tokens, as the
  // template's own markers do (the behaviour before client text was kept as text).
  bool allow_special_in_content = false;
  CacheIsolation isolation = CacheIsolation::tenant;
  // Under session isolation, the system prompt every session of a tenant shares (empty: none).
  std::string shared_prefix_text;
  // Whether chat requests carry their turn boundaries (CacheOptions::boundaries). Only models
  // reused at checkpoints take checkpoints there; finding them costs a render and a tokenization
  // of the history before each, more than the whole prompt's own tokenization, on every request.
  bool turn_boundaries = true;
  // The engine's vision projector (engine::Engine::vision), or null: chats with images are refused.
  const engine::Vision* vision = nullptr;
  // The LoRA adapters and the server's scales (must outlive the builder), or null: none loaded.
  const AdapterTable* adapters = nullptr;
};

class PromptBuilder {
 public:
  // `vocab` must outlive the builder. `model_key` identifies the weights in the cache namespace
  // (the model fingerprint), `runtime_signature` the context settings that change K/V
  // (engine::ModelInfo::runtime_signature); see NamespaceFields. Renders a few probe
  // conversations to learn what the template keeps (template_coverage.h). `options.isolation` and
  // `options.shared_prefix_text` decide CacheOptions::shared_prefix. Throws std::invalid_argument
  // when the template cannot render the shared prefix.
  PromptBuilder(const engine::Vocabulary& vocab, ChatTemplate chat_template, std::string model_key,
                std::string runtime_signature, PromptOptions options = {});

  // Thread-safe. Rejects a template that refuses the conversation or would drop a message, an
  // empty prompt and a prompt longer than `max_prompt_tokens`. `tenant` is the caller's: a
  // namespace field of its own and the request's cache scope.
  std::expected<scheduler::GenerationRequest, ApiError> build(const ChatRequest& request,
                                                              std::int32_t max_prompt_tokens,
                                                              std::string_view tenant = kDefaultTenant) const;
  std::expected<scheduler::GenerationRequest, ApiError> build(const CompletionRequest& request,
                                                              std::int32_t max_prompt_tokens,
                                                              std::string_view tenant = kDefaultTenant) const;

  // The 400 (context_length_exceeded) for a chat or completion body whose prompt text is surely
  // longer than `max_prompt_tokens`, read from the raw body before it is parsed (body_scan.h);
  // nullopt when it may fit, or when the body cannot be read that way (the parser then judges it).
  std::optional<ApiError> refuse_oversized_chat(std::string_view body, std::int32_t max_prompt_tokens) const;
  std::optional<ApiError> refuse_oversized_completion(std::string_view body, std::int32_t max_prompt_tokens) const;

  // The prompt text of a chat (what POST /apply-template shows), or the template's refusal. The
  // same text generation tokenizes; there, special-token strings that came from the client are
  // read as text.
  std::expected<std::string, ApiError> render(const ChatRequest& request) const;
  // The tokens generation would feed for this chat (POST /tokenize with `messages`).
  std::expected<std::vector<engine::Token>, ApiError> chat_tokens(const ChatRequest& request,
                                                                  std::int32_t max_prompt_tokens) const;
  // What POST /tokenize answers for raw text; a text surely longer than `max_tokens` is refused
  // without being tokenized.
  std::expected<std::vector<engine::Token>, ApiError> tokenize(std::string_view text, bool add_special,
                                                               bool parse_special, std::int32_t max_tokens) const;

  const ChatTemplate& chat_template() const { return template_; }
  const TemplateCoverage& coverage() const { return coverage_; }
  CacheIsolation isolation() const { return options_.isolation; }
  std::size_t shared_prefix_tokens() const { return shared_prefix_.size(); }

 private:
  struct ChatPrompt;
  std::expected<ChatPrompt, ApiError> prepare(const ChatRequest& request, std::int32_t max_prompt_tokens) const;
  std::expected<std::string, ApiError> render_input(const ChatInput& input) const;
  std::optional<ApiError> refuse_text(const TextWeight& text, std::int32_t max_prompt_tokens, const char* param) const;
  std::expected<scheduler::GenerationRequest, ApiError> finish(const CommonParams& params,
                                                               std::vector<engine::Token> prompt,
                                                               scheduler::PromptInputs inputs,
                                                               std::int32_t max_prompt_tokens,
                                                               const char* prompt_param, std::string_view tenant) const;

  const engine::Vocabulary& vocab_;
  ChatTemplate template_;
  std::string model_key_;
  std::string runtime_signature_;
  PromptOptions options_;
  TemplateCoverage coverage_;
  SpecialTextGuard special_text_;
  PromptLimit limit_;
  SharedPrefix shared_prefix_;
  // Turn boundaries of the histories seen (turn_layout); shared by copies, which render alike.
  std::shared_ptr<HistoryMemo> history_memo_ = std::make_shared<HistoryMemo>();
};

}  // namespace prefixd::api
