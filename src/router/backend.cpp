#include "router/backend.h"

#include <algorithm>
#include <utility>

#include <charconv>
#include <stdexcept>

namespace prefixd::router {

BackendAddress parse_backend_url(const std::string& url) {
  std::string_view rest = url;
  if (rest.starts_with("http://")) rest.remove_prefix(7);
  if (rest.ends_with("/")) rest.remove_suffix(1);
  const auto colon = rest.rfind(':');
  const auto bad = [&] {
    return std::invalid_argument("backend '" + url + "' is not http://HOST:PORT (https is not supported)");
  };
  if (url.starts_with("https://") || colon == std::string_view::npos || colon == 0) throw bad();
  int port = 0;
  const std::string_view digits = rest.substr(colon + 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc{} || end != digits.data() + digits.size() || port < 1 || port > 65535) throw bad();
  return BackendAddress{std::string(rest.substr(0, colon)), port};
}

Backend::Backend(std::string url) : url_(std::move(url)), address_(parse_backend_url(url_)) {}

void Backend::set_healthy(bool healthy) {
  healthy_.store(healthy);
  if (!healthy) {
    std::lock_guard lock(mutex_);
    version_.reset();
  }
}

std::int64_t Backend::load() const {
  std::lock_guard lock(mutex_);
  // The backend's report counts the router's requests in flight when it was taken: those are
  // replaced by the ones in flight now, so none is counted twice.
  return std::max<std::int64_t>(0, reported_load_ - in_flight_at_report_) + in_flight_.load();
}

std::optional<std::uint64_t> Backend::block_key(std::string_view hex) {
  if (hex.size() < 16) return std::nullopt;
  std::uint64_t key = 0;
  const std::string_view tail = hex.substr(hex.size() - 16);
  const auto [end, error] = std::from_chars(tail.data(), tail.data() + tail.size(), key, 16);
  if (error != std::errc{} || end != tail.data() + tail.size()) return std::nullopt;
  return key;
}

std::int64_t Backend::matched_blocks(std::span<const std::string> chain) const {
  std::lock_guard lock(mutex_);
  std::int64_t n = 0;
  for (const std::string& block : chain) {
    const auto key = block_key(block);
    if (!key || !blocks_.contains(*key)) break;
    ++n;
  }
  return n;
}

void Backend::add_blocks(std::span<const std::string> chain) {
  std::lock_guard lock(mutex_);
  for (const std::string& block : chain) {
    if (const auto key = block_key(block)) blocks_[*key] |= kCredited;
  }
}

std::optional<std::uint64_t> Backend::summary_version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

namespace {

// A published endpoint as the router reaches it: a wildcard bind address at the backend's host; an
// address the publisher connects to (a collector's) is not one the router can subscribe to.
std::optional<std::string> reachable(const std::string& endpoint, const std::string& host) {
  if (endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://")) return endpoint;
  if (!endpoint.starts_with("tcp://")) return std::nullopt;
  const std::string_view rest = std::string_view(endpoint).substr(6);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view bound = rest.substr(0, colon);
  if (bound != "*" && bound != "0.0.0.0" && bound != "[::]" && bound != "::") return std::nullopt;
  const bool v6 = host.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + host + "]" : host) + std::string(rest.substr(colon));
}

std::uint8_t medium_bit(const std::string& medium) {
  if (medium.empty() || medium == "GPU") return 1;
  if (medium == "CPU") return 2;
  if (medium == "DISK") return 4;
  return 8;
}

}  // namespace

bool Backend::apply_summary(const nlohmann::json& summary) {
  if (!summary.is_object() || summary.value("object", "") != "prefixd.cache_summary" || summary.value("format", 0) != 1) {
    return false;
  }
  const auto server = summary.find("server_id");
  if (server == summary.end() || !server->is_string()) return false;
  const std::string id = server->get<std::string>();
  std::lock_guard lock(mutex_);
  if (const auto load = summary.find("load"); load != summary.end() && load->is_object()) {
    reported_load_ = load->value("running", 0) + load->value("queued", 0);
    in_flight_at_report_ = in_flight_.load();
  }
  events_source_.reset();
  if (const auto advert = summary.find("kv_events"); advert != summary.end() && advert->is_object()) {
    const auto endpoint = reachable(advert->value("endpoint", ""), address_.host);
    const auto replay = advert->contains("replay_endpoint") && (*advert)["replay_endpoint"].is_string()
                            ? reachable((*advert)["replay_endpoint"].get<std::string>(), address_.host)
                            : std::nullopt;
    if (endpoint) events_source_ = events::SubscriberSource{*endpoint, replay.value_or("")};
  }
  block_size_ = std::max(1, summary.value("block_size", 16));
  if (!server_id_.empty() && id != server_id_) restarted_ = true;
  if (following_events_ && !needs_blocks_) {
    server_id_ = id;
    return true;
  }
  const auto version = summary.find("version");
  if (version == summary.end() || !version->is_number_integer() || version->get<std::int64_t>() < 0) return false;
  if (summary.value("unchanged", false)) {
    if (id != server_id_) {  // another process with the same version number: ask for all
      version_.reset();
      return false;
    }
    return true;
  }
  const auto blocks = summary.find("blocks");
  if (blocks == summary.end() || !blocks->is_array()) return false;
  if (following_events_) {
    // A gap's resync: the list counts beside what events say, until events remove a block.
    for (const auto& block : *blocks) {
      if (const auto key = block.is_string() ? block_key(block.get<std::string>()) : std::nullopt) blocks_[*key] |= kFromSummary;
    }
    needs_blocks_ = false;
  } else {
    std::unordered_map<std::uint64_t, std::uint8_t> fresh;
    fresh.reserve(blocks->size());
    for (const auto& block : *blocks) {
      if (const auto key = block.is_string() ? block_key(block.get<std::string>()) : std::nullopt) fresh[*key] = kFromSummary;
    }
    blocks_ = std::move(fresh);
  }
  version_ = version->get<std::uint64_t>();
  server_id_ = id;
  return true;
}

std::optional<events::SubscriberSource> Backend::events_source() const {
  std::lock_guard lock(mutex_);
  return events_source_;
}

void Backend::follow_events() {
  std::lock_guard lock(mutex_);
  following_events_ = true;
}

bool Backend::following_events() const {
  std::lock_guard lock(mutex_);
  return following_events_;
}

void Backend::apply_events(const events::WireBatch& batch) {
  std::lock_guard lock(mutex_);
  for (const events::WireEvent& event : batch.events) {
    if (const auto* stored = std::get_if<events::WireStored>(&event)) {
      const std::uint8_t bit = medium_bit(stored->medium);
      for (std::uint64_t h : stored->hashes) {
        std::uint8_t& from = blocks_[h];
        from = static_cast<std::uint8_t>((from & ~kCredited) | bit);  // the credit is confirmed
      }
    } else if (const auto* removed = std::get_if<events::WireRemoved>(&event)) {
      const std::uint8_t bit = medium_bit(removed->medium);
      for (std::uint64_t h : removed->hashes) {
        auto it = blocks_.find(h);
        if (it == blocks_.end()) continue;
        it->second &= static_cast<std::uint8_t>(~(bit | kFromSummary | kCredited));
        if (it->second == 0) blocks_.erase(it);
      }
    } else {
      blocks_.clear();
    }
  }
}

void Backend::resync() {
  std::lock_guard lock(mutex_);
  needs_blocks_ = true;
  version_.reset();
}

bool Backend::needs_blocks() const {
  std::lock_guard lock(mutex_);
  return needs_blocks_;
}

bool Backend::take_restart() {
  std::lock_guard lock(mutex_);
  return std::exchange(restarted_, false);
}

std::int32_t Backend::block_size() const {
  std::lock_guard lock(mutex_);
  return block_size_;
}

std::size_t Backend::block_count() const {
  std::lock_guard lock(mutex_);
  return blocks_.size();
}

}  // namespace prefixd::router
