#include "api/routing/cache_routing.h"

#include <algorithm>
#include <charconv>
#include <random>
#include <utility>

#include "api/body/json_bounds.h"

namespace prefixd::api {

std::string random_server_id() {
  std::random_device random;
  cache::Digest bytes{};
  for (auto& byte : bytes) byte = static_cast<std::uint8_t>(random());
  return cache::to_hex(bytes).substr(0, 32);
}

namespace {

void add_kv_events(nlohmann::ordered_json& out, const KvEventsAdvert& advert) {
  if (advert.endpoint.empty()) return;
  out["kv_events"] = {{"endpoint", advert.endpoint},
                      {"replay_endpoint", advert.replay_endpoint.empty() ? nlohmann::ordered_json()
                                                                         : nlohmann::ordered_json(advert.replay_endpoint)},
                      {"topic", advert.topic},
                      {"block_hashes", advert.block_hashes}};
}

}  // namespace

nlohmann::ordered_json cache_load_json(const SummaryHeader& header) {
  nlohmann::ordered_json out;
  out["object"] = "prefixd.cache_summary";
  out["format"] = kCacheSummaryFormat;
  out["server_id"] = header.server_id;
  out["block_size"] = header.block_size;
  out["hash"] = header.hash;
  out["load"] = {{"running", header.running}, {"queued", header.queued}, {"slots", header.slots}};
  add_kv_events(out, header.kv_events);
  return out;
}

nlohmann::ordered_json cache_summary_json(const SummaryHeader& header, const cache::CacheSummary& summary) {
  nlohmann::ordered_json out;
  out["object"] = "prefixd.cache_summary";
  out["format"] = kCacheSummaryFormat;
  out["server_id"] = header.server_id;
  out["model_key"] = cache::to_hex(summary.model_key);
  out["block_size"] = header.block_size;
  out["hash"] = header.hash;
  out["version"] = summary.version;
  out["load"] = {{"running", header.running}, {"queued", header.queued}, {"slots", header.slots}};
  add_kv_events(out, header.kv_events);
  if (summary.unchanged) {
    out["unchanged"] = true;
    return out;
  }
  // Sorted here, on the HTTP worker, not on the engine thread that gathered them.
  const auto sorted_hex = [](std::vector<cache::Digest> digests) {
    std::ranges::sort(digests);
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const cache::Digest& block : digests) list.push_back(cache::to_hex(block));
    return list;
  };
  out["blocks"] = sorted_hex(summary.blocks);
  if (!summary.by_medium.empty()) {
    nlohmann::ordered_json tiers = nlohmann::ordered_json::object();
    for (std::size_t m = 0; m < summary.by_medium.size(); ++m) {
      tiers[cache::medium_name(static_cast<cache::Medium>(m))] = sorted_hex(summary.by_medium[m]);
    }
    out["tiers"] = std::move(tiers);
  }
  return out;
}

std::expected<std::optional<std::uint64_t>, ApiError> parse_since(std::string_view value) {
  if (value.empty()) return std::nullopt;
  std::uint64_t version = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), version);
  if (error != std::errc{} || end != value.data() + value.size()) {
    return std::unexpected(invalid_param("since", "since must be a summary version (a non-negative integer)"));
  }
  return version;
}

std::expected<ChainQuery, ApiError> parse_chain_query(std::string_view body, std::size_t max_nodes) {
  if (auto refused = refuse_unbounded_json(body, max_nodes)) return std::unexpected(std::move(*refused));
  // Ordered: `request` is dumped again for the endpoint's parser, and the template renders its
  // tools and arguments with their keys in the order the client sent them.
  const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return std::unexpected(invalid_request("the body must be a JSON object {\"endpoint\", \"request\"}"));
  }
  ChainQuery query;
  const auto endpoint = parsed.find("endpoint");
  if (endpoint == parsed.end() || !endpoint->is_string() ||
      (*endpoint != "chat" && *endpoint != "completions")) {
    return std::unexpected(invalid_param("endpoint", "endpoint must be \"chat\" or \"completions\""));
  }
  query.endpoint = *endpoint == "chat" ? Endpoint::chat : Endpoint::completion;
  const auto request = parsed.find("request");
  if (request == parsed.end() || !request->is_object()) {
    return std::unexpected(invalid_param("request", "request must be the request body the endpoint would get (an object)"));
  }
  query.request_body = request->dump();
  return query;
}

nlohmann::ordered_json cache_chain_json(const cache::Digest& model_key, std::int32_t block_size,
                                        std::size_t prompt_tokens, std::span<const cache::Digest> blocks) {
  nlohmann::ordered_json out;
  out["object"] = "prefixd.cache_chain";
  out["format"] = kCacheSummaryFormat;
  out["model_key"] = cache::to_hex(model_key);
  out["block_size"] = block_size;
  out["prompt_tokens"] = prompt_tokens;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const cache::Digest& block : blocks) list.push_back(cache::to_hex(block));
  out["blocks"] = std::move(list);
  return out;
}

}  // namespace prefixd::api
