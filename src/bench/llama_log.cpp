#include "bench/llama_log.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>

namespace prefixd::bench {
namespace {

bool has(std::string_view line, std::string_view what) { return line.find(what) != std::string_view::npos; }

// The number right after `key` in `line` (spaces skipped); `fallback` when it is not there.
double number_after(std::string_view line, std::string_view key, double fallback) {
  const auto at = line.find(key);
  if (at == std::string_view::npos) return fallback;
  std::string_view rest = line.substr(at + key.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  return error == std::errc() && end != rest.data() ? value : fallback;
}

}  // namespace

nlohmann::json LlamaCheckpointLog::to_json() const {
  return {{"created", created},          {"created_mib", created_mib}, {"largest_mib", largest_mib},
          {"erased", erased},            {"erased_mib", erased_mib},   {"superseded", superseded},
          {"restored", restored},
          {"prompts_saved", prompts_saved}, {"cache_prompts", cache_prompts}, {"cache_mib", cache_mib},
          {"cache_checkpoints", cache_checkpoints}};
}

LlamaCheckpointLog parse_llama_checkpoint_log(std::string_view log) {
  LlamaCheckpointLog out;
  while (!log.empty()) {
    const auto newline = log.find('\n');
    const std::string_view line = log.substr(0, newline);
    log.remove_prefix(newline == std::string_view::npos ? log.size() : newline + 1);
    if (has(line, "created context checkpoint")) {
      const double mib = number_after(line, "size =", 0);
      ++out.created;
      out.created_mib += mib;
      out.largest_mib = std::max(out.largest_mib, mib);
    } else if (has(line, "erasing old context checkpoint") || has(line, "erasing context checkpoint too close") ||
               has(line, "erased invalidated context checkpoint")) {
      ++out.erased;
      out.erased_mib += number_after(line, "size =", 0);
    } else if (has(line, "superseding context checkpoint")) {
      ++out.superseded;
    } else if (has(line, "restored context checkpoint (")) {
      ++out.restored;
    } else if (has(line, "saving prompt with length")) {
      ++out.prompts_saved;
    } else if (has(line, "cache state:")) {
      // A new listing replaces the last one: the cache's content is the latest listing's.
      out.cache_prompts = static_cast<std::int64_t>(number_after(line, "cache state:", -1));
      out.cache_mib = number_after(line, "prompts,", -1);
      out.cache_checkpoints = 0;
    } else if (has(line, "- prompt ") && has(line, "checkpoints:")) {
      out.cache_checkpoints += static_cast<std::int64_t>(number_after(line, "checkpoints:", 0));
    }
  }
  return out;
}

}  // namespace prefixd::bench
