#include "api/prompt_builder.h"

#include <format>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/cache_namespace.h"
#include "api/turn_layout.h"

namespace prefixd::api {
namespace {

// The Vocabulary interface has no "EOS token" accessor, so {{ eos_token }} renders as the text of
// the lowest-numbered end-of-generation token, which is EOS in the common vocabularies (</s>,
// <eos>, <|endoftext|>). bos_token renders empty on purpose: tokenize(add_special = true) adds
// BOS exactly when the model asks for it, so a template's {{ bos_token }} cannot double it.
std::string guess_eos_text(const engine::Vocabulary& vocab) {
  for (engine::Token t = 0; t < vocab.size(); ++t) {
    if (vocab.is_end_of_generation(t)) return vocab.piece(t, /*render_special=*/true);
  }
  return {};
}

}  // namespace

ChatTemplate model_chat_template(const engine::ModelInfo& model, const engine::Vocabulary& vocab) {
  const std::string eos = guess_eos_text(vocab);
  if (!model.chat_template.empty()) {
    auto tmpl = ChatTemplate::create(model.chat_template, "", eos);
    if (tmpl) return std::move(*tmpl);
    spdlog::warn("the model's chat template does not parse ({}); using ChatML", tmpl.error());
  } else {
    spdlog::info("the model has no chat template; using ChatML");
  }
  auto chatml = ChatTemplate::create(std::string(chatml_template_source()), "", eos);
  if (!chatml) throw std::logic_error("the built-in ChatML template does not parse: " + chatml.error());
  return std::move(*chatml);
}

PromptBuilder::PromptBuilder(const engine::Vocabulary& vocab, ChatTemplate chat_template, std::string model_key,
                             std::string runtime_signature, CacheIsolation isolation,
                             std::string_view shared_prefix_text)
    : vocab_(vocab),
      template_(std::move(chat_template)),
      model_key_(std::move(model_key)),
      runtime_signature_(std::move(runtime_signature)),
      isolation_(isolation) {
  if (shared_prefix_text.empty()) return;
  auto prefix = SharedPrefix::render(template_, vocab_, shared_prefix_text);
  if (!prefix) throw std::invalid_argument("the shared prefix: " + prefix.error());
  shared_prefix_ = std::move(*prefix);
}

std::expected<std::string, ApiError> PromptBuilder::render(const ChatRequest& request) const {
  auto text = template_.render(request.chat);
  if (!text) {
    return std::unexpected(ApiError{.status = 400,
                                    .message = std::format("the chat template could not render these messages: {}", text.error()),
                                    .param = "messages",
                                    .code = "template_error"});
  }
  return std::move(*text);
}

std::expected<scheduler::GenerationRequest, ApiError> PromptBuilder::build(const ChatRequest& request,
                                                                           std::int32_t max_prompt_tokens,
                                                                           std::string_view tenant) const {
  auto text = render(request);
  if (!text) return std::unexpected(text.error());
  // parse_special: the template's markers (<|im_start|>...) must become their single special
  // tokens, not be spelled out as text.
  auto tokens = vocab_.tokenize(*text, /*add_special=*/true, /*parse_special=*/true);
  // Checked before the layout is computed, so an oversized prompt costs one tokenization.
  const bool fits = max_prompt_tokens < 0 || tokens.size() <= static_cast<std::size_t>(max_prompt_tokens);
  TurnLayout layout = fits && request.params.cache.enabled ? turn_layout(template_, vocab_, request.chat, *text, tokens)
                                                           : TurnLayout{};
  auto built = finish(request.params, std::move(tokens),
                      template_signature(template_.source(), request.chat.extra_context, request.tool_choice, request.tools),
                      max_prompt_tokens, "messages", tenant);
  if (built) {
    built->cache.boundaries = std::move(layout.boundaries);
    built->cache.continuation = std::move(layout.continuation);
  }
  return built;
}

std::expected<scheduler::GenerationRequest, ApiError> PromptBuilder::build(const CompletionRequest& request,
                                                                           std::int32_t max_prompt_tokens,
                                                                           std::string_view tenant) const {
  std::vector<engine::Token> tokens;
  if (const auto* text = std::get_if<std::string>(&request.prompt)) {
    tokens = vocab_.tokenize(*text, /*add_special=*/true, /*parse_special=*/true);
  } else {
    tokens = std::get<TokenPrompt>(request.prompt);
  }
  return finish(request.params, std::move(tokens), std::string(kRawCompletionSignature), max_prompt_tokens, "prompt",
                tenant);
}

std::expected<scheduler::GenerationRequest, ApiError> PromptBuilder::finish(const CommonParams& params,
                                                                            std::vector<engine::Token> prompt,
                                                                            std::string template_signature,
                                                                            std::int32_t max_prompt_tokens,
                                                                            const char* prompt_param,
                                                                            std::string_view tenant) const {
  if (prompt.empty()) return std::unexpected(invalid_param(prompt_param, "the prompt has no tokens"));
  if (max_prompt_tokens >= 0 && prompt.size() > static_cast<std::size_t>(max_prompt_tokens)) {
    auto error = context_length_exceeded(prompt.size(), static_cast<std::size_t>(max_prompt_tokens));
    error.param = prompt_param;
    return std::unexpected(std::move(error));
  }
  scheduler::GenerationRequest out;
  out.prompt = std::move(prompt);
  out.sampling = params.sampling;
  out.max_tokens = params.max_tokens;
  out.stop = params.stop;
  out.logprobs = params.logprobs;
  out.cache.enabled = params.cache.enabled;
  out.cache.session_key = params.cache.session_key;
  // lora_id stays empty: prefixd loads no adapters.
  out.cache.namespace_digest = namespace_digest(NamespaceFields{.model_id = model_key_,
                                                                .template_signature = std::move(template_signature),
                                                                .runtime_signature = runtime_signature_,
                                                                .tenant = std::string(tenant),
                                                                .cache_salt = params.cache.salt});
  out.cache.scope = cache::scope_id(tenant);
  // Session isolation: only the configured shared prefix, when the prompt starts with it, may come
  // from other sessions.
  if (isolation_ == CacheIsolation::session) out.cache.shared_prefix = shared_prefix_.length_in(out.prompt);
  return out;
}

}  // namespace prefixd::api
