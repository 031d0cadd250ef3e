// prefixd router — what the router knows of one backend server: where it is, whether it passes its
// health checks, which blocks its cache holds (from its latest cache summary, or, when it publishes
// KV events and the router follows them, from the event stream; plus those of requests the router
// sent it since), and its load.
//
// Blocks are keyed by the last 8 bytes of their chain hash (a summary's hex hashes and a KV
// event's integer or whole hashes map to the same key).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "events/kv_event_subscriber.h"
#include "events/kv_event_wire.h"

namespace prefixd::router {

struct BackendAddress {
  std::string host;
  int port = 0;
};
// "http://host:port" (or "host:port"); throws std::invalid_argument for anything else.
BackendAddress parse_backend_url(const std::string& url);

class Backend {
 public:
  explicit Backend(std::string url);

  const std::string& url() const { return url_; }
  const BackendAddress& address() const { return address_; }

  // A backend starts drained; the first passing health check lets requests in.
  bool healthy() const { return healthy_.load(); }
  // A failed check or connection error also forgets the summary version, so the next poll fetches
  // the whole list (a restarted server starts empty).
  void set_healthy(bool healthy);

  // Requests the router has sent and not yet finished; held by an InFlight while one runs.
  std::int64_t in_flight() const { return in_flight_.load(); }
  class InFlight {
   public:
    explicit InFlight(Backend& backend) : backend_(backend) { ++backend_.in_flight_; }
    ~InFlight() { --backend_.in_flight_; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    Backend& backend_;
  };

  // Running + queued from its latest summary less the router's own requests in flight then, plus
  // the router's own requests in flight now.
  std::int64_t load() const;
  // The key of a hex chain hash (its last 16 digits); nullopt for anything else.
  static std::optional<std::uint64_t> block_key(std::string_view hex);
  // How many leading blocks of `chain` the backend holds.
  std::int64_t matched_blocks(std::span<const std::string> chain) const;
  // The request just routed here will leave its prompt's blocks: count them before the next poll.
  void add_blocks(std::span<const std::string> chain);

  // The `since` for the next summary poll (nullopt: fetch the whole list).
  std::optional<std::uint64_t> summary_version() const;
  // Takes a GET /v1/cache/summary answer; false when it is malformed (nothing changes) or belongs
  // to another server process than the version asked about (then the next poll asks for all).
  // While the router follows the backend's events, a summary brings its load and server id (and
  // its blocks only when a gap asked for them: resync()).
  bool apply_summary(const nlohmann::json& summary);

  // KV events. Where the backend publishes them, as its latest summary advertised (a wildcard
  // bind address is reached at the backend's host); nullopt: it does not, or the router cannot
  // reach it (it connects to a collector).
  std::optional<events::SubscriberSource> events_source() const;
  // From now on the blocks come from events (the summaries' lists are no longer read).
  void follow_events();
  bool following_events() const;
  // Applies one batch of the backend's stream, in order.
  void apply_events(const events::WireBatch& batch);
  // A gap the replay could not fill: the next summary poll reads the whole block list again (its
  // blocks count until events remove them).
  void resync();
  bool needs_blocks() const;
  // Whether the backend restarted (a new server id) since the last call: its stream starts over.
  bool take_restart();
  std::int32_t block_size() const;
  std::size_t block_count() const;

 private:
  std::string url_;
  BackendAddress address_;
  std::atomic<bool> healthy_{false};
  std::atomic<std::int64_t> in_flight_{0};
  mutable std::mutex mutex_;
  // Where each block is known from: event media (kMedium*), the latest summary, the router's credit.
  static constexpr std::uint8_t kFromSummary = 1 << 5, kCredited = 1 << 6;
  std::unordered_map<std::uint64_t, std::uint8_t> blocks_;
  std::optional<std::uint64_t> version_;
  std::string server_id_;
  std::optional<events::SubscriberSource> events_source_;
  bool following_events_ = false;
  bool needs_blocks_ = false;
  bool restarted_ = false;
  std::int64_t reported_load_ = 0;
  std::int64_t in_flight_at_report_ = 0;  // the router's requests in flight when the report came
  std::int32_t block_size_ = 16;
};

}  // namespace prefixd::router
