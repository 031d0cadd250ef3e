#include "api/openai/chat_route.h"

#include <expected>
#include <utility>

#include "api/openai/request_parser.h"
#include "api/openai/responses.h"
#include "api/reply_answer.h"

namespace prefixd::api {
namespace {

// Chat Completions clients send a reply back as `content` and `tool_calls` with string
// arguments, without its reasoning; the stream sends a call's arguments as they are generated.
constexpr ChatProtocol kOpenAi{};

template <class Parsed>
http::Response serve(ChatService& chats, const RouteContext& route, const http::Request& req,
                     std::expected<Parsed, ApiError> parsed, Endpoint endpoint) {
  if (!parsed) return error_response(parsed.error());
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  auto pending = chats.start(std::move(*parsed), ChatAsk{.tenant = caller->tenant, .protocol = kOpenAi});
  if (!pending) return error_response(pending.error());
  const CommonParams& params = pending->params();
  ResponseMeta meta = chats.reply_meta(endpoint, endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-");
  meta.logprobs = params.logprobs >= 0;
  const std::string id = meta.id;
  return answer_reply(*pending, req, id,
                      ReplyShape{
                          // A reply that may call no tools has none, and its body is completion_body's.
                          .body = [&meta](const CollectedReply& reply) {
                            return tool_call_body(meta, reply.parsed, reply.done, reply.logprobs);
                          },
                          .stream_format = [&] {
                            return openai_stream_format(meta, params.include_usage, pending->call_parser());
                          },
                      });
}

}  // namespace

http::Response serve_chat_completion(ChatService& chats, const RouteContext& route, http::Request& req) {
  // A prompt that cannot fit is refused from the raw body, before it is parsed and copied.
  if (auto refused = chats.prompts().refuse_oversized_chat(req.body, chats.max_prompt_tokens())) {
    return error_response(*refused);
  }
  return serve(chats, route, req, parse_chat_request(release_body(req), route.parse), Endpoint::chat);
}

http::Response serve_completion(ChatService& chats, const RouteContext& route, http::Request& req) {
  if (auto refused = chats.prompts().refuse_oversized_completion(req.body, chats.max_prompt_tokens())) {
    return error_response(*refused);
  }
  return serve(chats, route, req, parse_completion_request(release_body(req), route.parse), Endpoint::completion);
}

}  // namespace prefixd::api
