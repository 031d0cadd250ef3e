// prefixd api — a streamed Messages reply in Anthropic's event sequence: message_start, then per
// content block content_block_start, content_block_delta (text_delta, input_json_delta) and
// content_block_stop, then message_delta (stop reason, usage) and message_stop; ping once after
// the start; an `error` event when generation fails or the server stops the stream.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "api/anthropic/anthropic_messages.h"
#include "api/stream_relay.h"
#include "api/tools/tool_call_stream.h"

namespace prefixd::api {

// `tool_calls`: the parser of a reply that may call tools, in whole_call mode (a tool_use block
// is sent once its input is complete JSON). `breakpoint_tokens`: where the last cache_control
// breakpoint ends in the prompt (messages_usage).
std::unique_ptr<StreamFormat> anthropic_stream_format(ResponseMeta meta, std::optional<ToolCallStream> tool_calls,
                                                      std::optional<std::int32_t> breakpoint_tokens);

}  // namespace prefixd::api
