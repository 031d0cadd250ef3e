#include "bench/next_turn.h"

namespace prefixd::bench {

nlohmann::json through_reply(const nlohmann::json& sent, const nlohmann::json& tool_calls, const std::string& text) {
  nlohmann::json messages = sent;
  if (tool_calls.is_array() && !tool_calls.empty()) {
    messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", tool_calls}});
  } else {
    messages.push_back({{"role", "assistant"}, {"content", text}});
  }
  return messages;
}

nlohmann::json next_turn_messages(const nlohmann::json& sent, const nlohmann::json& tool_calls, const std::string& text,
                                  const std::string& result) {
  nlohmann::json messages = through_reply(sent, tool_calls, text);
  if (tool_calls.is_array() && !tool_calls.empty()) {
    for (const auto& call : tool_calls) {
      messages.push_back({{"role", "tool"}, {"tool_call_id", call.value("id", "")}, {"content", result}});
    }
  } else {
    messages.push_back({{"role", "user"}, {"content", result}});
  }
  return messages;
}

std::int64_t conversation_tokens(const BenchClient& client, const nlohmann::json& messages, const nlohmann::json& tools) {
  nlohmann::json body = {{"messages", messages}, {"add_generation_prompt", false}};
  if (!tools.is_null()) body["tools"] = tools;
  const HttpReply reply = client.post_raw("/tokenize", body.dump(), "application/json");
  if (reply.status != 200) return -1;
  const auto parsed = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  // A server that ignores `messages` may answer with no tokens: that is no count either.
  if (parsed.is_discarded() || !parsed.contains("tokens") || !parsed["tokens"].is_array() || parsed["tokens"].empty()) {
    return -1;
  }
  return static_cast<std::int64_t>(parsed["tokens"].size());
}

}  // namespace prefixd::bench
