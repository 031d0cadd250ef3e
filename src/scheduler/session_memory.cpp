#include "scheduler/session_memory.h"

#include <algorithm>

#include <xxhash.h>

#include "cache/disk_format.h"

namespace prefixd::scheduler {
namespace {

std::uint64_t hash_tokens(std::span<const engine::Token> tokens) { return XXH3_64bits(tokens.data(), tokens.size_bytes()); }

bool has_input(const PromptInputs& inputs, const std::string& name) {
  return std::ranges::find(inputs, name, &PromptInputs::value_type::first) != inputs.end();
}

// Two tenants' sessions of the same name never meet.
std::string kept_id(const cache::ScopeId& scope, const std::string& session) { return cache::digest_string(scope) + session; }

}  // namespace

void SessionMemory::observe_prompt(const std::string& session, std::span<const engine::Token> prompt) {
  const auto it = replies_.find(session);
  if (it == replies_.end()) return;
  Reply& r = it->second;
  // A prompt that does not extend the previous one says nothing about how replies come back.
  if (prompt.size() < r.prompt_length || hash_tokens(prompt.first(r.prompt_length)) != r.prompt_hash) return;
  const auto rest = prompt.subspan(r.prompt_length);
  r.echoes = rest.size() >= r.reply.size() && std::ranges::equal(rest.first(r.reply.size()), r.reply);
}

bool SessionMemory::echoes(const std::string& session) const {
  const auto it = replies_.find(session);
  return it != replies_.end() && it->second.echoes;
}

void SessionMemory::remember_reply(const std::string& session, std::span<const engine::Token> tokens,
                                   std::size_t prompt_length) {
  if (!replies_.contains(session) && replies_.size() >= kMaxSessions) replies_.erase(replies_.begin());
  Reply& r = replies_[session];
  r.prompt_length = prompt_length;
  r.prompt_hash = hash_tokens(tokens.first(prompt_length));
  r.reply.assign(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_length), tokens.end());
}

std::vector<std::string> SessionMemory::changed_inputs(const std::string& session, const PromptInputs& inputs) {
  const auto it = inputs_.find(session);
  if (it == inputs_.end()) {
    if (inputs_.size() >= kMaxSessions) inputs_.erase(inputs_.begin());
    inputs_.emplace(session, inputs);
    return {};
  }
  std::vector<std::string> changed;
  for (const auto& [name, digest] : inputs) {
    const auto before = std::ranges::find(it->second, name, &PromptInputs::value_type::first);
    if (before == it->second.end() || before->second != digest) changed.push_back(name);
  }
  for (const auto& [name, digest] : it->second) {
    if (!has_input(inputs, name)) changed.push_back(name);
  }
  it->second = inputs;
  return changed;
}

void SessionMemory::remember_kept(const cache::RequestKey& key, std::span<const engine::Token> tokens) {
  if (key.session.empty()) return;
  cache::RequestKey kept = key;
  kept.boundaries.clear();  // where checkpoints go: nothing saving needs
  kept_[kept_id(key.scope, key.session)] = Kept{{std::move(kept), {tokens.begin(), tokens.end()}}, ++kept_order_};
  if (kept_.size() > kMaxKept) {
    kept_.erase(std::ranges::min_element(kept_, {}, [](const auto& item) { return item.second.order; }));
  }
}

std::optional<SessionPrompt> SessionMemory::latest_kept(const cache::ScopeId& scope, const std::string& session) const {
  if (session.empty()) return std::nullopt;
  const auto it = kept_.find(kept_id(scope, session));
  if (it == kept_.end()) return std::nullopt;
  return it->second.prompt;
}

void SessionMemory::forget_kept(const std::optional<cache::ScopeId>& scope) {
  if (!scope) {
    kept_.clear();
    return;
  }
  std::erase_if(kept_, [&](const auto& item) { return item.second.prompt.key.scope == *scope; });
}

}  // namespace prefixd::scheduler
