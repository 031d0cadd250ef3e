#include "api/adapters/adapter_table.h"

#include <cmath>
#include <format>
#include <limits>

namespace prefixd::api {

std::expected<AdapterChoice, ApiError> parse_adapter_choice(const nlohmann::ordered_json& value, const std::string& param) {
  if (!value.is_array()) {
    return std::unexpected(invalid_param(param, std::format("'{}' must be an array of {{\"id\", \"scale\"}} objects", param)));
  }
  AdapterChoice out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const nlohmann::ordered_json& entry = value[i];
    const std::string at = std::format("{}[{}]", param, i);
    if (!entry.is_object()) return std::unexpected(invalid_param(at, std::format("'{}' must be an object {{\"id\", \"scale\"}}", at)));
    const auto id = entry.find("id");
    if (id == entry.end() || !id->is_number_integer() || id->get<std::int64_t>() < 0 ||
        id->get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
      return std::unexpected(invalid_param(at + ".id", std::format("'{}.id' must be an adapter's id, an integer from 0", at)));
    }
    const auto scale = entry.find("scale");
    if (scale == entry.end() || !scale->is_number() || !std::isfinite(scale->get<double>()) ||
        std::abs(scale->get<double>()) > 1e6) {
      return std::unexpected(invalid_param(at + ".scale", std::format("'{}.scale' must be a finite number (0 turns the adapter off)", at)));
    }
    out.push_back(engine::AdapterScale{.id = static_cast<std::int32_t>(id->get<std::int64_t>()),
                                       .scale = static_cast<float>(scale->get<double>())});
  }
  return out;
}

std::vector<float> scales_of(const AdapterChoice& choice, std::size_t count) {
  std::vector<float> scales(count, 0.0f);
  for (const engine::AdapterScale& a : choice) {
    if (a.id >= 0 && static_cast<std::size_t>(a.id) < count) scales[static_cast<std::size_t>(a.id)] = a.scale;
  }
  return scales;
}

AdapterTable::AdapterTable(const std::vector<engine::AdapterInfo>& adapters, const std::vector<float>& scales)
    : infos_(adapters) {
  for (std::size_t i = 0; i < adapters.size(); ++i) {
    entries_.push_back(Entry{.info = adapters[i], .scale = i < scales.size() ? scales[i] : 1.0f});
  }
}

std::vector<AdapterTable::Entry> AdapterTable::list() const {
  std::lock_guard lock(mutex_);
  return entries_;
}

std::optional<ApiError> AdapterTable::check(const AdapterChoice& choice, const std::string& param) const {
  for (std::size_t i = 0; i < choice.size(); ++i) {
    const std::int32_t id = choice[i].id;
    if (id < 0 || static_cast<std::size_t>(id) >= infos_.size()) {
      const std::string field = std::format("{}[{}].id", param, i);
      return invalid_param(field, infos_.empty() ? std::format("'{}': this server loads no LoRA adapters (--lora)", field)
                                                 : std::format("'{}' is {}: the adapters' ids are 0 to {} (GET /lora-adapters)",
                                                               field, id, infos_.size() - 1));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> AdapterTable::set_scales(const AdapterChoice& choice, const std::string& param) {
  if (auto error = check(choice, param)) return error;
  const std::vector<float> scales = scales_of(choice, infos_.size());
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < entries_.size(); ++i) entries_[i].scale = scales[i];
  return std::nullopt;
}

std::expected<AppliedAdapters, ApiError> AdapterTable::resolve(const std::optional<AdapterChoice>& choice,
                                                               const std::string& param) const {
  if (choice && !choice->empty()) {
    if (auto error = check(*choice, param)) return std::unexpected(std::move(*error));
    return applied(scales_of(*choice, infos_.size()));
  }
  if (infos_.empty()) return AppliedAdapters{};
  std::vector<float> scales;
  {
    std::lock_guard lock(mutex_);
    for (const Entry& e : entries_) scales.push_back(e.scale);
  }
  return applied(scales);
}

AppliedAdapters AdapterTable::applied(const std::vector<float>& scales) const {
  AppliedAdapters out;
  for (std::size_t i = 0; i < scales.size(); ++i) {
    if (scales[i] == 0.0f) continue;
    const engine::AdapterInfo& info = infos_[i];
    out.adapters.push_back(engine::AdapterScale{.id = static_cast<std::int32_t>(i), .scale = scales[i]});
    // The exact scale (hexadecimal): two scales that differ in any bit compute other K/V.
    out.namespace_field += std::format("{}{}*{:a}", out.namespace_field.empty() ? "" : ",", info.fingerprint, scales[i]);
    out.label += std::format("{}{}{}", out.label.empty() ? "" : "+", info.name,
                             scales[i] == 1.0f ? std::string() : std::format("@{}", scales[i]));
  }
  return out;
}

}  // namespace prefixd::api
