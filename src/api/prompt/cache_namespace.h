// prefixd api — the cache namespace: everything besides the tokens that decides whether two
// requests may share K/V (see DESIGN.md, "Namespace").
//
// Digests are BLAKE3, domain-separated, with every field length-prefixed so that no two distinct
// field lists hash the same bytes ("ab"+"c" vs "a"+"bc"), and an optional field preceded by
// whether it is present (an absent salt and an empty one are two encodings). They are raw 32-byte
// strings, the form scheduler::CacheOptions::namespace_digest carries.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::api {

// The multimodal digest of a text-only request.
inline constexpr std::string_view kTextOnlyMultimodalDigest = "text";

struct NamespaceFields {
  // The model file's fingerprint (engine::ModelInfo::fingerprint): a digest of the whole GGUF, so
  // files with equal shapes and different weights never share K/V.
  std::string model_id;
  // The LoRA adapters the request applies (AppliedAdapters::namespace_field: each one's file
  // fingerprint and exact scale); empty under none, so the base model's K/V is shared with a server
  // that loads no adapters. An adapter changes every K/V value.
  std::string lora_id;
  // engine::ModelInfo::runtime_signature: what of the context changes K/V values or their
  // serialized layout — the RoPE settings in effect (base, scaling, YaRN, long/short factors), the
  // K and V cache types, flash attention, the full window cache, libllama's version.
  std::string runtime_signature;
  std::string multimodal_digest = std::string(kTextOnlyMultimodalDigest);
  // The tenant the request's API key belongs to: derived by the server, never sent by a client, so
  // two tenants never share K/V whatever else their requests carry.
  std::string tenant;
  // cache_salt: splits a tenant's space further (requests with different salts never share K/V);
  // it can never join another tenant's space, since the tenant is a field of its own.
  std::optional<std::string> cache_salt;
};

// 32 raw bytes. With model_id and runtime_signature filled as above, equal digests mean the same
// K/V in any process that loads the same file with the same settings: the digest may key K/V
// stored on disk or shared between servers.
std::string namespace_digest(const NamespaceFields& fields);

// What produced a prompt's tokens besides its messages: the chat template, its kwargs, the tools
// and tool_choice. None of them is a namespace field — equal tokens under one model give equal K/V
// whatever rendered them, and the token match already sees every difference they make — so they
// are kept only as a diagnostic: the scheduler compares a session's inputs from one request to the
// next and says which of them changed when a prompt diverges (PromptInputs in scheduler/request.h).
// Each is XXH3-64 of the value's compact JSON in the order it was sent (null, absent and {} or []
// are one value). Key order is part of it: the template prints tools, schemas and kwargs with
// their keys in the order sent, so a client that reorders keys changes the prompt's tokens, and
// the diagnostic then names the input that moved them instead of reporting nothing changed.
// A raw completion has one input, "template", of its own value.
std::vector<std::pair<std::string, std::uint64_t>> template_inputs(std::string_view template_source,
                                                                   const nlohmann::ordered_json& chat_template_kwargs,
                                                                   const nlohmann::ordered_json& tool_choice,
                                                                   const nlohmann::ordered_json& tools);
std::vector<std::pair<std::string, std::uint64_t>> raw_completion_inputs();

// 32 raw bytes: BLAKE3 over `domain` and `fields`, each length-prefixed (the namespace's encoding),
// for other digests that must never collide with a namespace or with each other.
std::string field_digest(std::string_view domain, std::initializer_list<std::string_view> fields);

}  // namespace prefixd::api
