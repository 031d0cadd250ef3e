// prefixd api — the cache namespace: everything besides the tokens that decides whether two
// requests may share K/V (see DESIGN.md, "Namespace").
//
// Digests are BLAKE3, domain-separated, with every field length-prefixed so that no two distinct
// field lists hash the same bytes ("ab"+"c" vs "a"+"bc"). They are raw 32-byte strings, the form
// scheduler::CacheOptions::namespace_digest carries.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace prefixd::api {

// What a /v1/completions request uses in place of a template signature: raw prompts have no
// template, and must never share K/V with a chat whose rendered text happens to match.
inline constexpr std::string_view kRawCompletionSignature = "prefixd.raw-completion";

// The multimodal digest of a text-only request.
inline constexpr std::string_view kTextOnlyMultimodalDigest = "text";

struct NamespaceFields {
  std::string model_id;            // identifies the weights (the model fingerprint)
  std::string lora_id;             // empty: no adapter
  std::string template_signature;  // template_signature(...) or kRawCompletionSignature
  std::string rope_regime;         // empty: the model's native RoPE settings
  std::string multimodal_digest = std::string(kTextOnlyMultimodalDigest);
  std::string tenant_salt;         // cache_salt: a wall between tenants
};

// 32 raw bytes.
std::string namespace_digest(const NamespaceFields& fields);

// 32 raw bytes over the template source, the kwargs in canonical form (object keys sorted, so
// key order in the request does not matter), the effective tool_choice and the tools in request
// order (order matters: it changes the rendered prompt).
std::string template_signature(std::string_view template_source, const nlohmann::json& chat_template_kwargs,
                               const nlohmann::json& tool_choice, const nlohmann::json& tools);

std::string to_hex(std::string_view bytes);

}  // namespace prefixd::api
