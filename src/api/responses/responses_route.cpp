#include "api/responses/responses_route.h"

#include <format>
#include <utility>

#include "api/body/field_reader.h"
#include "api/openai/responses.h"
#include "api/reply_answer.h"
#include "api/responses/responses_api.h"
#include "api/responses/responses_stream.h"

namespace prefixd::api {
namespace {

// A previous_response_id continuation renders the stored reply, reasoning included, with the
// call ids the client saw: the stream format reports the reply it sent. Calls are streamed once
// their arguments are complete.
constexpr ChatProtocol kResponses{.echo = {.compact_arguments = false, .with_reasoning = true},
                                  .streamed_calls = ToolCallStream::ArgumentDelivery::whole_call,
                                  .format_reports_reply = true};

}  // namespace

http::Response serve_responses(ChatService& chats, const RouteContext& route, StoredResponses stored, http::Request& req) {
  if (auto refused = chats.prompts().refuse_oversized_chat(req.body, chats.max_prompt_tokens())) return error_response(*refused);
  auto parsed = parse_responses_request(release_body(req), route.parse);
  if (!parsed) return error_response(parsed.error());
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  nlohmann::ordered_json history = nlohmann::ordered_json::array();
  std::vector<ImageInput> media;  // the history's images and clips, then this request's
  if (parsed->previous_response_id) {
    auto previous = stored.store.find(caller->tenant, *parsed->previous_response_id);
    if (!previous) {
      return error_response(ApiError{.status = 404,
                                     .message = std::format("no stored response '{}' (never stored, deleted, or expired)",
                                                            *parsed->previous_response_id),
                                     .param = "previous_response_id", .code = "previous_response_not_found"});
    }
    history = std::move(previous->conversation);
    media = std::move(previous->media);
  }
  // The markers in the input's text must be its own media's, whatever the history holds.
  if (!media.empty() || !parsed->chat.images.empty()) {
    try {
      check_image_markers(parsed->chat.chat.messages, parsed->chat.images.size(), "input");
    } catch (const fields::Rejection& rejection) {
      return error_response(rejection.error);
    }
  }
  for (ImageInput& image : parsed->chat.images) media.push_back(std::move(image));
  // What the stored conversation continues with: the history and this request's input items.
  nlohmann::ordered_json conversation = history;
  for (const nlohmann::ordered_json& m : parsed->chat.chat.messages) conversation.push_back(m);
  ChatRequest chat = parsed->chat;
  chat.chat.messages = conversation_of(*parsed, history);
  chat.images = media;
  auto pending = chats.start(std::move(chat), ChatAsk{.tenant = caller->tenant, .protocol = kResponses});
  if (!pending) return error_response(pending.error());
  ResponseMeta meta = chats.reply_meta(Endpoint::chat, "resp_");
  // Keeps the reply (when `store`); called once the reply ended normally.
  auto keep = [stored, store = parsed->store, id = meta.id, tenant = caller->tenant,
               conversation = std::move(conversation), media = std::move(media)](const nlohmann::ordered_json& response, const ParsedAssistant& reply) {
    if (store && stored.keeps) {
      nlohmann::ordered_json kept = conversation;
      kept.push_back(reply_message(reply));
      stored.store.put(tenant, id, StoredResponse{.object = response, .conversation = std::move(kept), .media = media});
    }
  };
  const std::string id = meta.id;
  return answer_reply(
      *pending, req, id,
      ReplyShape{
          .body = [&](const CollectedReply& reply) {
            nlohmann::ordered_json response = response_object(meta, *parsed, response_output(meta.id, reply.parsed), reply.done);
            keep(response, reply.parsed);
            return response;
          },
          .stream_format = [&] {
            // The stream's reply, with the call ids the client saw, is kept and predicts the next turn.
            ResponseCompleted completed = [keep = std::move(keep), ended = pending->reply_ended()](
                                              const nlohmann::ordered_json& response, const ParsedAssistant& reply) {
              keep(response, reply);
              ended(reply);
            };
            return responses_stream_format(std::move(meta), std::move(*parsed), pending->call_parser(), std::move(completed));
          },
      });
}

http::Response stored_response(const RouteContext& route, ResponseStore& store, const http::Request& req,
                               const std::string& id, bool erase) {
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  const ApiError missing{.status = 404, .message = std::format("no stored response '{}'", id), .code = "response_not_found"};
  if (erase) {
    if (!store.erase(caller->tenant, id)) return error_response(missing);
    return json_response(200, dump_json(nlohmann::ordered_json{{"id", id}, {"object", "response"}, {"deleted", true}}));
  }
  auto found = store.find(caller->tenant, id);
  if (!found) return error_response(missing);
  return json_response(200, dump_json(found->object));
}

}  // namespace prefixd::api
