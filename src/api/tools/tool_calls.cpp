#include "api/tools/tool_calls.h"

#include <array>

#include "api/tools/tool_call_stream.h"

namespace prefixd::api {

ToolCallFormat detect_tool_call_format(std::string_view source) {
  const auto has = [source](std::string_view text) { return source.find(text) != std::string_view::npos; };
  if (has("[TOOL_CALLS]") || has("[AVAILABLE_TOOLS]")) return ToolCallFormat::mistral;
  if (has("<tool_call>")) return ToolCallFormat::hermes;
  if (has("<|python_tag|>")) return ToolCallFormat::llama3;
  if (has("<|start_header_id|>") && (has("ipython") || has("\"parameters\""))) return ToolCallFormat::llama3;
  return ToolCallFormat::none;
}

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::hermes:
      return "hermes";
    case ToolCallFormat::llama3:
      return "llama3";
    case ToolCallFormat::mistral:
      return "mistral";
    case ToolCallFormat::none:
      break;
  }
  return "none";
}

ToolCallIdGenerator::ToolCallIdGenerator() : random_(std::random_device{}()) {}
ToolCallIdGenerator::ToolCallIdGenerator(std::uint64_t seed) : random_(seed) {}

std::string ToolCallIdGenerator::next() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[random_() % kAlphabet.size()];  // bias < 1e-17
  return id;
}

std::vector<std::string> tool_names(const nlohmann::ordered_json& tools) {
  std::vector<std::string> names;
  if (!tools.is_array()) return names;
  for (const nlohmann::ordered_json& tool : tools) {
    if (!tool.is_object()) continue;
    const auto function = tool.find("function");
    const nlohmann::ordered_json& holder = function != tool.end() && function->is_object() ? *function : tool;
    const auto name = holder.find("name");
    if (name != holder.end() && name->is_string()) names.push_back(name->get<std::string>());
  }
  return names;
}

ParsedAssistant parse_tool_calls(std::string_view output, ToolCallFormat format, const nlohmann::ordered_json& tools,
                                 ToolCallIdGenerator ids) {
  ParsedAssistant parsed;
  if (format == ToolCallFormat::none) {
    parsed.content = output;
    return parsed;
  }
  ToolCallStream stream(format, tools, std::move(ids), ToolCallStream::ArgumentDelivery::whole_call);
  std::vector<AssistantDelta> deltas = stream.feed(output);
  ToolCallStreamEnd end = stream.finish();
  deltas.insert(deltas.end(), end.deltas.begin(), end.deltas.end());
  for (const AssistantDelta& delta : deltas) {
    if (!delta.tool_call) {
      parsed.content += delta.content;
      continue;
    }
    const ToolCallDelta& call = *delta.tool_call;
    if (call.index == parsed.tool_calls.size()) parsed.tool_calls.push_back({.id = call.id.value_or(""), .name = call.name.value_or("")});
    parsed.tool_calls[call.index].arguments += call.arguments;
  }
  parsed.warnings = std::move(end.warnings);
  return parsed;
}

std::string canonical_arguments(std::string_view arguments_json) {
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(arguments_json, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::string(arguments_json);
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ToolCall& call : calls) {
    out.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return out;
}

}  // namespace prefixd::api
