// prefixd api — next-turn prediction, the API's owner of it: a reply that called tools,
// re-rendered as the client's next request will send it back and queued prefill-only, so that the
// agent's next turn finds the reply's K/V cached and feeds only the tool results and their
// scaffolding.
//
// Why: an agent's next turn sends the reply back as an assistant message with `tool_calls`. The
// tokens the model sampled are seldom the tokens that message renders to (a sampled token
// sequence is not the tokenizer's own spelling of the same text), so the reply's K/V would not
// match. The conversation with the reply as the template renders it is therefore prefilled off
// the request path (the prompt is cached, only the reply and its end of turn are fed).
//
// The other half of the prediction is GenerationRequest.cache.continuation (scheduler/request.h):
// the end of turn the template renders after a reply, computed with every chat prompt by the
// prompt builder's turn layout (src/api/prompt/turn_layout.cpp). The scheduler's warm-up
// (src/scheduler/scheduler_warmup.cpp) only executes it: after a reply the client sends back
// verbatim it feeds those tokens. A turn queued here clears its continuation: its prompt already
// holds the reply's end of turn, and it samples no reply for a warm-up to follow.
#pragma once

#include <atomic>
#include <string>

#include "api/chat_request.h"
#include "api/control/cache_control.h"
#include "api/prompt/prompt_builder.h"
#include "api/tools/tool_calls.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

// How a protocol's clients send a reply that called tools back on their next turn: what the
// predicted turn must hold for its tokens to be the ones the next request renders.
struct ReplyEcho {
  // The calls come back as objects (Anthropic's tool_use input), which the protocol's parser
  // renders as compact JSON, so the predicted turn holds the arguments compact too.
  bool compact_arguments = false;
  // The reply comes back with its reasoning (Anthropic clients resend thinking blocks; a
  // previous_response_id continuation keeps it); Chat Completions clients send content alone.
  bool with_reasoning = false;
};

class NextTurn {
 public:
  // Every argument must outlive this object. While `stopping` is raised nothing is queued.
  NextTurn(const PromptBuilder& prompts, const CacheControl& control, scheduler::Scheduler& scheduler,
           const std::atomic<bool>& stopping);

  // Queues `request` with `reply` appended as its client echoes it, prefill-only, for `tenant`.
  // Not waited for: the scheduler runs it like any request and its stream is never read. Does
  // nothing when the reply called no tools; a turn that cannot be built or queued is dropped
  // with a debug line.
  void queue(const ChatRequest& request, const ParsedAssistant& reply, const std::string& tenant, ReplyEcho echo) const;

 private:
  const PromptBuilder& prompts_;
  const CacheControl& control_;
  scheduler::Scheduler& scheduler_;
  const std::atomic<bool>& stopping_;
};

}  // namespace prefixd::api
