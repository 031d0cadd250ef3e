// prefixd api — GET /v1/cache/tree: the cache's radix trees (cache_tree.h) as JSON, each node
// with a text preview of its own span, for the web UI's cache page and for people with curl.
#pragma once

#include <nlohmann/json.hpp>

#include "api/auth/access.h"
#include "cache/cache_tree.h"
#include "engine/engine.h"

namespace prefixd::api {

// Characters of text shown per node at most (the preview is cut at a character boundary).
inline constexpr std::size_t kTreePreviewBytes = 200;

nlohmann::ordered_json cache_tree_json(const cache::CacheTree& tree, const engine::Vocabulary& vocab,
                                       const TenantNames& tenants);

}  // namespace prefixd::api
