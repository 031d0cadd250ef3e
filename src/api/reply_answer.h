// prefixd api — the one way a protocol adapter ends a request the chat service took: the whole
// reply collected into the protocol's body, or relayed as its event stream, with the request's
// stop check (a client gone, the server stopping) in both. The adapters differ only in the body,
// the stream format and the error shape they hand over.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/chat/chat_service.h"
#include "api/errors.h"
#include "api/stream_relay.h"
#include "http/server.h"

namespace prefixd::api {

struct ReplyShape {
  // The body of a reply that was collected whole (`stream` false).
  std::function<nlohmann::ordered_json(const CollectedReply& reply)> body;
  // The format that writes a streamed reply's events (`stream` true).
  std::function<std::unique_ptr<StreamFormat>()> stream_format;
  // The protocol's error answer; empty: OpenAI's (error_response).
  std::function<http::Response(const ApiError& error)> fail;
};

// The request outlives every use of its stop check: the transport keeps it until the response,
// streamed or not, is written. `id`: the reply's, for the log lines about its tool calls.
http::Response answer_reply(PendingReply& pending, const http::Request& req, std::string_view id, ReplyShape shape);

}  // namespace prefixd::api
