// prefixd api — reading the fields of a JSON request body: type and range checks that reject
// with an ApiError naming the field. Shared by every wire protocol's parser.
#pragma once

#include <cmath>
#include <cstdint>
#include <expected>
#include <format>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"

namespace prefixd::api::fields {

// Bodies are read as parsed, keys in the order sent (parse_json_object): what a parser hands on to
// the chat template keeps that order.
using nlohmann::ordered_json;

inline constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

// Inside a parser a rejection unwinds to the public entry point (guarded), which turns it into
// the std::expected the caller sees; this keeps each rule one line instead of a chain of checks.
struct Rejection {
  ApiError error;
};

[[noreturn]] inline void reject(std::string param, std::string message) {
  throw Rejection{invalid_param(std::move(param), std::move(message))};
}

inline std::string type_name(const ordered_json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

// Reads the fields of one request object. OpenAI clients send null for "unset", so null and
// absent mean the same. Fields that other servers accept inside `extra_body` (the Python client's
// escape hatch, sometimes sent literally) are looked up there too.
class FieldReader {
 public:
  explicit FieldReader(const ordered_json& root) : root_(root) {
    if (const ordered_json* extra = at(root_, "extra_body")) {
      if (!extra->is_object()) reject("extra_body", "'extra_body' must be an object");
      extra_ = extra;
    }
  }

  const ordered_json& root() const { return root_; }

  const ordered_json* find(std::string_view name) const { return at(root_, name); }
  // Root first, then extra_body.
  const ordered_json* find_extended(std::string_view name) const {
    if (const ordered_json* value = at(root_, name)) return value;
    return extra_ ? at(*extra_, name) : nullptr;
  }

  std::optional<bool> boolean(std::string_view name, bool extended = false) const {
    const ordered_json* value = extended ? find_extended(name) : find(name);
    if (!value) return std::nullopt;
    if (!value->is_boolean()) reject(std::string(name), std::format("'{}' must be a boolean, not {}", name, type_name(*value)));
    return value->get<bool>();
  }

  std::optional<std::string> string(std::string_view name, bool extended = false) const {
    const ordered_json* value = extended ? find_extended(name) : find(name);
    if (!value) return std::nullopt;
    if (!value->is_string()) reject(std::string(name), std::format("'{}' must be a string, not {}", name, type_name(*value)));
    return value->get<std::string>();
  }

  // A number in [lo, hi] (or (lo, hi] when lo_open).
  std::optional<double> number(std::string_view name, double lo, double hi, bool lo_open = false) const {
    const ordered_json* value = find(name);
    if (!value) return std::nullopt;
    if (!value->is_number()) reject(std::string(name), std::format("'{}' must be a number, not {}", name, type_name(*value)));
    const double x = value->get<double>();
    if (!std::isfinite(x) || x > hi || (lo_open ? x <= lo : x < lo)) {
      reject(std::string(name), std::format("'{}' must be in {}{}, {}], got {}", name, lo_open ? "(" : "[", lo, hi, x));
    }
    return x;
  }

  // An integer in [lo, hi]; 3.0 counts as an integer, 3.5 does not.
  std::optional<std::int64_t> integer(std::string_view name, std::int64_t lo, std::int64_t hi) const {
    const ordered_json* value = find(name);
    if (!value) return std::nullopt;
    return to_integer(*value, std::string(name), lo, hi);
  }

  static std::int64_t to_integer(const ordered_json& value, const std::string& param, std::int64_t lo, std::int64_t hi) {
    std::int64_t n = 0;
    if (value.is_number_unsigned()) {
      const auto u = value.get<std::uint64_t>();
      n = u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? std::numeric_limits<std::int64_t>::max()
                                                                                  : static_cast<std::int64_t>(u);
    } else if (value.is_number_integer()) {
      n = value.get<std::int64_t>();
    } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
               value.get<double>() == std::trunc(value.get<double>()) && std::abs(value.get<double>()) < 9e18) {
      n = static_cast<std::int64_t>(value.get<double>());
    } else {
      reject(param, std::format("'{}' must be an integer, not {}", param, type_name(value)));
    }
    if (n < lo || n > hi) reject(param, std::format("'{}' must be in [{}, {}], got {}", param, lo, hi, n));
    return n;
  }

 private:
  static const ordered_json* at(const ordered_json& object, std::string_view name) {
    auto it = object.find(std::string(name));
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
  }

  const ordered_json& root_;
  const ordered_json* extra_ = nullptr;
};

// Runs a parser that rejects by throwing Rejection; returns its result or the error.
template <class F>
auto guarded(F&& parse) -> std::expected<decltype(parse()), ApiError> {
  try {
    return parse();
  } catch (const Rejection& rejection) {
    return std::unexpected(rejection.error);
  } catch (const ordered_json::exception& e) {
    // A type mismatch a rule above did not anticipate is still the client's malformed input.
    return std::unexpected(invalid_request(std::format("invalid request: {}", e.what())));
  }
}


}  // namespace prefixd::api::fields
