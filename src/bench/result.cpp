#include "bench/result.h"

#include <type_traits>

namespace prefixd::bench {
namespace {

template <class T>
void read(const nlohmann::json& object, const char* key, T& out) {
  if (!object.is_object()) return;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return;
  if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) out = it->get<std::string>();
  } else {
    if (it->is_number()) out = it->get<T>();
  }
}

const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;  // immutable: a shared "absent" value, not mutable state
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

}  // namespace

void read_report_fields(const nlohmann::json& body, CompletionResult& out) {
  const auto& usage = member(body, "usage");
  read(usage, "prompt_tokens", out.prompt_tokens);
  read(usage, "completion_tokens", out.completion_tokens);
  read(member(usage, "prompt_tokens_details"), "cached_tokens", out.cached_tokens);
  const auto& cache = member(body, "prompt_cache");
  read(cache, "outcome", out.outcome);
  read(cache, "cached_tokens", out.cache_cached_tokens);
  read(cache, "fed_tokens", out.fed_tokens);
  read(cache, "tier", out.tier);
  read(cache, "scope", out.scope);
  const auto& timings = member(body, "timings");
  read(timings, "queued_ms", out.queued_ms);
  read(timings, "prompt_n", out.prompt_n);
  read(timings, "prompt_ms", out.prompt_ms);
  read(timings, "predicted_n", out.predicted_n);
  read(timings, "predicted_ms", out.predicted_ms);
  read(timings, "cache_n", out.cache_n);
}

std::string error_message(const std::string& body) {
  const auto parsed = nlohmann::json::parse(body, nullptr, false);
  const auto& error = member(parsed, "error");
  if (error.is_object() && error.contains("message") && error["message"].is_string()) {
    return error["message"].get<std::string>();
  }
  if (error.is_string()) return error.get<std::string>();
  return body.size() > 500 ? body.substr(0, 500) + "…" : body;
}

nlohmann::json CompletionResult::to_json() const {
  nlohmann::json j = {{"status", status},
                      {"ttft_ms", ttft_ms},
                      {"total_ms", total_ms},
                      {"finish_reason", finish_reason},
                      {"prompt_tokens", prompt_tokens},
                      {"completion_tokens", completion_tokens},
                      {"cached_tokens", cached_tokens},
                      {"outcome", outcome},
                      {"fed_tokens", fed_tokens},
                      {"tier", tier},
                      {"scope", scope},
                      {"queued_ms", queued_ms},
                      {"prompt_n", prompt_n},
                      {"prompt_ms", prompt_ms},
                      {"predicted_n", predicted_n},
                      {"predicted_ms", predicted_ms},
                      {"cache_n", cache_n},
                      {"first_piece", first_piece}};
  if (!error.empty()) j["error"] = error;
  if (cancelled) j["cancelled"] = true;
  return j;
}

}  // namespace prefixd::bench
