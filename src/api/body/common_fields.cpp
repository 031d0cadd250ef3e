#include "api/body/common_fields.h"

#include <algorithm>
#include <format>
#include <string>

#include "api/adapters/adapter_table.h"
#include "api/errors.h"

namespace prefixd::api::fields {

void check_served_model(const FieldReader& in, const std::vector<std::string>& served, bool required) {
  const auto model = in.string("model");
  if (!model) {
    if (required) reject("model", "'model' is required");
    return;  // a missing model means "whatever this server serves"
  }
  if (std::ranges::find(served, *model) == served.end()) throw Rejection{model_not_found(*model)};
}

void read_temperature(const FieldReader& in, engine::SamplingParams& sampling, double most) {
  const auto t = in.number("temperature", 0.0, most);
  if (!t) return;
  sampling.temperature = static_cast<float>(*t);
  if (*t == 0.0) sampling.top_k = 1;
}

void read_streaming(const FieldReader& in, CommonParams& params) {
  params.stream = in.boolean("stream").value_or(false);
  params.return_progress = in.boolean("return_progress", /*extended=*/true).value_or(false);
}

scheduler::DraftSettings read_speculative(const FieldReader& in) {
  // The most tokens one request may draft at a step: a call's row-wise bound (63) less its decode row.
  constexpr std::int64_t kMostDraft = 62;
  const ordered_json* object = in.find_extended("speculative");
  if (object != nullptr && !object->is_object()) reject("speculative", "'speculative' must be an object");
  const auto field = [&](const char* name) -> const ordered_json* {
    if (const ordered_json* flat = in.find_extended(std::string("speculative.") + name)) return flat;
    if (object == nullptr) return nullptr;
    const auto it = object->find(name);
    return it == object->end() || it->is_null() ? nullptr : &*it;
  };
  scheduler::DraftSettings out;
  if (const ordered_json* v = field("n_max")) {
    out.n_max = static_cast<std::int32_t>(FieldReader::to_integer(*v, "speculative.n_max", 0, kMostDraft));
  }
  if (const ordered_json* v = field("n_min")) {
    out.n_min = static_cast<std::int32_t>(FieldReader::to_integer(*v, "speculative.n_min", 0, kMostDraft));
  }
  if (const ordered_json* v = field("p_min")) {
    if (!v->is_number() || !(v->get<double>() >= 0.0 && v->get<double>() <= 1.0)) {
      reject("speculative.p_min", "'speculative.p_min' must be a number in [0, 1]");
    }
    out.p_min = static_cast<float>(v->get<double>());
  }
  if (out.n_max && out.n_min && *out.n_min > *out.n_max) {
    reject("speculative.n_min", std::format("'speculative.n_min' ({}) must not exceed 'speculative.n_max' ({})",
                                            *out.n_min, *out.n_max));
  }
  return out;
}

CacheFields read_cache_fields(const FieldReader& in, bool cache_prompt_default, const std::optional<std::string>& end_user) {
  CacheFields cache;
  cache.enabled = cache_prompt_default && in.boolean("cache_prompt", /*extended=*/true).value_or(true);
  const auto key = in.string("prompt_cache_key", /*extended=*/true);
  cache.session_key = key ? *key : end_user.value_or("");
  cache.salt = in.string("cache_salt", /*extended=*/true);
  if (cache.salt && cache.salt->empty()) reject("cache_salt", "'cache_salt' must be a non-empty string when present");
  if (const ordered_json* lora = in.find_extended("lora")) {
    auto choice = parse_adapter_choice(*lora, "lora");
    if (!choice) throw Rejection{std::move(choice.error())};
    cache.lora = std::move(*choice);
  }
  return cache;
}

}  // namespace prefixd::api::fields
