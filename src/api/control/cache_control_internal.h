// prefixd api — what the control plane's source files share (not part of its interface).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/control/cache_control.h"
#include "api/errors.h"

namespace prefixd::api {

struct CacheControl::Context {
  std::string operation;
  Caller caller;
  std::string tenant;     // whose keys the operation steers
  nlohmann::ordered_json body;    // an object (empty for a GET)
  std::string query_key;  // GET: the `key` query parameter
};

namespace control {

// The reply for a failure, in the control plane's error shape.
ControlReply failure(std::string_view operation, const ApiError& error, const nlohmann::ordered_json& capabilities);
// The reply for an operation this server cannot do (501).
ControlReply unsupported(std::string_view operation, std::string why, const nlohmann::ordered_json& capabilities);
nlohmann::ordered_json success(std::string_view operation);

// A key name from body[field] (or `fallback` when absent): 1 to kMaxKeyNameBytes bytes of printable
// ASCII. nullopt with `required` false and the field absent.
std::expected<std::optional<std::string>, ApiError> key_name(const nlohmann::ordered_json& body, const char* field, bool required,
                                                             std::string_view fallback = {});
// ttl_seconds: a positive integer up to 30 days; nullopt when absent.
std::expected<std::optional<std::chrono::seconds>, ApiError> ttl_of(const nlohmann::ordered_json& body);
// meta: an object of at most kMaxMetaBytes when dumped; nullopt when absent.
std::expected<std::optional<nlohmann::ordered_json>, ApiError> meta_of(const nlohmann::ordered_json& body);

std::int64_t unix_ms_now();

}  // namespace control
}  // namespace prefixd::api
