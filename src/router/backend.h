// prefixd router — what the router knows of one backend server: where it is, whether it passes its
// health checks, the block chain hashes its latest cache summary listed (plus those of requests the
// router sent it since), and its load.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>

#include <nlohmann/json.hpp>

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
  // How many leading blocks of `chain` the backend holds.
  std::int64_t matched_blocks(std::span<const std::string> chain) const;
  // The request just routed here will leave its prompt's blocks: count them before the next poll.
  void add_blocks(std::span<const std::string> chain);

  // The `since` for the next summary poll (nullopt: fetch the whole list).
  std::optional<std::uint64_t> summary_version() const;
  // Takes a GET /v1/cache/summary answer; false when it is malformed (nothing changes) or belongs
  // to another server process than the version asked about (then the next poll asks for all).
  bool apply_summary(const nlohmann::json& summary);
  std::int32_t block_size() const;
  std::size_t block_count() const;

 private:
  std::string url_;
  BackendAddress address_;
  std::atomic<bool> healthy_{false};
  std::atomic<std::int64_t> in_flight_{0};
  mutable std::mutex mutex_;
  std::unordered_set<std::string> blocks_;
  std::optional<std::uint64_t> version_;
  std::string server_id_;
  std::int64_t reported_load_ = 0;
  std::int64_t in_flight_at_report_ = 0;  // the router's requests in flight when the report came
  std::int32_t block_size_ = 16;
};

}  // namespace prefixd::router
