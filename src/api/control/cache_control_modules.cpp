// POST /v1/cache/prepare_modules {modules: [...], chat_template_kwargs?, thinking?, cache_salt?,
// key?, ttl_seconds?}: renders the chain, finds where each module ends in its tokens, prefills the
// whole chain once with a checkpoint boundary at each module's end, and registers each module.
#include <algorithm>
#include <format>

#include "api/control/cache_control_internal.h"
#include "api/control/cache_modules.h"
#include "api/prompt/cache_namespace.h"

namespace prefixd::api {
ControlReply CacheControl::prepare_modules(Context& c) {
  using control::failure;
  auto modules = parse_modules(c.body);
  if (!modules) return failure(c.operation, modules.error(), {});
  auto bind = control::key_name(c.body, "key", false);
  if (!bind) return failure(c.operation, bind.error(), {});
  auto ttl = control::ttl_of(c.body);
  if (!ttl) return failure(c.operation, ttl.error(), {});

  // The whole chain as one conversation, validated as a chat request would be.
  const ChainPart whole = chain_through(*modules, modules->size() - 1);
  if (whole.messages.empty()) {
    return failure(c.operation, invalid_param("modules", "a module chain needs a system_prompt or messages to render"), {});
  }
  KeyConversation conversation{.messages = whole.messages, .tools = whole.tools, .add_generation_prompt = false};
  nlohmann::ordered_json check{{"messages", whole.messages}};
  for (const char* field : {"chat_template_kwargs", "thinking", "cache_salt"}) {
    if (c.body.contains(field)) check[field] = c.body[field];
  }
  if (!whole.tools.is_null()) check["tools"] = whole.tools;
  auto parsed = parse_chat_request(check.dump(), parse_);
  if (!parsed) return failure(c.operation, parsed.error(), {});
  conversation.chat_template_kwargs = parsed->chat.extra_context;
  conversation.cache_salt = parsed->params.cache.salt;
  auto built = build(conversation, bind->value_or(""), c.tenant);
  if (!built) return failure(c.operation, built.error(), {});
  const std::vector<engine::Token> chain = built->prompt;

  // Where each module ends: the part of its own rendering that the whole chain's tokens start
  // with. A template that renders an earlier module differently once later ones follow (a system
  // turn closed before the tools are appended to it) makes that module end earlier: it is then
  // `sound: false`, and reusable only up to that end.
  const std::string root = field_digest("prefixd.module-chain.context",
                                        {options_.model_key, prompts_.chat_template().source(),
                                         conversation.chat_template_kwargs.is_null() ? "" : conversation.chat_template_kwargs.dump(),
                                         conversation.cache_salt ? "salt:" + *conversation.cache_salt : "no salt"});
  const std::vector<std::string> fingerprints = chain_fingerprints(root, *modules);
  std::vector<std::int32_t> ends;
  std::vector<bool> sound;
  for (std::size_t k = 0; k < modules->size(); ++k) {
    const ChainPart part = chain_through(*modules, k);
    ChatRequest partial = *parsed;
    partial.chat.messages = part.messages;
    partial.chat.tools = part.tools;
    partial.chat.add_generation_prompt = false;
    auto tokens = prompts_.chat_tokens(partial, scheduler_.max_prompt_tokens());
    std::int32_t end = 0;
    bool whole_module = false;
    if (tokens) {
      end = common_token_prefix(*tokens, chain);
      whole_module = end == static_cast<std::int32_t>(tokens->size());
    }
    if (!ends.empty()) end = std::max(end, ends.back());
    ends.push_back(k + 1 == modules->size() ? static_cast<std::int32_t>(chain.size()) : end);
    sound.push_back(k + 1 == modules->size() || whole_module);
  }

  // One prefill of the whole chain, checkpointed at every module end; its tokens are a prefix
  // every session of the tenant may share.
  scheduler::GenerationRequest request = std::move(*built);
  for (const std::int32_t end : ends) {
    if (end > 0 && end < static_cast<std::int32_t>(chain.size())) request.cache.boundaries.push_back(end);
  }
  std::ranges::sort(request.cache.boundaries);
  request.cache.boundaries.erase(std::ranges::unique(request.cache.boundaries).begin(), request.cache.boundaries.end());
  if (prompts_.isolation() == CacheIsolation::session) request.cache.shared_prefix = static_cast<std::int32_t>(chain.size());
  auto done = prefill(std::move(request));
  if (!done) return failure(c.operation, done.error(), {});

  nlohmann::ordered_json listed = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < modules->size(); ++k) {
    const std::int32_t start = k == 0 ? 0 : ends[k - 1];
    PreparedModule module{.fingerprint = fingerprints[k],
                          .module_id = (*modules)[k].module_id,
                          .prefix_chain = std::vector<std::string>(fingerprints.begin(), fingerprints.begin() + static_cast<std::ptrdiff_t>(k)),
                          .start = start,
                          .tokens = std::vector<engine::Token>(chain.begin(), chain.begin() + ends[k]),
                          .cache = done->request.cache};
    const ChainPart part = chain_through(*modules, k);
    module.conversation = conversation;
    module.conversation.messages = part.messages;
    module.conversation.tools = part.tools;
    keys_.add_module(c.tenant, module);
    listed.push_back({{"module_id", module.module_id},
                      {"fingerprint", module.fingerprint},
                      {"start_offset", start},
                      {"end_offset", ends[k]},
                      {"tokens", ends[k] - start},
                      {"sound", static_cast<bool>(sound[k])}});
  }

  if (*bind) {
    KeyRecord record{.name = **bind, .conversation = conversation, .tokens = chain, .cache = done->request.cache,
                     .ttl = *ttl, .created_unix_ms = control::unix_ms_now(), .last_used = KeyClock::now()};
    record.cache.session_key = record.name;
    if (auto old = keys_.find(c.tenant, record.name)) {
      record.meta = old->meta;
      if (keys_.replace_if(c.tenant, record, old->version) != KeyError::none) {
        return failure(c.operation, ApiError{.status = 409, .message = "the key changed meanwhile; retry", .code = "key_changed"}, {});
      }
    } else if (keys_.add(c.tenant, record) != KeyError::none) {
      return failure(c.operation, ApiError{.status = 409, .message = std::format("key '{}' cannot be created", record.name),
                                           .code = "too_many_keys"}, {});
    }
  }

  nlohmann::ordered_json out = control::success(c.operation);
  out["modules"] = std::move(listed);
  out["tokens"] = chain.size();
  out["cached_tokens"] = done->report.cached_tokens;
  out["fed_tokens"] = done->report.fed_tokens;
  if (*bind) out["key"] = **bind;
  return ControlReply{200, std::move(out)};
}

}  // namespace prefixd::api
