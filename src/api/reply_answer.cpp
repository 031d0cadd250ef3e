#include "api/reply_answer.h"

#include <utility>

#include "api/output.h"
#include "api/route_support.h"

namespace prefixd::api {

http::Response answer_reply(PendingReply& pending, const http::Request& req, std::string_view id, ReplyShape shape) {
  auto should_stop = [&req] { return stop_reason(req); };
  if (!pending.params().stream) {
    auto reply = pending.collect(should_stop, id);
    if (!reply) return shape.fail ? shape.fail(reply.error()) : error_response(reply.error());
    return json_response(200, dump_json(shape.body(*reply)));
  }
  return event_stream(pending.stream(std::move(should_stop), shape.stream_format()));
}

}  // namespace prefixd::api
