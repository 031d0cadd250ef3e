#include "api/control/cache_keys.h"

#include <algorithm>
#include <stdexcept>

namespace prefixd::api {
namespace {

bool starts_with(std::span<const engine::Token> prompt, std::span<const engine::Token> prefix) {
  return prompt.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), prompt.begin());
}

}  // namespace

std::int32_t common_token_prefix(std::span<const engine::Token> a, std::span<const engine::Token> b) {
  const auto n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<std::int32_t>(i);
}

nlohmann::ordered_json KeyConversation::to_json() const {
  nlohmann::ordered_json out{{"messages", messages}, {"add_generation_prompt", add_generation_prompt}};
  if (!tools.is_null()) out["tools"] = tools;
  if (!chat_template_kwargs.is_null()) out["chat_template_kwargs"] = chat_template_kwargs;
  if (cache_salt) out["cache_salt"] = *cache_salt;
  return out;
}

KeyConversation KeyConversation::from_json(const nlohmann::ordered_json& value) {
  if (!value.is_object()) throw std::invalid_argument("the conversation is not an object");
  KeyConversation out;
  const auto messages = value.find("messages");
  if (messages == value.end() || !messages->is_array()) throw std::invalid_argument("the conversation has no messages");
  out.messages = *messages;
  if (const auto t = value.find("tools"); t != value.end() && !t->is_null()) {
    if (!t->is_array()) throw std::invalid_argument("the conversation's tools are not an array");
    out.tools = *t;
  }
  if (const auto k = value.find("chat_template_kwargs"); k != value.end() && !k->is_null()) {
    if (!k->is_object()) throw std::invalid_argument("the conversation's chat_template_kwargs are not an object");
    out.chat_template_kwargs = *k;
  }
  if (const auto s = value.find("cache_salt"); s != value.end() && !s->is_null()) {
    if (!s->is_string()) throw std::invalid_argument("the conversation's cache_salt is not a string");
    out.cache_salt = s->get<std::string>();
  }
  if (const auto g = value.find("add_generation_prompt"); g != value.end()) {
    if (!g->is_boolean()) throw std::invalid_argument("the conversation's add_generation_prompt is not a boolean");
    out.add_generation_prompt = g->get<bool>();
  }
  return out;
}

std::optional<KeyRecord> KeyRegistry::find(const std::string& tenant, const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return std::nullopt;
  const auto k = t->second.keys.find(name);
  if (k == t->second.keys.end()) return std::nullopt;
  return k->second;
}

std::optional<KeyRecord> KeyRegistry::touch(const std::string& tenant, const std::string& name, KeyClock::time_point now) {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return std::nullopt;
  const auto k = t->second.keys.find(name);
  if (k == t->second.keys.end()) return std::nullopt;
  k->second.last_used = now;
  return k->second;
}

KeyError KeyRegistry::add(const std::string& tenant, KeyRecord record) {
  std::lock_guard lock(mutex_);
  Tenant& t = tenants_[tenant];
  if (t.keys.contains(record.name)) return KeyError::exists;
  if (t.keys.size() >= kMaxKeysPerTenant) return KeyError::too_many;
  record.version = next_version_++;
  std::string name = record.name;
  t.keys.emplace(std::move(name), std::move(record));
  return KeyError::none;
}

KeyError KeyRegistry::replace_if(const std::string& tenant, KeyRecord record, std::uint64_t read_version) {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return KeyError::missing;
  const auto k = t->second.keys.find(record.name);
  if (k == t->second.keys.end()) return KeyError::missing;
  if (k->second.version != read_version) return KeyError::changed;
  record.version = next_version_++;
  k->second = std::move(record);
  return KeyError::none;
}

std::optional<KeyRecord> KeyRegistry::remove(const std::string& tenant, const std::string& name) {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return std::nullopt;
  const auto k = t->second.keys.find(name);
  if (k == t->second.keys.end()) return std::nullopt;
  KeyRecord out = std::move(k->second);
  t->second.keys.erase(k);
  return out;
}

std::vector<KeyRecord> KeyRegistry::remove_all(const std::string& tenant) {
  std::lock_guard lock(mutex_);
  std::vector<KeyRecord> out;
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return out;
  for (auto& [name, record] : t->second.keys) out.push_back(std::move(record));
  t->second.keys.clear();
  return out;
}

std::vector<std::pair<std::string, KeyRecord>> KeyRegistry::take_expired(KeyClock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string, KeyRecord>> out;
  for (auto& [tenant, t] : tenants_) {
    for (auto k = t.keys.begin(); k != t.keys.end();) {
      if (k->second.expired(now)) {
        out.emplace_back(tenant, std::move(k->second));
        k = t.keys.erase(k);
      } else {
        ++k;
      }
    }
  }
  return out;
}

std::int32_t KeyRegistry::shared_with_others(const std::string& tenant, const std::string& name,
                                             const std::string& namespace_digest,
                                             std::span<const engine::Token> tokens) const {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return 0;
  std::int32_t keep = 0;
  for (const auto& [other, record] : t->second.keys) {
    if (other == name || record.cache.namespace_digest != namespace_digest) continue;
    keep = std::max(keep, common_token_prefix(tokens, record.tokens));
  }
  for (const PreparedModule& m : t->second.modules) {
    if (m.cache.namespace_digest != namespace_digest) continue;
    keep = std::max(keep, common_token_prefix(tokens, m.tokens));
  }
  return keep;
}

std::optional<std::string> KeyRegistry::session_of(const std::string& tenant, const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return std::nullopt;
  const auto k = t->second.keys.find(name);
  if (k == t->second.keys.end()) return std::nullopt;
  return k->second.cache.session_key;
}

void KeyRegistry::add_module(const std::string& tenant, PreparedModule module) {
  std::lock_guard lock(mutex_);
  auto& modules = tenants_[tenant].modules;
  std::erase_if(modules, [&](const PreparedModule& m) { return m.fingerprint == module.fingerprint; });
  if (modules.size() >= kMaxModulesPerTenant) modules.erase(modules.begin());
  modules.push_back(std::move(module));
}

std::optional<PreparedModule> KeyRegistry::find_module(const std::string& tenant, const std::string& fingerprint) const {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return std::nullopt;
  for (const PreparedModule& m : t->second.modules) {
    if (m.fingerprint == fingerprint) return m;
  }
  return std::nullopt;
}

std::int32_t KeyRegistry::shareable_prefix(const std::string& tenant, const std::string& namespace_digest,
                                           std::span<const engine::Token> prompt) const {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return 0;
  std::int32_t longest = 0;
  for (const PreparedModule& m : t->second.modules) {
    if (m.cache.namespace_digest == namespace_digest && starts_with(prompt, m.tokens)) {
      longest = std::max(longest, static_cast<std::int32_t>(m.tokens.size()));
    }
  }
  return longest;
}

nlohmann::ordered_json KeyRegistry::meta_by_key(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return out;
  for (const auto& [name, record] : t->second.keys) out[name] = record.meta;
  return out;
}

nlohmann::ordered_json KeyRegistry::key_list(const std::string& tenant) const {
  const auto now = KeyClock::now();
  std::lock_guard lock(mutex_);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return out;
  for (const auto& [name, record] : t->second.keys) {
    const auto idle = std::chrono::duration_cast<std::chrono::seconds>(now - record.last_used);
    nlohmann::ordered_json ttl = nullptr;
    nlohmann::ordered_json expires_in = nullptr;
    if (record.ttl) {
      ttl = record.ttl->count();
      expires_in = std::max<std::int64_t>(0, (*record.ttl - idle).count());
    }
    out.push_back({{"name", name},
                   {"tokens", record.tokens.size()},
                   {"ttl_seconds", ttl},
                   {"idle_seconds", idle.count()},
                   {"expires_in_seconds", expires_in},
                   {"created_unix_ms", record.created_unix_ms},
                   {"forked_from", record.forked_from.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(record.forked_from)},
                   {"meta", record.meta}});
  }
  return out;
}

std::size_t KeyRegistry::key_count(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  const auto t = tenants_.find(tenant);
  return t == tenants_.end() ? 0 : t->second.keys.size();
}

std::pair<std::size_t, std::size_t> KeyRegistry::totals() const {
  std::lock_guard lock(mutex_);
  std::pair<std::size_t, std::size_t> out;
  for (const auto& [tenant, t] : tenants_) {
    out.first += t.keys.size();
    out.second += t.modules.size();
  }
  return out;
}

}  // namespace prefixd::api
