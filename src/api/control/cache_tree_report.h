// prefixd api — GET /v1/cache/tree: the cache's radix trees (cache_tree.h) as JSON, each node
// with a text preview of its own span, for the web UI's cache page and for people with curl.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"

#include "api/auth/access.h"
#include "cache/cache_tree.h"
#include "engine/engine.h"

namespace prefixd::api {

// Characters of text shown per node at most (the preview is cut at a character boundary).
inline constexpr std::size_t kTreePreviewBytes = 200;

// The most nodes one answer holds (its JSON grows with them).
inline constexpr std::int64_t kMaxTreeNodes = 100'000;

// `?limit=`: nullopt when absent; a 400 naming `limit` unless a whole number in [1, kMaxTreeNodes].
std::expected<std::optional<std::int64_t>, ApiError> parse_tree_limit(std::string_view value);

nlohmann::ordered_json cache_tree_json(const cache::CacheTree& tree, const engine::Vocabulary& vocab,
                                       const TenantNames& tenants);

}  // namespace prefixd::api
