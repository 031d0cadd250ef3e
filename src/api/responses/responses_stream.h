// prefixd api — a streamed Responses API reply: response.created and response.in_progress, then
// per output item response.output_item.added, for a message response.content_part.added,
// response.output_text.delta ... response.output_text.done and response.content_part.done, for a
// function call response.function_call_arguments.delta and .done, then response.output_item.done;
// the end is response.completed (or response.incomplete at max_output_tokens), with the whole
// response object. Every event carries a sequence_number. A failure is an `error` event.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "api/responses/responses_api.h"
#include "api/stream_relay.h"
#include "api/tools/tool_call_stream.h"

namespace prefixd::api {

// Called once with the final response object and the reply it holds (text and calls with the
// ids the client saw), when the reply ended normally.
using ResponseCompleted = std::function<void(const nlohmann::ordered_json& response, const ParsedAssistant& reply)>;

// `tool_calls`: the parser of a reply that may call functions, in whole_call mode.
std::unique_ptr<StreamFormat> responses_stream_format(ResponseMeta meta, ResponsesRequest request,
                                                      std::optional<ToolCallStream> tool_calls, ResponseCompleted completed);

}  // namespace prefixd::api
