// prefixd api — the function tools a request defines, whichever wire protocol sent them.
//
// Every adapter applies the same checks (a name the chat template and the tool-call parsers can
// carry, defined once; parameters that are a JSON Schema object) and hands the prompt builder one
// shape, OpenAI's {"type": "function", "function": {...}}. The function object keeps every key the
// client sent besides the protocol's own envelope, so one tool list sent through Chat Completions,
// the Responses API or the Messages API renders to the same tokens and meets the same cache.
// Rejections throw fields::Rejection (see field_reader.h), naming the field in the caller's
// protocol.
#pragma once

#include <cstddef>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::api {

// OpenAI's limit on a function name; Anthropic allows 128.
inline constexpr std::size_t kMaxFunctionNameBytes = 64;

class FunctionTools {
 public:
  explicit FunctionTools(std::size_t max_name_bytes = kMaxFunctionNameBytes) : max_name_bytes_(max_name_bytes) {}

  // Adds one function. `function` holds "name" and whatever else the client sent with it
  // ("description", "parameters", "strict"...), in the client's key order. `name_field` and
  // `parameters_field` are where those two sit in the request, for the error message.
  void add(nlohmann::ordered_json function, const std::string& name_field, const std::string& parameters_field);

  bool empty() const { return tools_.empty(); }
  // {"type": "function", "function": {...}} per function, every key in the order the client sent
  // it: what the chat template renders (tojson keeps that order) and a grammar built from the
  // schemas follows.
  const nlohmann::ordered_json& tools() const { return tools_; }

 private:
  std::size_t max_name_bytes_;
  std::set<std::string, std::less<>> names_;
  nlohmann::ordered_json tools_ = nlohmann::ordered_json::array();
};

}  // namespace prefixd::api
