#include "api/control/cache_tree_report.h"

#include <charconv>
#include <format>

#include "util/hex.h"

namespace prefixd::api {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Bytes of `text` up to `limit`, cut back to the start of a UTF-8 character.
std::string cut_utf8(std::string text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text + "…";
}

// Special tokens are shown (the template's markers are what tells turns apart); the stand-in ids
// of an image's positions (negative, vision.h) are shown once per run as "[image]". A character
// split across the preview's end or between tokens is replaced when the JSON is written (dump_json).
std::string preview(std::span<const engine::Token> tokens, const engine::Vocabulary& vocab) {
  std::string text;
  bool in_image = false;
  for (const engine::Token t : tokens) {
    if (text.size() > kTreePreviewBytes) break;
    if (t < 0 || t >= vocab.size()) {
      if (!in_image) text += "[image]";
      in_image = true;
      continue;
    }
    in_image = false;
    text += vocab.piece(t, true);
  }
  return cut_utf8(std::move(text), kTreePreviewBytes);
}

OrderedJson tiers_json(std::uint8_t tiers) {
  OrderedJson out = OrderedJson::array();
  if (tiers & cache::kTreeDevice) out.push_back("device");
  if (tiers & cache::kTreeHost) out.push_back("host");
  if (tiers & cache::kTreeDisk) out.push_back("disk");
  return out;
}

OrderedJson node_json(const cache::TreeNode& node, const engine::Vocabulary& vocab) {
  OrderedJson out{{"begin", node.begin},
                  {"end", node.end},
                  {"tokens", node.end - node.begin},
                  {"text", preview(node.tokens, vocab)},
                  {"tiers", tiers_json(node.tiers)},
                  {"entries", node.entries},
                  {"sessions", node.sessions},
                  {"locked", node.locked()},
                  {"last_used_seconds_ago", node.idle_seconds ? OrderedJson(*node.idle_seconds) : OrderedJson(nullptr)}};
  OrderedJson children = OrderedJson::array();
  for (const auto& child : node.children) children.push_back(node_json(*child, vocab));
  out["children"] = std::move(children);
  return out;
}

}  // namespace

std::expected<std::optional<std::int64_t>, ApiError> parse_tree_limit(std::string_view value) {
  if (value.empty()) return std::nullopt;
  std::int64_t limit = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), limit);
  if (error != std::errc{} || end != value.data() + value.size() || limit < 1 || limit > kMaxTreeNodes) {
    return std::unexpected(invalid_param("limit", std::format("'limit' must be a whole number from 1 to {}", kMaxTreeNodes)));
  }
  return limit;
}

OrderedJson cache_tree_json(const cache::CacheTree& tree, const engine::Vocabulary& vocab, const TenantNames& tenants) {
  OrderedJson namespaces = OrderedJson::array();
  for (const auto& ns : tree.namespaces) {
    namespaces.push_back({{"namespace", util::to_hex(std::string_view(ns.ns).substr(0, 4))},
                          {"tenant", tenants.name_of(ns.scope)},
                          {"tokens", ns.tokens},
                          {"nodes", ns.nodes},
                          {"root", node_json(*ns.root, vocab)}});
  }
  return {{"namespaces", std::move(namespaces)}, {"node_limit", tree.node_limit}, {"truncated", tree.truncated}};
}

}  // namespace prefixd::api
