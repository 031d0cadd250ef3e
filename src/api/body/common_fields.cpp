#include "api/body/common_fields.h"

#include <algorithm>

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

CacheFields read_cache_fields(const FieldReader& in, bool cache_prompt_default, const std::optional<std::string>& end_user) {
  CacheFields cache;
  cache.enabled = cache_prompt_default && in.boolean("cache_prompt", /*extended=*/true).value_or(true);
  const auto key = in.string("prompt_cache_key", /*extended=*/true);
  cache.session_key = key ? *key : end_user.value_or("");
  cache.salt = in.string("cache_salt", /*extended=*/true);
  if (cache.salt && cache.salt->empty()) reject("cache_salt", "'cache_salt' must be a non-empty string when present");
  return cache;
}

}  // namespace prefixd::api::fields
