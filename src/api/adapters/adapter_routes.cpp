#include "api/adapters/adapter_routes.h"

#include <format>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "api/body/json_bounds.h"

namespace prefixd::api {
namespace {

nlohmann::ordered_json adapters_json(const AdapterTable& adapters) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::int32_t id = 0;
  for (const AdapterTable::Entry& e : adapters.list()) {
    out.push_back({{"id", id++}, {"path", e.info.path}, {"scale", e.scale}, {"name", e.info.name}});
  }
  return out;
}

std::expected<nlohmann::ordered_json, ApiError> parse_array_body(std::string_view body, std::size_t max_nodes) {
  if (auto refused = refuse_unbounded_json(body, max_nodes)) return std::unexpected(std::move(*refused));
  if (body.find('\0') != std::string_view::npos) {
    return std::unexpected(invalid_request("the request body is not valid JSON: it holds a NUL byte", "invalid_json"));
  }
  nlohmann::ordered_json root = nlohmann::ordered_json::parse(body, nullptr, false);
  if (root.is_discarded()) return std::unexpected(invalid_request("the request body is not valid JSON", "invalid_json"));
  if (!root.is_array()) {
    return std::unexpected(invalid_request("the request body must be a JSON array of {\"id\", \"scale\"} objects"));
  }
  return root;
}

}  // namespace

http::Response serve_lora_adapters(AdapterTable& adapters, const RouteContext& route, http::Request& req) {
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  if (req.method == "GET") return json_response(200, adapters_json(adapters).dump());
  if (auto admin = require_admin(*caller, "POST /lora-adapters"); !admin) return error_response(admin.error());
  const auto body = parse_array_body(req.body, route.parse.max_json_nodes);
  if (!body) return error_response(body.error());
  const auto choice = parse_adapter_choice(*body, "body");
  if (!choice) return error_response(choice.error());
  if (auto refused = adapters.set_scales(*choice, "body")) return error_response(*refused);
  std::string scales;
  for (const AdapterTable::Entry& e : adapters.list()) scales += std::format("{}{}={}", scales.empty() ? "" : ", ", e.info.name, e.scale);
  spdlog::info("LoRA adapter scales set: {}", scales.empty() ? "(no adapters)" : scales);
  return json_response(200, R"({"success":true})");
}

}  // namespace prefixd::api
