#include "api/prompt/special_text.h"

#include <algorithm>
#include <charconv>
#include <format>
#include <random>

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;

// Letters and digits only, so that no template filter (trim, tojson, escaping) changes it.
std::string random_marker() {
  std::random_device entropy;
  const std::uint64_t nonce = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
  return std::format("PREFIXDLITERAL{:016x}N", nonce);
}

}  // namespace

SpecialTextGuard::SpecialTextGuard(std::vector<std::string> control_texts) : marker_(random_marker()) {
  std::erase_if(control_texts, [](const std::string& text) { return text.empty(); });
  std::ranges::stable_sort(control_texts, std::ranges::greater{}, &std::string::size);
  texts_ = std::move(control_texts);
  for (const auto& text : texts_) starts_[static_cast<unsigned char>(text.front())] = true;
}

std::size_t SpecialTextGuard::match_at(std::string_view text, std::size_t pos) const {
  if (!starts_[static_cast<unsigned char>(text[pos])]) return 0;
  const std::string_view rest = text.substr(pos);
  for (const auto& candidate : texts_) {  // longest first: the first match is the longest
    if (rest.starts_with(candidate)) return candidate.size();
  }
  return 0;
}

bool SpecialTextGuard::found_in(const ordered_json& value) const {
  if (!active()) return false;
  auto in_string = [this](std::string_view text) {
    for (std::size_t pos = 0; pos < text.size(); ++pos) {
      if (match_at(text, pos) > 0) return true;
    }
    return false;
  };
  if (value.is_string()) return in_string(value.get_ref<const std::string&>());
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      if (in_string(key) || found_in(item)) return true;
    }
  }
  if (value.is_array()) return std::ranges::any_of(value, [this](const ordered_json& item) { return found_in(item); });
  return false;
}

std::string SpecialTextGuard::shield_string(std::string_view text, std::vector<std::string>& originals) const {
  std::string out;
  std::size_t copied = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t length = match_at(text, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    out.append(text.substr(copied, pos - copied));
    out += std::format("{}{}Z", marker_, originals.size());
    originals.emplace_back(text.substr(pos, length));
    pos += length;
    copied = pos;
  }
  out.append(text.substr(copied));
  return out;
}

void SpecialTextGuard::shield(ordered_json& value, std::vector<std::string>& originals) const {
  if (!active()) return;
  if (value.is_string()) {
    value = shield_string(value.get_ref<const std::string&>(), originals);
  } else if (value.is_array()) {
    for (auto& item : value) shield(item, originals);
  } else if (value.is_object()) {
    ordered_json shielded = ordered_json::object();
    for (auto& [key, item] : value.items()) {
      shield(item, originals);
      shielded[shield_string(key, originals)] = std::move(item);
    }
    value = std::move(shielded);
  }
}

LiteralText SpecialTextGuard::restore(std::string_view rendered, std::span<const std::string> originals) const {
  LiteralText out;
  out.text.reserve(rendered.size());
  std::size_t copied = 0;
  for (std::size_t at = rendered.find(marker_); at != std::string_view::npos; at = rendered.find(marker_, at + 1)) {
    const std::size_t digits = at + marker_.size();
    std::size_t index = 0;
    const auto [end, error] = std::from_chars(rendered.data() + digits, rendered.data() + rendered.size(), index);
    const auto close = static_cast<std::size_t>(end - rendered.data());
    if (error != std::errc{} || close >= rendered.size() || rendered[close] != 'Z' || index >= originals.size()) {
      continue;  // not one of ours (or mangled): it stays text
    }
    out.text.append(rendered.substr(copied, at - copied));
    out.literal.push_back({.begin = out.text.size(), .end = out.text.size() + originals[index].size()});
    out.text += originals[index];
    copied = close + 1;
    at = close;
  }
  out.text.append(rendered.substr(copied));
  return out;
}

}  // namespace prefixd::api
