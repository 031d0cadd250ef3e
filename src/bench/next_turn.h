// prefixd bench — the next turn of an agent loop, built from the server's own reply: what the
// client sends back is what the server answered, so a server that caches the turn as it will be
// rendered next can be measured doing so.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/client.h"

namespace prefixd::bench {

// The conversation through the assistant's reply: `sent` (the earlier turn's messages as sent),
// then the reply as an assistant message: content null and its `tool_calls` when it made calls,
// else its text as content.
nlohmann::json through_reply(const nlohmann::json& sent, const nlohmann::json& tool_calls, const std::string& text);

// through_reply, then one tool message per call (its id, `result` as content); a reply without
// calls gets `result` back as a user message, so the loop goes on either way.
nlohmann::json next_turn_messages(const nlohmann::json& sent, const nlohmann::json& tool_calls, const std::string& text,
                                  const std::string& result);

// The tokens of `messages` rendered without a generation prompt (POST /tokenize with messages and
// tools, as prefixd takes it); -1 when the server cannot count a conversation (llama-server's
// /tokenize takes text only).
std::int64_t conversation_tokens(const BenchClient& client, const nlohmann::json& messages, const nlohmann::json& tools);

}  // namespace prefixd::bench
