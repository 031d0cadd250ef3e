// prefixd api — module chains for POST /v1/cache/prepare_modules, and the manifests artifacts carry.
//
// A chain is an ordered list of modules (a system prompt, a tool set, memory messages...). Module k
// stands for the conversation made of modules 1..k; its fingerprint chains the fingerprints before
// it with its own, over a root that names the model and the template settings, so editing any
// module changes the fingerprint of every module after it: a module is reusable only behind
// exactly the modules it was prepared behind. (K/V is positional; nothing here re-encodes a module
// at another offset, and nothing pretends to.)
//
// An artifact of a module or key carries a manifest: what it is, where the module starts, the
// chain before it, and the conversation, so a load can (a) refuse a composition the caller did not
// expect — the verdict is match, mismatch (refused before anything is stored) or abstain (an
// artifact without a module manifest) — and (b) rebuild the key it is loaded into.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/control/cache_keys.h"
#include "api/errors.h"

namespace prefixd::api {

inline constexpr std::size_t kMaxModules = 64;

struct ModuleSpec {
  std::string module_id;
  std::optional<std::string> system_prompt;  // stripped; only in the first module with messages
  nlohmann::ordered_json tools;              // array or null, keys in the order sent
  nlohmann::ordered_json messages;           // array or null, keys in the order sent
};

// body["modules"], validated: every module has a non-empty module_id (unique in the chain) and at
// least one of system_prompt, tools, messages; a system_prompt may only open the conversation.
// Errors name the field, e.g. modules[2].tools.
std::expected<std::vector<ModuleSpec>, ApiError> parse_modules(const nlohmann::ordered_json& body);

// Hex fingerprints of each module's chain: fingerprint[k] covers `root` and modules 0..k.
// `root` names what else decides the tokens (model, template, kwargs, salt).
std::vector<std::string> chain_fingerprints(std::string_view root, const std::vector<ModuleSpec>& modules);

// The messages and tools of modules 0..k, in order.
struct ChainPart {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // array, or null when no module so far has tools
};
ChainPart chain_through(const std::vector<ModuleSpec>& modules, std::size_t k);

struct ModuleManifest {
  std::string module_id;
  std::string fingerprint;
  std::int32_t start_offset = 0;
  std::int32_t end_offset = 0;
  std::vector<std::string> prefix_chain;
};

struct ArtifactManifest {
  std::string kind;  // "key" or "module"
  std::string key;   // kind key: the key it was saved from
  std::optional<ModuleManifest> module;
  std::optional<KeyConversation> conversation;

  std::string encode() const;
  // nullopt for an empty or foreign manifest (an artifact saved without one).
  static std::optional<ArtifactManifest> decode(std::string_view bytes);
};

enum class Composition { match, mismatch, abstain };
const char* composition_name(Composition verdict);

// Whether adopting the artifact at `at_offset` behind `prefix_chain` is what it was prepared for:
// abstain when it has no module manifest; else match only when both agree exactly. `why` says what
// differs on a mismatch.
Composition composition_verdict(const std::optional<ArtifactManifest>& manifest, std::int32_t at_offset,
                                const std::vector<std::string>& prefix_chain, std::string* why);

}  // namespace prefixd::api
