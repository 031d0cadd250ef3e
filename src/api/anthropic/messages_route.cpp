#include "api/anthropic/messages_route.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "api/anthropic/anthropic_stream.h"
#include "api/openai/responses.h"
#include "api/reply_answer.h"

namespace prefixd::api {
namespace {

// Anthropic clients send a reply's tool_use input back as objects, which the parser renders as
// compact JSON, and resend its thinking blocks; the stream sends a tool_use block once its input
// is complete JSON.
constexpr ChatProtocol kMessages{.echo = {.compact_arguments = true, .with_reasoning = true},
                                 .streamed_calls = ToolCallStream::ArgumentDelivery::whole_call};

http::Response fail(const ApiError& error) { return json_response(error.status, dump_json(anthropic_error_json(error))); }

// Where the conversation's first `messages` end in its prompt: the tokens of those messages
// rendered alone (a prefix of the whole prompt's). nullopt without a breakpoint, or when the
// breakpoint covers only tools (no message to render). All of them: the largest int32, which
// the caller caps at the prompt's length.
std::optional<std::int32_t> breakpoint_tokens(const ChatService& chats, const ChatRequest& chat,
                                              std::optional<std::size_t> messages) {
  if (!messages || *messages == 0) return std::nullopt;
  if (*messages >= chat.chat.messages.size()) return std::numeric_limits<std::int32_t>::max();
  ChatRequest head = chat;
  head.chat.messages = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < *messages; ++i) head.chat.messages.push_back(chat.chat.messages[i]);
  head.chat.add_generation_prompt = false;
  auto tokens = chats.prompts().chat_tokens(head, chats.max_prompt_tokens());
  if (!tokens) return std::nullopt;
  return static_cast<std::int32_t>(tokens->size());
}

}  // namespace

http::Response serve_messages(ChatService& chats, const RouteContext& route, http::Request& req, MessagesRoute which) {
  if (auto refused = chats.prompts().refuse_oversized_chat(req.body, chats.max_prompt_tokens())) return fail(*refused);
  auto parsed = parse_messages_request(release_body(req), route.parse, which);
  if (!parsed) return fail(parsed.error());
  const auto caller = route.caller(req);
  if (!caller) return fail(caller.error());
  ChatRequest& chat = parsed->chat;
  if (which == MessagesRoute::count_tokens) {
    auto tokens = chats.prompts().chat_tokens(chat, chats.max_prompt_tokens());
    if (!tokens) return fail(tokens.error());
    return json_response(200, dump_json(nlohmann::ordered_json{{"input_tokens", tokens->size()}}));
  }
  // Each breakpoint's prefix in tokens: for the usage split (the last one), and what the cache
  // keeps for the breakpoint's TTL.
  std::optional<std::int32_t> breakpoint = breakpoint_tokens(chats, chat, parsed->breakpoint_messages);
  std::vector<cache::RetainAsk> retain;
  for (const CacheBreakpoint& b : parsed->retained) {
    const auto length = b.messages == parsed->breakpoint_messages ? breakpoint : breakpoint_tokens(chats, chat, b.messages);
    if (length) retain.push_back({.length = *length, .duration = b.ttl});
  }
  auto pending = chats.start(std::move(chat), ChatAsk{.tenant = caller->tenant, .protocol = kMessages, .retain = std::move(retain)});
  if (!pending) return fail(pending.error());
  if (breakpoint) breakpoint = std::min(*breakpoint, static_cast<std::int32_t>(pending->prompt_tokens()));
  ResponseMeta meta = chats.reply_meta(Endpoint::chat, "msg_");
  const std::string id = meta.id;
  return answer_reply(*pending, req, id,
                      ReplyShape{
                          .body = [&](const CollectedReply& reply) {
                            return messages_body(meta, reply.parsed, reply.done, messages_usage(reply.done.usage, breakpoint));
                          },
                          .stream_format = [&] { return anthropic_stream_format(meta, pending->call_parser(), breakpoint); },
                          .fail = fail,
                      });
}

}  // namespace prefixd::api
