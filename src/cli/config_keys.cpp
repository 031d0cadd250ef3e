#include "cli/config_keys.h"

#include <algorithm>
#include <array>

namespace prefixd::cli {
namespace {

using enum ConfigSection;

constexpr std::array kKeys{
    // [server]: the HTTP listener, its limits, access and logging.
    ConfigKey{"host", server},
    ConfigKey{"port", server},
    ConfigKey{"max-body-bytes", server},
    ConfigKey{"max-json-nodes", server},
    ConfigKey{"http-threads", server},
    ConfigKey{"http-header-timeout", server},
    ConfigKey{"http-body-timeout", server},
    ConfigKey{"http-keepalive-timeout", server},
    ConfigKey{"stream-keepalive", server},
    ConfigKey{"http-write-timeout", server},
    ConfigKey{"http-max-requests-per-connection", server},
    ConfigKey{"http-max-connections", server},
    ConfigKey{"http-max-connections-per-client", server},
    ConfigKey{"http-max-header-bytes", server},
    ConfigKey{"http-max-url-bytes", server},
    ConfigKey{"shutdown-grace-seconds", server},
    ConfigKey{"max-queued", server},
    ConfigKey{"api-key", server},
    ConfigKey{"api-keys", server},
    ConfigKey{"metrics", server},
    ConfigKey{"webui", server},
    ConfigKey{"webui-dir", server},
    ConfigKey{"allow-special-in-content", server},
    ConfigKey{"max-grammar-rules", server},
    ConfigKey{"response-store-bytes", server},
    ConfigKey{"response-ttl", server},
    ConfigKey{"log-level", server},
    ConfigKey{"kv-events-endpoint", server},
    ConfigKey{"models-dir", server},
    ConfigKey{"models-max", server},
    ConfigKey{"models-max-bytes", server},
    ConfigKey{"models-idle-seconds", server},
    ConfigKey{"models-autoload", server},
    ConfigKey{"kv-events-replay-endpoint", server},
    ConfigKey{"kv-events-topic", server},
    ConfigKey{"kv-events-tenants", server},
    ConfigKey{"kv-events-block-hashes", server},
    ConfigKey{"kv-events-replay-batches", server},
    ConfigKey{"kv-events-queue-batches", server},
    ConfigKey{"kv-events-interval-ms", server},
    // [model]: which model, how its context is built, and its default sampling seed.
    ConfigKey{"model", model},
    ConfigKey{"hf-repo", model},
    ConfigKey{"hf-file", model},
    ConfigKey{"alias", model},
    ConfigKey{"chat-template-file", model},
    ConfigKey{"mmproj", model},
    ConfigKey{"max-images", model},
    ConfigKey{"max-image-bytes", model},
    ConfigKey{"max-image-pixels", model},
    ConfigKey{"max-audio-seconds", model},
    ConfigKey{"image-embedding-bytes", model},
    ConfigKey{"ctx-size", model},
    ConfigKey{"parallel", model},
    ConfigKey{"batch-size", model},
    ConfigKey{"threads", model},
    ConfigKey{"flash-attn", model},
    ConfigKey{"deterministic", model},
    ConfigKey{"embeddings", model},
    ConfigKey{"reranking", model},
    ConfigKey{"pooling", model},
    ConfigKey{"embd-normalize", model},
    ConfigKey{"lora", model},
    ConfigKey{"lora-scaled", model},
    ConfigKey{"lora-init-without-apply", model},
    ConfigKey{"seed", model},
    ConfigKey{"gpu-layers", model},
    ConfigKey{"swa-full", model},
    ConfigKey{"kv-unified", model},
    ConfigKey{"prefill-packing", model},
    ConfigKey{"spec-type", model},
    ConfigKey{"draft-max", model},
    ConfigKey{"draft-min", model},
    ConfigKey{"draft-when", model},
    ConfigKey{"draft-pool-tokens", model},
    ConfigKey{"model-draft", model},
    ConfigKey{"draft-p-min", model},
    ConfigKey{"gpu-layers-draft", model},
    ConfigKey{"model-fingerprint-cache", model},
    // [cache]: the prompt cache's device and host tiers, checkpoints and isolation.
    ConfigKey{"no-cache-prompt", cache},
    ConfigKey{"prompt-cache-enabled", cache},
    ConfigKey{"prompt-cache-min-prefix", cache},
    ConfigKey{"cache-reuse", cache},
    ConfigKey{"prompt-cache-capacity-bytes", cache},
    ConfigKey{"prompt-cache-max-entries", cache},
    ConfigKey{"prompt-cache-ttl", cache},
    ConfigKey{"prompt-cache-retain-tokens", cache},
    ConfigKey{"prompt-cache-holders", cache},
    ConfigKey{"prompt-cache-device-cells", cache},
    ConfigKey{"prompt-cache-compaction", cache},
    ConfigKey{"prompt-cache-host-segment", cache},
    ConfigKey{"checkpoint-every", cache},
    ConfigKey{"prompt-cache-snapshot-capacity-bytes", cache},
    ConfigKey{"prompt-cache-snapshot-max-entries", cache},
    ConfigKey{"checkpoints-per-session", cache},
    ConfigKey{"cache-warmup", cache},
    ConfigKey{"apc-enabled", cache},
    ConfigKey{"apc-block-size", cache},
    ConfigKey{"apc-hash", cache},
    ConfigKey{"cache-isolation", cache},
    ConfigKey{"cache-shared-prefix-file", cache},
    ConfigKey{"cache-remote", cache},
    ConfigKey{"cache-remote-timeout-ms", cache},
    ConfigKey{"cache-remote-queue-bytes", cache},
    ConfigKey{"debug-verify-cache", cache},
    // [disk]: the disk tier and the artifacts stored beside it.
    ConfigKey{"cache-disk", disk},
    ConfigKey{"cache-disk-path", disk},
    ConfigKey{"cache-disk-max-bytes", disk},
    ConfigKey{"cache-disk-queue-bytes", disk},
    ConfigKey{"cache-artifact-path", disk},
    ConfigKey{"slot-save-path", disk},
};

constexpr std::array kSections{server, model, cache, disk};

}  // namespace

std::span<const ConfigKey> config_keys() { return kKeys; }

std::span<const ConfigSection> config_sections() { return kSections; }

std::string_view section_name(ConfigSection section) {
  switch (section) {
    case server: return "server";
    case cache: return "cache";
    case disk: return "disk";
    case model: return "model";
  }
  return "?";
}

std::optional<ConfigSection> parse_section_name(std::string_view name) {
  for (ConfigSection section : kSections) {
    if (section_name(section) == name) return section;
  }
  return std::nullopt;
}

std::optional<ConfigSection> section_of(std::string_view key) {
  const auto row = std::ranges::find(kKeys, key, &ConfigKey::key);
  if (row == kKeys.end()) return std::nullopt;
  return row->section;
}

bool overridable_per_model(std::string_view key) {
  if (key == "model" || key == "alias" || key == "hf-repo" || key == "hf-file") return false;
  const auto section = section_of(key);
  return section == model || section == cache;
}

}  // namespace prefixd::cli
