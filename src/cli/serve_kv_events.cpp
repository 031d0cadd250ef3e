#include "cli/serve_kv_events.h"

#include <algorithm>
#include <format>
#include <set>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "api/auth/access.h"
#include "api/auth/tenants.h"

namespace prefixd::cli {

void add_kv_event_options(CLI::App& cmd, KvEventFlags& flags) {
  cmd.add_option("--kv-events-endpoint", flags.endpoint,
                 "Publish the cache's KV events (vLLM's format) on a ZeroMQ PUB socket: an address to bind "
                 "(tcp://*:5557) or, without a wildcard host, to connect to (default: off)")
      ->envname("PREFIXD_KV_EVENTS_ENDPOINT");
  cmd.add_option("--kv-events-replay-endpoint", flags.replay_endpoint,
                 "A ROUTER socket bound here replays recent batches to a subscriber that missed some "
                 "(tcp://*:5558; default: none)")
      ->envname("PREFIXD_KV_EVENTS_REPLAY_ENDPOINT");
  cmd.add_option("--kv-events-topic", flags.topic,
                 "The topic frame of every message (llm-d reads kv@POD@MODEL; default: empty). With --models-dir "
                 "each model's topic is this with {model} replaced by its name, else TOPIC@NAME")
      ->envname("PREFIXD_KV_EVENTS_TOPIC");
  cmd.add_option("--kv-events-tenants", flags.tenants,
                 "Tenants whose blocks are announced (comma-separated; * for every tenant); no other tenant's "
                 "blocks or hashes are ever published")
      ->capture_default_str()->delimiter(',')->envname("PREFIXD_KV_EVENTS_TENANTS");
  cmd.add_option("--kv-events-block-hashes", flags.hash_format,
                 "Block hashes on the wire: int (the chain hash's last 8 bytes, as vLLM's integer hashes) or "
                 "bytes (the whole 32-byte hash)")
      ->capture_default_str()->envname("PREFIXD_KV_EVENTS_BLOCK_HASHES")->check(CLI::IsMember({"int", "bytes"}));
  cmd.add_option("--kv-events-replay-batches", flags.replay_batches, "Batches kept for replay")
      ->capture_default_str()->envname("PREFIXD_KV_EVENTS_REPLAY_BATCHES")->check(CLI::Range(1, 10'000'000));
  cmd.add_option("--kv-events-queue-batches", flags.queue_batches,
                 "Batches waiting to be sent; past it a batch is only kept for replay (counted as dropped)")
      ->capture_default_str()->envname("PREFIXD_KV_EVENTS_QUEUE_BATCHES")->check(CLI::Range(1, 10'000'000));
  cmd.add_option("--kv-events-interval-ms", flags.interval_ms,
                 "How often, at most, the cache's changes are gathered into a batch while requests run")
      ->capture_default_str()->envname("PREFIXD_KV_EVENTS_INTERVAL_MS")->check(CLI::Range(1, 60'000));
}

void check_kv_event_flags(const KvEventFlags& flags) {
  if (flags.endpoint.empty()) {
    if (!flags.replay_endpoint.empty()) throw std::runtime_error("--kv-events-replay-endpoint needs --kv-events-endpoint");
    return;
  }
  if (flags.tenants.empty()) throw std::runtime_error("--kv-events-tenants: name at least one tenant, or *");
  for (const std::string& tenant : flags.tenants) {
    if (tenant != "*" && !api::valid_tenant_id(tenant)) {
      throw std::runtime_error(std::format("--kv-events-tenants: '{}' is not a tenant id (letters, digits, '.', '_' "
                                           "and '-', 1 to 64, not starting with '.') nor *", tenant));
    }
  }
  if (flags.replay_endpoint == flags.endpoint) {
    throw std::runtime_error("--kv-events-replay-endpoint must differ from --kv-events-endpoint");
  }
}

std::shared_ptr<events::KvEventPublisher> start_kv_events(const KvEventFlags& flags, std::int32_t block_size,
                                                          scheduler::SchedulerOptions& scheduler,
                                                          api::ServerOptions& server) {
  if (flags.endpoint.empty()) return nullptr;
  events::PublisherConfig config{.endpoint = flags.endpoint,
                                 .replay_endpoint = flags.replay_endpoint,
                                 .topic = flags.topic,
                                 .hash_format = *events::parse_hash_format(flags.hash_format),
                                 .block_size = block_size,
                                 .queue_batches = flags.queue_batches,
                                 .replay_batches = flags.replay_batches};
  auto started = events::KvEventPublisher::start(std::move(config));
  if (!started) throw std::runtime_error(started.error());
  std::shared_ptr<events::KvEventPublisher> publisher = std::move(*started);

  const bool every_tenant = std::ranges::contains(flags.tenants, std::string("*"));
  std::set<cache::ScopeId> scopes;
  for (const std::string& tenant : flags.tenants) {
    if (tenant != "*") scopes.insert(api::tenant_scope(tenant));
  }
  scheduler.kv_events.scopes = [every_tenant, scopes](const cache::ScopeId& scope) {
    return every_tenant || scopes.contains(scope);
  };
  scheduler.kv_events.interval = std::chrono::milliseconds(flags.interval_ms);
  server.kv_events = {.endpoint = flags.endpoint, .replay_endpoint = flags.replay_endpoint, .topic = flags.topic,
                      .block_hashes = flags.hash_format};
  scheduler.kv_events.sink = [publisher](std::vector<cache::KvEvent> events) { publisher->publish(std::move(events)); };
  server.extra_metrics = [publisher](metrics::Registry& registry) {
    const events::PublisherStats s = publisher->stats();
    registry.counter("prefixd_kv_events_batches_total", "KV event batches numbered for subscribers.",
                     static_cast<double>(s.batches));
    const char* help = "KV events published, by type.";
    registry.counter("prefixd_kv_events_total", help, static_cast<double>(s.stored_events), {{"type", "BlockStored"}});
    registry.counter("prefixd_kv_events_total", help, static_cast<double>(s.removed_events), {{"type", "BlockRemoved"}});
    registry.counter("prefixd_kv_events_total", help, static_cast<double>(s.cleared_events),
                     {{"type", "AllBlocksCleared"}});
    registry.counter("prefixd_kv_events_dropped_batches_total",
                     "Batches not sent live because the queue was full (kept for replay).",
                     static_cast<double>(s.dropped_batches));
    registry.counter("prefixd_kv_events_replay_requests_total", "Replay requests served.",
                     static_cast<double>(s.replay_requests));
    registry.counter("prefixd_kv_events_replayed_batches_total", "Batches sent again to replay requests.",
                     static_cast<double>(s.replayed_batches));
    registry.gauge("prefixd_kv_events_queued_batches", "Batches waiting for the publisher's thread.",
                   static_cast<double>(s.queued_batches));
  };
  std::string tenants;
  for (const std::string& t : flags.tenants) tenants += (tenants.empty() ? "" : ",") + t;
  spdlog::info("kv events: {} (topic '{}', replay {}), tenants {}, {} block hashes, every {} ms at most",
               flags.endpoint, flags.topic, flags.replay_endpoint.empty() ? "off" : flags.replay_endpoint, tenants,
               flags.hash_format, flags.interval_ms);
  return publisher;
}

}  // namespace prefixd::cli
