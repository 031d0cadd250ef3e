// prefixd api — POST /v1/responses as an adapter over the chat service (chat/chat_service.h),
// and GET and DELETE /v1/responses/{id} over the response store: the input items, after the
// previous response's conversation when the request names one, become the same ChatRequest a
// chat completion does (responses_api.h); the reply goes out as a response object or its event
// stream (responses_stream.h) and, with `store`, is kept for the tenant (response_store.h).
#pragma once

#include <string>

#include "api/chat/chat_service.h"
#include "api/responses/response_store.h"
#include "api/route_support.h"
#include "http/server.h"

namespace prefixd::api {

// The response store, and whether a reply asked to be stored is kept in it
// (--response-store-bytes 0: never).
struct StoredResponses {
  ResponseStore& store;
  bool keeps = true;
};

http::Response serve_responses(ChatService& chats, const RouteContext& route, StoredResponses stored, http::Request& req);

// GET (`erase` false) or DELETE /v1/responses/{id}: the caller's tenant's stored responses only.
http::Response stored_response(const RouteContext& route, ResponseStore& store, const http::Request& req,
                               const std::string& id, bool erase);

}  // namespace prefixd::api
