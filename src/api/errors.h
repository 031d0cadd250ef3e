// prefixd api — the one error type every request path returns, in OpenAI's wire shape.
//
// Handlers never throw to report a bad request: parsers and builders return
// std::expected<T, ApiError>, and the HTTP layer turns an ApiError into a status and
// {"error": {...}}. Exceptions are reserved for bugs; the handler boundary maps them to 500.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::api {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty: none
  std::string code;   // machine-readable reason; empty: none

  // {"error": {"message", "type", "param", "code"}} with null for an empty param or code.
  nlohmann::json to_json() const;
};

// A field has the wrong type or an out-of-range value (400).
ApiError invalid_param(std::string param, std::string message);
// The request is well-formed JSON but cannot be served as asked (400).
ApiError invalid_request(std::string message, std::string code = {});
ApiError model_not_found(const std::string& requested);                          // 404
ApiError context_length_exceeded(std::size_t prompt_tokens, std::size_t limit);  // 400
// The prompt was refused from its length before it was tokenized whole: it has at least
// `min_tokens` (400, context_length_exceeded).
ApiError context_length_exceeded_at_least(std::size_t min_tokens, std::size_t limit);
ApiError unauthorized();                                                          // 401
ApiError forbidden(std::string message);                                          // 403
ApiError server_busy(std::string message);                                        // 503
ApiError internal_error(std::string message);                                     // 500
ApiError server_shutting_down();  // 503: the server stopped taking work (a drain or shutdown)

}  // namespace prefixd::api
