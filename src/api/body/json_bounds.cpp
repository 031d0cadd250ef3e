#include "api/body/json_bounds.h"

#include <algorithm>
#include <format>
#include <limits>

#include "api/tools/json_scan.h"

namespace prefixd::api {

std::size_t json_node_limit_for_context(std::size_t context_tokens) {
  return std::max(kDefaultMaxJsonNodes, context_tokens + kJsonNodesBesideTokenPrompt);
}

// Every value but the root is an element of an array or a member of an object, and in a container
// of k elements k - 1 commas separate them. So the values are 1 + the commas + the containers with
// at least one element, all counted outside strings: no value needs to be recognized itself.
JsonShape json_shape(std::string_view text, std::size_t depth_limit, std::size_t node_limit) {
  JsonShape shape{.depth = 0, .nodes = 1};
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  bool just_opened = false;  // the last byte outside whitespace opened an array or object
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (is_json_space(c)) continue;
    if (just_opened) {
      just_opened = false;
      if (c != ']' && c != '}') ++shape.nodes;  // the container's first element
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      just_opened = true;
      shape.depth = std::max(shape.depth, ++depth);
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == ',') {
      ++shape.nodes;
    }
    if (shape.depth > depth_limit || shape.nodes > node_limit) break;
  }
  return shape;
}

std::size_t json_value_count(const nlohmann::ordered_json& value) {
  std::size_t count = 1;
  if (value.is_structured()) {
    for (const auto& element : value) count += json_value_count(element);
  }
  return count;
}

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  return json_shape(text, limit, std::numeric_limits<std::size_t>::max()).depth;
}

std::optional<ApiError> refuse_unbounded_json(std::string_view body, std::size_t max_nodes) {
  const JsonShape shape = json_shape(body, kMaxJsonDepth, max_nodes);
  if (shape.depth > kMaxJsonDepth) {
    return invalid_request(std::format("the request body nests arrays and objects deeper than {} levels", kMaxJsonDepth),
                           "json_too_deep");
  }
  if (shape.nodes > max_nodes) {
    return ApiError{.status = 413,
                    .message = std::format("the request body holds more than {} JSON values (objects, arrays, strings, "
                                           "numbers, literals), this server's limit (--max-json-nodes)",
                                           max_nodes),
                    .code = "json_too_many_nodes"};
  }
  return std::nullopt;
}

}  // namespace prefixd::api
