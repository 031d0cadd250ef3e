#include "api/prompt/prompt_builder.h"

#include <format>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/images/image_prompt.h"
#include "api/prompt/cache_namespace.h"
#include "api/prompt/turn_layout.h"

namespace prefixd::api {

// Turn boundaries a chat request carries at most (the first user turn and the latest ones).
constexpr std::size_t kMaxTurnBoundaries = 8;
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

ChatTemplate chat_template_for(const std::string& source, const engine::ModelInfo& model, const engine::Vocabulary& vocab) {
  if (source.empty()) return model_chat_template(model, vocab);
  auto tmpl = ChatTemplate::create(source, "", guess_eos_text(vocab));
  if (!tmpl) throw std::invalid_argument("the chat template does not parse: " + tmpl.error());
  spdlog::info("chat template: the one given at startup, not the model's");
  return std::move(*tmpl);
}

// What prepare() made of a chat: the input the template rendered (the request's own, or a copy
// with placeholders for special-token strings), the text it rendered, and the prompt's tokens.
struct PromptBuilder::ChatPrompt {
  std::optional<ChatInput> shielded;   // set when some client string held a special-token string
  std::vector<std::string> originals;  // what the placeholders in `shielded` stand for
  std::string rendered;                // the template's output for that input (placeholders included)
  std::vector<engine::Token> tokens;
  std::vector<scheduler::PromptImage> images;  // where the request's images stand in `tokens`
};

PromptBuilder::PromptBuilder(const engine::Vocabulary& vocab, ChatTemplate chat_template, std::string model_key,
                             std::string runtime_signature, PromptOptions options)
    : vocab_(vocab),
      template_(std::move(chat_template)),
      model_key_(std::move(model_key)),
      runtime_signature_(std::move(runtime_signature)),
      options_(options),
      coverage_(template_),
      special_text_(vocab.control_texts()),
      limit_(vocab.token_span()) {
  if (options_.shared_prefix_text.empty()) return;
  auto prefix = SharedPrefix::render(template_, vocab_, options_.shared_prefix_text);
  if (!prefix) throw std::invalid_argument("the shared prefix: " + prefix.error());
  shared_prefix_ = std::move(*prefix);
}

std::expected<std::string, ApiError> PromptBuilder::render_input(const ChatInput& input) const {
  auto text = template_.render(input);
  if (!text) {
    return std::unexpected(ApiError{.status = 400,
                                    .message = std::format("the chat template could not render these messages: {}", text.error()),
                                    .param = "messages",
                                    .code = "template_error"});
  }
  return std::move(*text);
}

std::expected<std::string, ApiError> PromptBuilder::render(const ChatRequest& request) const {
  if (auto dropped = coverage_.check(request.chat.messages)) return std::unexpected(std::move(*dropped));
  return render_input(request.chat);
}

std::optional<ApiError> PromptBuilder::refuse_text(const TextWeight& text, std::int32_t max_prompt_tokens,
                                                   const char* param) const {
  if (max_prompt_tokens < 0) return std::nullopt;
  const std::size_t at_least = limit_.prompt_tokens(text);
  if (at_least <= static_cast<std::size_t>(max_prompt_tokens)) return std::nullopt;
  auto error = context_length_exceeded_at_least(at_least, static_cast<std::size_t>(max_prompt_tokens));
  error.param = param;
  return error;
}

std::optional<ApiError> PromptBuilder::refuse_oversized_chat(std::string_view body, std::int32_t max_prompt_tokens) const {
  if (max_prompt_tokens < 0 || !limit_.bounded()) return std::nullopt;
  const auto messages = scan_chat_messages(body);
  if (!messages) return std::nullopt;
  // Only text every template keeps counts: user and tool turns and a leading system prompt, when
  // the template was seen to render them. Assistant turns do not count (templates may cut the
  // reasoning out of earlier replies), nor do later system messages.
  TextWeight kept;
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const MessageWeight& message = (*messages)[i];
    const bool leading_system = i == 0 && (message.role == "system" || message.role == "developer");
    const bool counted = message.role == "user" || message.role == "tool" || leading_system;
    if (!counted || !coverage_.renders_content(leading_system ? "system" : message.role)) continue;
    kept.bytes += message.content.bytes;
    kept.non_space_bytes += message.content.non_space_bytes;
  }
  const std::size_t at_least = limit_.rendered_content_tokens(kept);
  if (at_least <= static_cast<std::size_t>(max_prompt_tokens)) return std::nullopt;
  return context_length_exceeded_at_least(at_least, static_cast<std::size_t>(max_prompt_tokens));
}

std::optional<ApiError> PromptBuilder::refuse_oversized_completion(std::string_view body,
                                                                   std::int32_t max_prompt_tokens) const {
  if (max_prompt_tokens < 0 || !limit_.bounded()) return std::nullopt;
  const auto prompt = scan_completion_prompt(body);
  if (!prompt) return std::nullopt;
  return refuse_text(*prompt, max_prompt_tokens, "prompt");
}

std::expected<PromptBuilder::ChatPrompt, ApiError> PromptBuilder::prepare(const ChatRequest& request,
                                                                          std::int32_t max_prompt_tokens) const {
  if (auto dropped = coverage_.check(request.chat.messages)) return std::unexpected(std::move(*dropped));
  const ChatInput& chat = request.chat;
  ChatPrompt prompt;
  if (!options_.allow_special_in_content && special_text_.active() &&
      (special_text_.found_in(chat.messages) || special_text_.found_in(chat.tools) ||
       special_text_.found_in(chat.extra_context))) {
    prompt.shielded = chat;
    special_text_.shield(prompt.shielded->messages, prompt.originals);
    special_text_.shield(prompt.shielded->tools, prompt.originals);
    special_text_.shield(prompt.shielded->extra_context, prompt.originals);
  }
  auto rendered = render_input(prompt.shielded ? *prompt.shielded : chat);
  if (!rendered) return std::unexpected(rendered.error());
  prompt.rendered = std::move(*rendered);
  const LiteralText restored = prompt.shielded ? special_text_.restore(prompt.rendered, prompt.originals) : LiteralText{};
  const std::string& text = prompt.shielded ? restored.text : prompt.rendered;
  if (prompt.shielded) {
    // The placeholders only work if the template treats them as it treats the strings they stand
    // for; then the prompt is exactly the text /apply-template shows.
    const auto plain = render_input(chat);
    if (!plain || *plain != text) {
      return std::unexpected(invalid_request(
          "the model's chat template renders these messages differently when their special-token strings are kept "
          "as text; remove the special-token strings, or start the server with --allow-special-in-content",
          "special_tokens_in_content"));
    }
  }
  if (auto refused = refuse_text(weigh(text), max_prompt_tokens, "messages")) return std::unexpected(std::move(*refused));
  // Special tokens are parsed: the template's markers (<|im_start|>...) must become their single
  // special tokens, not be spelled out as text. The client's special-token strings are not.
  if (!request.images.empty()) {
    if (options_.vision == nullptr) {
      return std::unexpected(invalid_param(request.images.front().param,
                                           "this server has no vision projector for images (start it with --mmproj)"));
    }
    const PieceTokenizer piece = [this](std::string_view piece_text, bool add_special,
                                        std::span<const engine::TextRange> literal) {
      return vocab_.tokenize_with_literals(piece_text, add_special, literal);
    };
    auto with_images = tokenize_with_images(text, restored.literal, request.images, *options_.vision, piece);
    if (!with_images) return std::unexpected(std::move(with_images.error()));
    prompt.tokens = std::move(with_images->tokens);
    prompt.images = std::move(with_images->images);
    return prompt;
  }
  prompt.tokens = vocab_.tokenize_with_literals(text, /*add_special=*/true, restored.literal);
  return prompt;
}

std::expected<scheduler::GenerationRequest, ApiError> PromptBuilder::build(const ChatRequest& request,
                                                                           std::int32_t max_prompt_tokens,
                                                                           std::string_view tenant) const {
  auto prompt = prepare(request, max_prompt_tokens);
  if (!prompt) return std::unexpected(prompt.error());
  // Checked before the layout is computed, so an oversized prompt costs one tokenization.
  const bool fits = max_prompt_tokens < 0 || prompt->tokens.size() <= static_cast<std::size_t>(max_prompt_tokens);
  TurnLayout layout;
  // A prompt with images carries no turn layout: the layout re-renders the history as text, where
  // an image is its marker and not its tokens. Checkpoint families checkpoint at the images' edges
  // (below), along the prompt and at its end, which the next turn extends.
  if (fits && request.params.cache.enabled && prompt->images.empty()) {
    const auto& originals = prompt->originals;
    const RenderedTokenizer tokenize = [this, &originals](std::string_view rendered, bool add_special) {
      const LiteralText text = special_text_.restore(rendered, originals);
      return vocab_.tokenize_with_literals(text.text, add_special, text.literal);
    };
    layout = turn_layout(template_, tokenize, prompt->shielded ? *prompt->shielded : request.chat, prompt->rendered,
                         prompt->tokens, options_.turn_boundaries ? kMaxTurnBoundaries : 0, history_memo_.get());
  }
  auto built = finish(request.params, std::move(prompt->tokens),
                      template_inputs(template_.source(), request.chat.extra_context, request.tool_choice, request.tools),
                      max_prompt_tokens, "messages", tenant);
  if (built) {
    built->cache.boundaries = std::move(layout.boundaries);
    built->cache.continuation = std::move(layout.continuation);
    // Checkpoint families resume at an image's edges: before it (a prompt that holds another image
    // there) and after it (another question about the same image).
    for (const scheduler::PromptImage& image : prompt->images) {
      if (built->cache.boundaries.size() + 2 > kMaxTurnBoundaries) break;
      built->cache.boundaries.push_back(image.begin);
      built->cache.boundaries.push_back(image.end());
    }
    built->images = std::move(prompt->images);
  }
  return built;
}

std::expected<std::vector<engine::Token>, ApiError> PromptBuilder::chat_tokens(const ChatRequest& request,
                                                                               std::int32_t max_prompt_tokens) const {
  auto prompt = prepare(request, max_prompt_tokens);
  if (!prompt) return std::unexpected(prompt.error());
  return std::move(prompt->tokens);
}

std::expected<std::vector<engine::Token>, ApiError> PromptBuilder::tokenize(std::string_view text, bool add_special,
                                                                            bool parse_special,
                                                                            std::int32_t max_tokens) const {
  if (auto refused = refuse_text(weigh(text), max_tokens, "content")) return std::unexpected(std::move(*refused));
  return vocab_.tokenize(text, add_special, parse_special);
}

std::expected<scheduler::GenerationRequest, ApiError> PromptBuilder::build(const CompletionRequest& request,
                                                                           std::int32_t max_prompt_tokens,
                                                                           std::string_view tenant) const {
  std::vector<engine::Token> tokens;
  if (const auto* text = std::get_if<std::string>(&request.prompt)) {
    // The caller writes the whole prompt, markers included: special tokens are parsed everywhere.
    if (auto refused = refuse_text(weigh(*text), max_prompt_tokens, "prompt")) return std::unexpected(std::move(*refused));
    tokens = vocab_.tokenize(*text, /*add_special=*/true, /*parse_special=*/true);
  } else {
    tokens = std::get<TokenPrompt>(request.prompt);
  }
  return finish(request.params, std::move(tokens), raw_completion_inputs(), max_prompt_tokens, "prompt", tenant);
}

std::expected<scheduler::GenerationRequest, ApiError> PromptBuilder::finish(const CommonParams& params,
                                                                            std::vector<engine::Token> prompt,
                                                                            scheduler::PromptInputs inputs,
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
  out.time_limit_after_newline = params.time_limit_after_newline;
  out.indent_floor = params.indent_floor;
  out.logprobs = params.logprobs;
  out.speculative = params.speculative;
  out.cache.enabled = params.cache.enabled;
  out.cache.session_key = params.cache.session_key;
  out.cache.shift_reuse_min = params.cache.shift_reuse_min;
  AppliedAdapters adapters;
  if (options_.adapters != nullptr) {
    auto resolved = options_.adapters->resolve(params.cache.lora);
    if (!resolved) return std::unexpected(std::move(resolved.error()));
    adapters = std::move(*resolved);
  } else if (params.cache.lora && !params.cache.lora->empty()) {
    return std::unexpected(invalid_param("lora[0].id", "'lora': this server loads no LoRA adapters (--lora)"));
  }
  out.adapters = std::move(adapters.adapters);
  out.cache.adapter_label = std::move(adapters.label);
  out.cache.prompt_inputs = std::move(inputs);
  out.cache.namespace_digest = namespace_digest(NamespaceFields{.model_id = model_key_,
                                                                .lora_id = adapters.namespace_field,
                                                                .runtime_signature = runtime_signature_,
                                                                .tenant = std::string(tenant),
                                                                .cache_salt = params.cache.salt});
  out.cache.scope = cache::scope_id(tenant);
  // Session isolation: only the configured shared prefix, when the prompt starts with it, may come
  // from other sessions.
  if (options_.isolation == CacheIsolation::session) out.cache.shared_prefix = shared_prefix_.length_in(out.prompt);
  return out;
}

}  // namespace prefixd::api
