// prefixd cache — trace lines (CacheConfig::trace, --cache-trace): one line per cache decision.
#pragma once

#include <utility>
#include <spdlog/spdlog.h>

#include "cache/cache_types.h"

namespace prefixd::cache {

template <typename... Args>
void trace(const CacheConfig& config, fmt::format_string<Args...> format, Args&&... args) {
  if (config.trace) spdlog::info("cache trace: {}", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace prefixd::cache
