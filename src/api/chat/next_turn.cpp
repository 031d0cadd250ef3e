#include "api/chat/next_turn.h"

#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "api/output.h"

namespace prefixd::api {

NextTurn::NextTurn(const PromptBuilder& prompts, const CacheControl& control, scheduler::Scheduler& scheduler,
                   const std::atomic<bool>& stopping)
    : prompts_(prompts), control_(control), scheduler_(scheduler), stopping_(stopping) {}

void NextTurn::queue(const ChatRequest& request, const ParsedAssistant& reply, const std::string& tenant,
                     ReplyEcho echo) const {
  if (reply.tool_calls.empty() || stopping_) return;
  ChatRequest next = request;
  nlohmann::ordered_json message{{"role", "assistant"},
                                 {"content", reply.content.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(reply.content)}};
  if (echo.with_reasoning && !reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
  std::vector<ToolCall> calls = reply.tool_calls;
  if (echo.compact_arguments) {
    for (ToolCall& call : calls) call.arguments = canonical_arguments(call.arguments);
  }
  message["tool_calls"] = nlohmann::ordered_json::parse(dump_json(tool_calls_json(calls)));
  next.chat.messages.push_back(std::move(message));
  next.chat.add_generation_prompt = false;
  auto warm = prompts_.build(next, scheduler_.max_prompt_tokens(), tenant);
  if (!warm) {
    spdlog::debug("tool-call turn not cached for the next turn: {}", warm.error().message);
    return;
  }
  control_.adjust(*warm, tenant, request.params.cache.session_key);
  warm->prefill_only = true;
  warm->max_tokens = 1;
  warm->sampling = {};
  warm->cache.continuation.clear();
  // Not waited for: the scheduler runs it like any request; its stream is simply not read.
  if (auto queued = scheduler_.submit(std::move(*warm)); !queued) {
    spdlog::debug("tool-call turn not cached for the next turn: {}", scheduler::submit_error_message(queued.error()));
  }
}

}  // namespace prefixd::api
