#include "router/backend.h"

#include <algorithm>

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

std::int64_t Backend::matched_blocks(std::span<const std::string> chain) const {
  std::lock_guard lock(mutex_);
  std::int64_t n = 0;
  for (const std::string& block : chain) {
    if (!blocks_.contains(block)) break;
    ++n;
  }
  return n;
}

void Backend::add_blocks(std::span<const std::string> chain) {
  std::lock_guard lock(mutex_);
  blocks_.insert(chain.begin(), chain.end());
}

std::optional<std::uint64_t> Backend::summary_version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

bool Backend::apply_summary(const nlohmann::json& summary) {
  if (!summary.is_object() || summary.value("object", "") != "prefixd.cache_summary" || summary.value("format", 0) != 1) {
    return false;
  }
  const auto version = summary.find("version");
  const auto server = summary.find("server_id");
  if (version == summary.end() || !version->is_number_integer() || version->get<std::int64_t>() < 0 ||
      server == summary.end() || !server->is_string()) {
    return false;
  }
  std::lock_guard lock(mutex_);
  if (const auto load = summary.find("load"); load != summary.end() && load->is_object()) {
    reported_load_ = load->value("running", 0) + load->value("queued", 0);
    in_flight_at_report_ = in_flight_.load();
  }
  if (summary.value("unchanged", false)) {
    if (*server != server_id_) {  // another process with the same version number: ask for all
      version_.reset();
      return false;
    }
    return true;
  }
  const auto blocks = summary.find("blocks");
  if (blocks == summary.end() || !blocks->is_array()) return false;
  std::unordered_set<std::string> fresh;
  fresh.reserve(blocks->size());
  for (const auto& block : *blocks) {
    if (block.is_string()) fresh.insert(block.get<std::string>());
  }
  blocks_ = std::move(fresh);
  version_ = version->get<std::uint64_t>();
  server_id_ = server->get<std::string>();
  block_size_ = std::max(1, summary.value("block_size", 16));
  return true;
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
