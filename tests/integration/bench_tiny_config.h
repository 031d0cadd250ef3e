// prefixd integration tests — the RunConfig the bench workload tests share: prefixd on the tiny
// model, one compute thread (tests/integration/server_process.cpp says why), a 256 MiB host tier, generous limits for a loaded machine, the server's log in
// the test's scratch directory.
#pragma once

#include <chrono>

#include "bench/disk_tier.h"
#include "bench/executor.h"

namespace prefixd::bench {

inline RunConfig tiny_run_config(const ScratchDir& scratch) {
  RunConfig config;
  config.base.model_path = PREFIXD_TINY_MODEL;
  config.base.threads = 1;
  config.base.cache_mib = 256;
  config.startup_limit = std::chrono::seconds(60);
  config.request_timeout = std::chrono::seconds(120);
  config.log_path = (scratch.root() / "server.log").string();
  return config;
}

}  // namespace prefixd::bench
