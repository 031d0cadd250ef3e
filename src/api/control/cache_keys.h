// prefixd api — the control plane's named keys and prepared module chains, per tenant.
//
// A key (a prompt_cache_key in the caller's tenant) names a conversation: the messages, tools and
// template settings it was built from, the tokens they render to and the cache fields of those
// tokens. The K/V itself stays in the prompt cache, which is content-addressed: a key points at a
// token path, and keys whose paths share a prefix share its K/V (a fork copies nothing).
//
// A prepared module is one boundary of a module chain (system, tools, memory...): its chained
// fingerprint, where it begins and ends in the chain's tokens, and those tokens. Under session
// isolation a prepared chain is a prefix every session of the tenant may share.
//
// Thread-safe: one mutex; readers get copies. Invariants: at most kMaxKeysPerTenant keys and
// kMaxModulesPerTenant modules per tenant; a record's `version` grows with every replacement, so
// a writer that read an older version loses (replace_if) instead of overwriting a newer state.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/types.h"
#include "scheduler/request.h"

namespace prefixd::api {

inline constexpr std::size_t kMaxKeysPerTenant = 4096;
inline constexpr std::size_t kMaxModulesPerTenant = 1024;
inline constexpr std::size_t kMaxKeyNameBytes = 256;
inline constexpr std::size_t kMaxMetaBytes = 16 * 1024;

using KeyClock = std::chrono::steady_clock;

// What a key was built from, so that update can append to it and a saved key can be rebuilt.
// Every object keeps its keys in the order the client sent them, here, in to_json and back from
// from_json: the template renders them in that order, so a key rebuilt in another order would
// render other tokens than the chat requests that send the same tools and messages.
struct KeyConversation {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;                 // array, or null for none
  nlohmann::ordered_json chat_template_kwargs;  // object (the thinking switch folded in), or null
  std::optional<std::string> cache_salt;
  bool add_generation_prompt = false;           // the rendering ends with the assistant's turn opener

  nlohmann::ordered_json to_json() const;
  // Throws std::invalid_argument on a malformed value.
  static KeyConversation from_json(const nlohmann::ordered_json& value);
};

struct KeyRecord {
  std::string name;
  KeyConversation conversation;
  std::vector<engine::Token> tokens;  // what the conversation renders to; empty: nothing yet
  scheduler::CacheOptions cache;      // namespace, session, scope, wall and boundaries of `tokens`
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  std::optional<std::chrono::seconds> ttl;  // unused this long: cleared; nullopt: the cache's own TTL
  std::int64_t created_unix_ms = 0;
  KeyClock::time_point last_used{};
  std::string forked_from;  // empty unless created by fork
  std::uint64_t version = 0;

  bool expired(KeyClock::time_point now) const { return ttl && now - last_used >= *ttl; }
};

struct PreparedModule {
  std::string fingerprint;         // hex: the chain's digest up to and including this module
  std::string module_id;
  std::vector<std::string> prefix_chain;  // fingerprints of the modules before it, in order
  std::int32_t start = 0;          // where it begins in the chain's tokens
  std::vector<engine::Token> tokens;  // the chain's tokens up to its end
  scheduler::CacheOptions cache;   // of the whole chain (namespace, scope)
  KeyConversation conversation;    // the chain up to this module
};

enum class KeyError { none, exists, missing, too_many, changed };

// How many leading tokens `a` and `b` have in common.
std::int32_t common_token_prefix(std::span<const engine::Token> a, std::span<const engine::Token> b);

class KeyRegistry {
 public:
  std::optional<KeyRecord> find(const std::string& tenant, const std::string& name) const;
  // Stamps last_used; nullopt when absent.
  std::optional<KeyRecord> touch(const std::string& tenant, const std::string& name, KeyClock::time_point now);
  // Adds a new key (exists / too_many).
  KeyError add(const std::string& tenant, KeyRecord record);
  // Replaces a key if its version is still `read_version` (missing / changed); bumps the version.
  KeyError replace_if(const std::string& tenant, KeyRecord record, std::uint64_t read_version);
  // Removes a key; returns what it held.
  std::optional<KeyRecord> remove(const std::string& tenant, const std::string& name);
  std::vector<KeyRecord> remove_all(const std::string& tenant);
  // Removes and returns the keys whose TTL has passed (every tenant's).
  std::vector<std::pair<std::string, KeyRecord>> take_expired(KeyClock::time_point now);

  // The longest prefix of `tokens` that another key of the tenant, in the namespace, or a prepared
  // module holds too: what clearing `name` must keep.
  std::int32_t shared_with_others(const std::string& tenant, const std::string& name,
                                  const std::string& namespace_digest, std::span<const engine::Token> tokens) const;

  // The session key a generation that names `name` as its prompt_cache_key runs under: a forked
  // key's is that of the key it came from, so the family shares its entries under session
  // isolation. nullopt when `name` is not a key.
  std::optional<std::string> session_of(const std::string& tenant, const std::string& name) const;

  void add_module(const std::string& tenant, PreparedModule module);
  std::optional<PreparedModule> find_module(const std::string& tenant, const std::string& fingerprint) const;
  // The end of the longest prepared module of the tenant, in the namespace, whose tokens `prompt`
  // starts with (0: none): the prefix its sessions share under session isolation.
  std::int32_t shareable_prefix(const std::string& tenant, const std::string& namespace_digest,
                                std::span<const engine::Token> prompt) const;

  // Caller metadata of every key of `tenant`, by key (stats' meta_by_key), and the key count.
  nlohmann::ordered_json meta_by_key(const std::string& tenant) const;
  std::size_t key_count(const std::string& tenant) const;
  // Every key of `tenant` as people look at it (stats' key_list): name, tokens, TTL, idle time,
  // time left before its TTL clears it, creation, the key it was forked from, metadata.
  nlohmann::ordered_json key_list(const std::string& tenant) const;
  // Keys and prepared modules of every tenant.
  std::pair<std::size_t, std::size_t> totals() const;

 private:
  struct Tenant {
    std::map<std::string, KeyRecord> keys;
    std::vector<PreparedModule> modules;  // oldest first
  };
  mutable std::mutex mutex_;
  std::map<std::string, Tenant> tenants_;
  std::uint64_t next_version_ = 1;
};

}  // namespace prefixd::api
