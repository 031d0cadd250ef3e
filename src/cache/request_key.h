// prefixd cache — what a request's key means to every tier: the session its per-session state is
// kept under, what it may reuse of other sessions' entries, and the length two token runs share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "cache/cache_types.h"
#include "cache/radix_tree.h"

namespace prefixd::cache {

// The session a request's per-session state is kept under: its scope and its session, so that two
// tenants' sessions of the same name never meet (checkpoint chains, the latest sequence, the
// device tree's per-session counts). "" for a request without a session.
inline std::string session_id(const RequestKey& key) {
  if (key.session.empty()) return {};
  return digest_string(key.scope) + key.session;
}

// What a request may reuse of other sessions' entries (RequestKey::shared_prefix).
inline Reach reach_of(const RequestKey& key) {
  if (key.shared_prefix == kNoFork) return {};
  return Reach{.others = key.shared_prefix, .own = !key.session.empty()};
}

inline std::int32_t common_prefix(std::span<const engine::Token> a, std::span<const engine::Token> b) {
  return static_cast<std::int32_t>(std::ranges::mismatch(a, b).in1 - a.begin());
}

}  // namespace prefixd::cache
