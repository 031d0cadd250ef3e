// prefixd api — POST /v1/messages and /v1/messages/count_tokens as an adapter over the chat
// service (chat/chat_service.h): the body becomes the same ChatRequest a chat completion does
// (anthropic_messages.h) and takes the same path to the scheduler; the reply goes out as a
// Messages body or event stream (anthropic_stream.h), and every error in Anthropic's shape.
#pragma once

#include "api/anthropic/anthropic_messages.h"
#include "api/chat/chat_service.h"
#include "api/route_support.h"
#include "http/server.h"

namespace prefixd::api {

http::Response serve_messages(ChatService& chats, const RouteContext& route, http::Request& req, MessagesRoute which);

}  // namespace prefixd::api
