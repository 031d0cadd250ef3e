#include "api/body/cache_fields.h"

namespace prefixd::api::fields {

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
