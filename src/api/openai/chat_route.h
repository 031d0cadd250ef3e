// prefixd api — POST /v1/chat/completions and /v1/completions (and the same paths without /v1)
// as adapters over the chat service (chat/chat_service.h): a body surely too long is refused
// before it is parsed (request_parser.h), the service runs the request, and the reply goes out
// as OpenAI's body or chunks (responses.h, stream_relay.h).
#pragma once

#include "api/chat/chat_service.h"
#include "api/route_support.h"
#include "http/server.h"

namespace prefixd::api {

http::Response serve_chat_completion(ChatService& chats, const RouteContext& route, http::Request& req);
http::Response serve_completion(ChatService& chats, const RouteContext& route, http::Request& req);

}  // namespace prefixd::api
