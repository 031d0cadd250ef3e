// prefixd api — the chat pipeline, once for every protocol: a parsed request (ChatRequest or
// CompletionRequest) becomes a prompt (prompt/), the control plane adjusts its cache options
// (control/), its output grammar constrains it (structured/), and the scheduler takes it; its
// reply is then collected whole or relayed as an event stream (stream_relay.h), its reasoning
// split off (reasoning/) and its tool calls parsed (tools/), and a reply that called tools goes
// to the next-turn prediction (next_turn.h).
//
// The protocol adapters (openai/chat_route.h, anthropic/messages_route.h,
// responses/responses_route.h) parse a body into a request, call start(), and write what
// collect() returns or what the relay's events become in their stream format; none of them
// submits to the scheduler. Must not know: HTTP (a request's stop check is a function) and the
// wire shape of any protocol.
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/chat/next_turn.h"
#include "api/chat_request.h"
#include "api/control/cache_control.h"
#include "api/errors.h"
#include "api/output.h"
#include "api/prompt/prompt_builder.h"
#include "api/reasoning/reasoning.h"
#include "api/stream_relay.h"
#include "api/structured/json_schema_grammar.h"
#include "api/tools/tool_call_stream.h"
#include "api/tools/tool_calls.h"
#include "engine/engine.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

// The answer to a request the scheduler refused: 503 when it is busy or stopping, else 400.
ApiError submit_error(scheduler::SubmitError error);

// What differs between protocols inside the pipeline (their wire shapes are the adapters').
struct ChatProtocol {
  ReplyEcho echo;  // how its clients send a reply that called tools back
  // When its stream sends a tool call: as the arguments are generated, or once they are complete.
  ToolCallStream::ArgumentDelivery streamed_calls = ToolCallStream::ArgumentDelivery::as_generated;
  // Where a streamed reply's calls for the next turn come from. false: the relay keeps the whole
  // reply and its calls are parsed again once it ended. true: the stream format reports the reply
  // it sent, call ids included, through PendingReply::reply_ended() (the Responses stream keeps
  // that reply for its stored response).
  bool format_reports_reply = false;
};

// What an adapter adds to a parsed request.
struct ChatAsk {
  std::string tenant;  // the caller's (auth/access.h)
  ChatProtocol protocol;
  // Prefixes the cache should keep ahead of LRU afterwards (Messages' cache_control breakpoints);
  // each is capped at the prompt's length.
  std::vector<cache::RetainAsk> retain;
};

// A reply that ran to its end, collected whole.
struct CollectedReply {
  ParsedAssistant parsed;  // the answer (content and tool calls) and the reasoning
  scheduler::StreamEvent done;
  std::vector<scheduler::GeneratedLogprobs> logprobs;
};

// Called with a reply that ended normally: its answer, tool calls and reasoning.
using ReplyEnded = std::function<void(const ParsedAssistant& reply)>;

// A request the scheduler took. Its reply is read once: by collect(), or by the relay stream()
// returns.
class PendingReply {
 public:
  std::size_t prompt_tokens() const { return prompt_tokens_; }
  // The request's sampling, streaming and usage fields. The parsed request itself is gone: its
  // prompt lives on in the scheduler, and its text need not stay in memory while it runs.
  const CommonParams& params() const { return params_; }

  // Waits for the whole reply, polling `should_stop`, then predicts the next turn. A generation
  // that failed or was stopped is the error to answer. Tool-call warnings are logged with `id`.
  std::expected<CollectedReply, ApiError> collect(const SseRelay::StopCheck& should_stop, std::string_view id);

  // The parser a stream format sends the reply's tool calls through, in the protocol's delivery;
  // nullopt when the reply may call none.
  std::optional<ToolCallStream> call_parser() const;
  // With ChatProtocol::format_reports_reply, the format calls this with the reply it sent once
  // the reply ended normally.
  ReplyEnded reply_ended() const;
  // The relay that sends the reply through `format`; it runs on the request's worker.
  std::shared_ptr<SseRelay> stream(SseRelay::StopCheck should_stop, std::unique_ptr<StreamFormat> format);

 private:
  friend class ChatService;
  PendingReply() = default;  // made by ChatService::start()

  // How the reply's tool calls are read: the template's syntax and the tools the request allows
  // (nullopt: none; the whole answer is content).
  struct Calls {
    ToolCallFormat format = ToolCallFormat::none;
    std::optional<nlohmann::ordered_json> tools;
    ParsedAssistant read(SplitReply split) const;
  };

  std::shared_ptr<scheduler::RequestStream> stream_;
  std::size_t prompt_tokens_ = 0;
  CommonParams params_;
  ChatProtocol protocol_;
  Calls calls_;
  std::optional<ReasoningSplitter> reasoning_;  // the template reasons (reasoning.h)
  std::chrono::milliseconds keep_alive_ = kKeepAliveInterval;  // a streamed reply's longest silence
  ReplyEnded next_turn_;  // empty unless the reply may call tools and the request uses the cache
};

class ChatService {
 public:
  // Every reference must outlive the service. While `stopping` is raised nothing is submitted.
  ChatService(const engine::Engine& engine, scheduler::Scheduler& scheduler, const PromptBuilder& prompts,
              const CacheControl& control, const std::atomic<bool>& stopping, GrammarLimits grammar_limits,
              std::chrono::milliseconds stream_keep_alive, std::string served_id);

  // Builds the request's prompt for `ask.tenant`, lets the control plane adjust it, constrains a
  // chat's reply with its output grammar (response_format, forced tool calls), drops the parsed
  // request and submits. Thread-safe.
  std::expected<PendingReply, ApiError> start(ChatRequest request, ChatAsk ask);
  std::expected<PendingReply, ApiError> start(CompletionRequest request, ChatAsk ask);

  // The generation request start() builds for `tenant` before its grammar: its prompt and cache
  // options (POST /v1/cache/chain hashes them without queuing anything).
  std::expected<scheduler::GenerationRequest, ApiError> prompt_of(const ChatRequest& request, const std::string& tenant) const;
  std::expected<scheduler::GenerationRequest, ApiError> prompt_of(const CompletionRequest& request,
                                                                  const std::string& tenant) const;

  // The fields every body and chunk of a new reply repeats, with a fresh id after `id_prefix`.
  ResponseMeta reply_meta(Endpoint endpoint, std::string_view id_prefix);

  const PromptBuilder& prompts() const { return prompts_; }
  const engine::Vocabulary& vocabulary() const { return engine_.vocab(); }
  const engine::ModelInfo& model() const { return engine_.model(); }
  std::int32_t max_prompt_tokens() const { return scheduler_.max_prompt_tokens(); }

 private:
  template <class Parsed>
  std::expected<PendingReply, ApiError> submit(Parsed request, ChatAsk ask);
  // The splitter of a reply's reasoning when the template reasons: the reply starts inside the
  // block when the prompt's end opened it.
  std::optional<ReasoningSplitter> reasoning_for(std::span<const engine::Token> prompt) const;

  const engine::Engine& engine_;
  scheduler::Scheduler& scheduler_;
  const PromptBuilder& prompts_;
  const CacheControl& control_;
  const std::atomic<bool>& stopping_;
  GrammarLimits grammar_limits_;
  std::chrono::milliseconds stream_keep_alive_;
  std::string served_id_;
  ToolCallFormat tool_format_;  // how the model's template writes a tool call (tool_calls.h)
  std::optional<ReasoningSyntax> reasoning_;  // where the template has the model think (reasoning.h)
  IdGenerator ids_;
  NextTurn next_turn_;
};

}  // namespace prefixd::api
