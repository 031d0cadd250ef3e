// prefixd api — the LoRA adapters a server loaded and the scales each request applies them at.
//
// The server's scales start at --lora's 1, --lora-scaled's own, or 0 under --lora-init-without-apply,
// and POST /lora-adapters replaces them. A request's `lora` list, when not empty, replaces them for
// that request alone. Either way, an adapter left out of a list applies at 0 (llama-server's rule):
// a list says the whole set. What applies to a request is fixed when its prompt is built: a scale
// change affects the requests that come after it, and a request's cache namespace holds the
// adapters' fingerprints and scales, so K/V computed under one set is never reused under another
// (and, under none, is shared with a server that loads no adapters).
#pragma once

#include <cstdint>
#include <expected>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "engine/types.h"

namespace prefixd::api {

// A set of adapters and scales as a client sends it ([{id, scale}, ...]): ids unchecked yet.
using AdapterChoice = std::vector<engine::AdapterScale>;

// What applies to one request.
struct AppliedAdapters {
  std::vector<engine::AdapterScale> adapters;  // scale not 0, sorted by id, each id once
  // The cache namespace's lora field: each adapter's fingerprint and exact scale; empty under none.
  std::string namespace_field;
  // For people and KV event subscribers: each adapter's name, with "@scale" unless 1, joined by
  // "+"; empty under none.
  std::string label;
};

class AdapterTable {
 public:
  struct Entry {
    engine::AdapterInfo info;
    float scale = 1.0f;  // the server's current scale
  };

  // `adapters`: ModelInfo::adapters; `scales`: the starting scale of each.
  AdapterTable(const std::vector<engine::AdapterInfo>& adapters, const std::vector<float>& scales);

  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }
  std::vector<Entry> list() const;  // thread-safe, by id

  // POST /lora-adapters: every adapter's scale from `choice` (0 for those it leaves out). An
  // unknown id is a 400 naming `param`[i].id, and nothing changes.
  std::optional<ApiError> set_scales(const AdapterChoice& choice, const std::string& param = "body");

  // What applies to a request that sent `choice` (nullopt or empty: the server's scales).
  std::expected<AppliedAdapters, ApiError> resolve(const std::optional<AdapterChoice>& choice,
                                                   const std::string& param = "lora") const;

 private:
  std::optional<ApiError> check(const AdapterChoice& choice, const std::string& param) const;
  AppliedAdapters applied(const std::vector<float>& scales) const;

  std::vector<engine::AdapterInfo> infos_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;  // guarded by mutex_ (the scales; the rest never changes)
};

// Reads [{"id": integer, "scale": number}, ...] (a request's `lora`, the body of POST
// /lora-adapters): a 400 naming `param`, or `param`[i].id / .scale, for anything else. Both fields
// are required (llama-server reads a missing scale as 0, which silently applies nothing).
std::expected<AdapterChoice, ApiError> parse_adapter_choice(const nlohmann::ordered_json& value, const std::string& param);

// The scales a list sets, for `count` adapters: the last entry of each id wins, the rest are 0.
std::vector<float> scales_of(const AdapterChoice& choice, std::size_t count);

}  // namespace prefixd::api
