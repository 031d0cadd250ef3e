#include "api/errors.h"

#include <format>
#include <utility>

namespace prefixd::api {

nlohmann::json ApiError::to_json() const {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

ApiError invalid_param(std::string param, std::string message) {
  return ApiError{.status = 400, .message = std::move(message), .param = std::move(param)};
}

ApiError invalid_request(std::string message, std::string code) {
  return ApiError{.status = 400, .message = std::move(message), .code = std::move(code)};
}

ApiError model_not_found(const std::string& requested) {
  return ApiError{.status = 404,
                  .message = std::format("The model '{}' does not exist", requested),
                  .param = "model",
                  .code = "model_not_found"};
}

ApiError context_length_exceeded(std::size_t prompt_tokens, std::size_t limit) {
  return ApiError{.status = 400,
                  .message = std::format("The prompt has {} tokens, more than the {} this server can admit",
                                         prompt_tokens, limit),
                  .param = "messages",
                  .code = "context_length_exceeded"};
}

ApiError context_length_exceeded_at_least(std::size_t min_tokens, std::size_t limit) {
  ApiError error = context_length_exceeded(min_tokens, limit);
  error.message = std::format("The prompt has at least {} tokens, more than the {} this server can admit", min_tokens, limit);
  return error;
}

ApiError unauthorized() {
  return ApiError{.status = 401,
                  .message = "Missing or invalid API key (send 'Authorization: Bearer <key>')",
                  .type = "authentication_error",
                  .code = "invalid_api_key"};
}

ApiError forbidden(std::string message) {
  return ApiError{.status = 403, .message = std::move(message), .type = "permission_error", .code = "forbidden"};
}

ApiError server_busy(std::string message) {
  return ApiError{.status = 503, .message = std::move(message), .type = "server_error", .code = "server_busy"};
}

ApiError internal_error(std::string message) {
  return ApiError{.status = 500, .message = std::move(message), .type = "server_error"};
}

ApiError server_shutting_down() {
  return ApiError{.status = 503, .message = "the server is shutting down", .type = "server_error",
                  .code = "server_shutting_down"};
}

}  // namespace prefixd::api
