#include "api/output.h"

#include <chrono>
#include <format>

namespace prefixd::api {

std::string dump_json(const OrderedJson& value) {
  return value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_data(const OrderedJson& payload) { return "data: " + dump_json(payload) + "\n\n"; }
std::string sse_data(const nlohmann::json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

IdGenerator::IdGenerator() : rng_(std::random_device{}()) {}

std::string IdGenerator::next(std::string_view prefix) {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  {
    std::lock_guard lock(mutex_);
    a = rng_();
    b = rng_();
  }
  return std::format("{}{:016x}{:08x}", prefix, a, static_cast<std::uint32_t>(b));
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace prefixd::api
