#include "api/control/cache_modules.h"

#include <format>
#include <set>

#include "api/prompt/cache_namespace.h"
#include "util/hex.h"

namespace prefixd::api {
namespace {

constexpr std::string_view kManifestTag = "prefixd.manifest.v1";

std::string strip(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(kSpace);
  return std::string(text.substr(first, last - first + 1));
}

std::unexpected<ApiError> bad(std::string param, std::string message) {
  return std::unexpected(invalid_param(std::move(param), std::move(message)));
}

// What of a module decides its tokens: its parts as sent, compact, every key in the order sent.
// The template renders tools and call arguments with their keys in that order, so a module whose
// keys were sent in another order renders other tokens and must have another fingerprint.
std::string canonical_module(const ModuleSpec& m) {
  nlohmann::ordered_json out{{"module_id", m.module_id}};
  if (m.system_prompt) out["system_prompt"] = *m.system_prompt;
  if (!m.tools.is_null()) out["tools"] = m.tools;
  if (!m.messages.is_null()) out["messages"] = m.messages;
  return out.dump();
}

}  // namespace

std::expected<std::vector<ModuleSpec>, ApiError> parse_modules(const nlohmann::ordered_json& body) {
  const auto found = body.find("modules");
  if (found == body.end() || !found->is_array() || found->empty()) {
    return bad("modules", "'modules' must be a non-empty array of modules");
  }
  if (found->size() > kMaxModules) return bad("modules", std::format("at most {} modules per chain", kMaxModules));
  std::vector<ModuleSpec> out;
  std::set<std::string> ids;
  bool conversation_started = false;
  for (std::size_t i = 0; i < found->size(); ++i) {
    const nlohmann::ordered_json& m = (*found)[i];
    const std::string at = std::format("modules[{}]", i);
    if (!m.is_object()) return bad(at, std::format("'{}' must be an object", at));
    for (const auto& [field, value] : m.items()) {
      if (field != "module_id" && field != "system_prompt" && field != "tools" && field != "messages") {
        return bad(at + "." + field, std::format("'{}.{}' is not a module field (module_id, system_prompt, tools, messages)", at, field));
      }
    }
    ModuleSpec spec;
    const auto id = m.find("module_id");
    if (id == m.end() || !id->is_string() || id->get_ref<const std::string&>().empty() || id->get_ref<const std::string&>().size() > 128) {
      return bad(at + ".module_id", std::format("'{}.module_id' must be a string of 1 to 128 bytes", at));
    }
    spec.module_id = id->get<std::string>();
    if (!ids.insert(spec.module_id).second) {
      return bad(at + ".module_id", std::format("module_id '{}' appears twice in the chain", spec.module_id));
    }
    if (const auto s = m.find("system_prompt"); s != m.end() && !s->is_null()) {
      if (!s->is_string()) return bad(at + ".system_prompt", std::format("'{}.system_prompt' must be a string", at));
      if (conversation_started) {
        return bad(at + ".system_prompt", "a system_prompt may only open the conversation (no messages before it)");
      }
      spec.system_prompt = strip(s->get_ref<const std::string&>());
      conversation_started = true;
    }
    if (const auto t = m.find("tools"); t != m.end() && !t->is_null()) {
      if (!t->is_array() || t->empty()) return bad(at + ".tools", std::format("'{}.tools' must be a non-empty array", at));
      spec.tools = *t;
    }
    if (const auto msgs = m.find("messages"); msgs != m.end() && !msgs->is_null()) {
      if (!msgs->is_array() || msgs->empty()) {
        return bad(at + ".messages", std::format("'{}.messages' must be a non-empty array", at));
      }
      spec.messages = *msgs;
      conversation_started = true;
    }
    if (!spec.system_prompt && spec.tools.is_null() && spec.messages.is_null()) {
      return bad(at, std::format("'{}' has nothing to prepare: give system_prompt, tools or messages", at));
    }
    out.push_back(std::move(spec));
  }
  return out;
}

std::vector<std::string> chain_fingerprints(std::string_view root, const std::vector<ModuleSpec>& modules) {
  std::vector<std::string> out;
  std::string previous = field_digest("prefixd.module-chain.root", {root});
  for (const ModuleSpec& m : modules) {
    previous = field_digest("prefixd.module-chain.link", {previous, canonical_module(m)});
    out.push_back(util::to_hex(previous));
  }
  return out;
}

ChainPart chain_through(const std::vector<ModuleSpec>& modules, std::size_t k) {
  ChainPart out;
  for (std::size_t i = 0; i <= k && i < modules.size(); ++i) {
    const ModuleSpec& m = modules[i];
    if (m.system_prompt) out.messages.push_back({{"role", "system"}, {"content", *m.system_prompt}});
    if (!m.tools.is_null()) {
      if (out.tools.is_null()) out.tools = nlohmann::ordered_json::array();
      for (const auto& tool : m.tools) out.tools.push_back(tool);
    }
    if (!m.messages.is_null()) {
      for (const auto& message : m.messages) out.messages.push_back(message);
    }
  }
  return out;
}

std::string ArtifactManifest::encode() const {
  nlohmann::ordered_json out{{"format", kManifestTag}, {"kind", kind}};
  if (!key.empty()) out["key"] = key;
  if (module) {
    out["module"] = {{"module_id", module->module_id},       {"fingerprint", module->fingerprint},
                     {"start_offset", module->start_offset}, {"end_offset", module->end_offset},
                     {"prefix_chain", module->prefix_chain}};
  }
  if (conversation) out["conversation"] = conversation->to_json();
  return out.dump();
}

std::optional<ArtifactManifest> ArtifactManifest::decode(std::string_view bytes) {
  if (bytes.empty()) return std::nullopt;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", "") != kManifestTag) return std::nullopt;
  try {
    ArtifactManifest out;
    out.kind = j.at("kind").get<std::string>();
    out.key = j.value("key", "");
    if (const auto m = j.find("module"); m != j.end()) {
      out.module = ModuleManifest{.module_id = m->at("module_id").get<std::string>(),
                                  .fingerprint = m->at("fingerprint").get<std::string>(),
                                  .start_offset = m->at("start_offset").get<std::int32_t>(),
                                  .end_offset = m->at("end_offset").get<std::int32_t>(),
                                  .prefix_chain = m->at("prefix_chain").get<std::vector<std::string>>()};
    }
    if (const auto c = j.find("conversation"); c != j.end()) out.conversation = KeyConversation::from_json(*c);
    return out;
  } catch (const std::exception&) {
    return std::nullopt;  // a manifest this build cannot read is treated as none: the verdict abstains
  }
}

const char* composition_name(Composition verdict) {
  switch (verdict) {
    case Composition::match: return "match";
    case Composition::mismatch: return "mismatch";
    case Composition::abstain: return "abstain";
  }
  return "abstain";
}

Composition composition_verdict(const std::optional<ArtifactManifest>& manifest, std::int32_t at_offset,
                                const std::vector<std::string>& prefix_chain, std::string* why) {
  if (!manifest || !manifest->module) return Composition::abstain;
  const ModuleManifest& m = *manifest->module;
  if (m.start_offset != at_offset) {
    if (why) *why = std::format("module '{}' was prepared at offset {}, not {}", m.module_id, m.start_offset, at_offset);
    return Composition::mismatch;
  }
  if (m.prefix_chain != prefix_chain) {
    if (why) {
      *why = std::format("module '{}' was prepared behind a chain of {} modules that differs from the {} given",
                         m.module_id, m.prefix_chain.size(), prefix_chain.size());
    }
    return Composition::mismatch;
  }
  return Composition::match;
}

}  // namespace prefixd::api
