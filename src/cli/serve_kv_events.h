// prefixd cli — `prefixd serve`'s KV event options (--kv-events-*): the publisher that announces
// the cache's blocks to fleet routers (events/kv_event_publisher.h), wired to the scheduler's sink.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/server.h"
#include "events/kv_event_publisher.h"
#include "scheduler/scheduler.h"

namespace prefixd::cli {

struct KvEventFlags {
  std::string endpoint;         // empty: off
  std::string replay_endpoint;
  std::string topic;
  std::vector<std::string> tenants{"default"};  // "*": every tenant
  std::string hash_format = "int";
  std::size_t replay_batches = 10000;
  std::size_t queue_batches = 10000;
  std::int64_t interval_ms = 20;
};

void add_kv_event_options(CLI::App& cmd, KvEventFlags& flags);

// Checks the flags (a CLI message names the one at fault) before the model loads.
void check_kv_event_flags(const KvEventFlags& flags);

// Starts the publisher when --kv-events-endpoint is set (else null) and points the scheduler's KV
// event sink and the server's metrics at it; they share its ownership, so it lives until the
// scheduler and the server are gone, and its destructor sends what is still queued. Throws
// std::runtime_error for an address ZeroMQ refuses.
std::shared_ptr<events::KvEventPublisher> start_kv_events(const KvEventFlags& flags, std::int32_t block_size,
                                                          scheduler::SchedulerOptions& scheduler,
                                                          api::ServerOptions& server);

}  // namespace prefixd::cli
