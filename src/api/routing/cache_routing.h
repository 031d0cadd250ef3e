// prefixd api — what a prefix-aware router asks a server: GET /v1/cache/summary (the block chain
// hashes the server's cache holds, with its load) and POST /v1/cache/chain (the chain of one
// request's prompt as this server would address it for the caller). Formats: docs/operator-guide.md
// ("Routing endpoints"); the router that uses them is src/router/.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "api/output.h"
#include "cache/cache_types.h"
#include "cache/kv_events.h"

namespace prefixd::api {

inline constexpr int kCacheSummaryFormat = 1;

// Where a server publishes its KV events (--kv-events-*), for a router that subscribes instead of
// reading block lists; an empty endpoint: it publishes none.
struct KvEventsAdvert {
  std::string endpoint;
  std::string replay_endpoint;
  std::string topic;
  std::string block_hashes;  // "int" or "bytes"
};

// Who answers and how busy it is: the parts of a summary that do not come from the cache.
struct SummaryHeader {
  std::string server_id;   // random per process: a restart is a new server (its memory tiers are gone)
  std::int32_t block_size = 16;
  std::string hash;        // "sha256" or "blake3"
  std::int32_t running = 0;
  std::int32_t queued = 0;
  std::int32_t slots = 0;
  KvEventsAdvert kv_events;
};

// The header and load alone (GET /v1/cache/summary?blocks=false): nothing asked of the cache.
nlohmann::ordered_json cache_load_json(const SummaryHeader& header);

// A fresh random server id (128 bits, hex).
std::string random_server_id();

// The body of GET /v1/cache/summary.
nlohmann::ordered_json cache_summary_json(const SummaryHeader& header, const cache::CacheSummary& summary);

// `since` of GET /v1/cache/summary?since=V: nullopt when absent; 400 when not a decimal version.
std::expected<std::optional<std::uint64_t>, ApiError> parse_since(std::string_view value);

// POST /v1/cache/chain's body: {"endpoint": "chat" | "completions", "request": {...}}. The request
// comes back serialized, to go through the endpoint's own parser. A body past the JSON bounds
// (json_bounds.h, `max_nodes` values) is refused before it is parsed.
struct ChainQuery {
  Endpoint endpoint = Endpoint::chat;
  std::string request_body;
};
std::expected<ChainQuery, ApiError> parse_chain_query(std::string_view body, std::size_t max_nodes);

nlohmann::ordered_json cache_chain_json(const cache::Digest& model_key, std::int32_t block_size,
                                        std::size_t prompt_tokens, std::span<const cache::Digest> blocks);

}  // namespace prefixd::api
