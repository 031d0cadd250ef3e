#include "api/chat/chat_service.h"

#include <format>
#include <algorithm>
#include <type_traits>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/structured/output_grammar.h"

namespace prefixd::api {
namespace {

// Prompt tokens read back to decide whether the template opened a reasoning block at the end.
constexpr std::size_t kReasoningTailTokens = 16;

SplitReply split_reply(std::optional<ReasoningSplitter> splitter, std::string text) {
  if (!splitter) return SplitReply{.reasoning = {}, .content = std::move(text)};
  return split_whole(std::move(*splitter), text);
}

}  // namespace

ApiError submit_error(scheduler::SubmitError error) {
  const std::string message = scheduler::submit_error_message(error);
  switch (error) {
    case scheduler::SubmitError::queue_full: return server_busy(message);
    case scheduler::SubmitError::shutting_down: return server_busy(message);
    case scheduler::SubmitError::prompt_too_long:
      return ApiError{.status = 400, .message = message, .code = "context_length_exceeded"};
    case scheduler::SubmitError::empty_prompt: return invalid_request(message);
  }
  return internal_error(message);
}

ParsedAssistant PendingReply::Calls::read(SplitReply split) const {
  ParsedAssistant parsed;
  if (tools) {
    parsed = parse_tool_calls(split.content, format, *tools);
  } else {
    parsed.content = std::move(split.content);
  }
  parsed.reasoning = std::move(split.reasoning);
  return parsed;
}

std::expected<CollectedReply, ApiError> PendingReply::collect(const SseRelay::StopCheck& should_stop, std::string_view id) {
  auto collected = collect_completion(*stream_, [&should_stop] { return should_stop().has_value(); });
  switch (collected.done.finish) {
    case scheduler::FinishReason::error:
      return std::unexpected(internal_error(collected.done.error.empty() ? "generation failed" : collected.done.error));
    case scheduler::FinishReason::cancelled:
      return std::unexpected(should_stop().value_or(server_busy("the request was cancelled")));
    default: break;
  }
  CollectedReply reply{.parsed = calls_.read(split_reply(std::move(reasoning_), std::move(collected.text))),
                       .done = std::move(collected.done),
                       .logprobs = std::move(collected.logprobs)};
  for (const std::string& warning : reply.parsed.warnings) spdlog::warn("{}: tool call: {}", id, warning);
  if (next_turn_) next_turn_(reply.parsed);
  return reply;
}

std::optional<ToolCallStream> PendingReply::call_parser() const {
  if (!calls_.tools) return std::nullopt;
  return ToolCallStream(calls_.format, *calls_.tools, ToolCallIdGenerator{}, protocol_.streamed_calls);
}

ReplyEnded PendingReply::reply_ended() const {
  return [next_turn = next_turn_](const ParsedAssistant& reply) {
    if (next_turn) next_turn(reply);
  };
}

std::shared_ptr<SseRelay> PendingReply::stream(SseRelay::StopCheck should_stop, std::unique_ptr<StreamFormat> format) {
  SseRelay::ReplyDone after_reply;  // set, the relay keeps the whole reply for it
  if (next_turn_ && !protocol_.format_reports_reply) {
    after_reply = [calls = calls_, next_turn = next_turn_](const SplitReply& reply) { next_turn(calls.read(reply)); };
  }
  return std::make_shared<SseRelay>(std::move(stream_), std::move(format), std::move(should_stop), std::move(after_reply),
                                    std::move(reasoning_), RelayOptions{.progress = params_.return_progress, .keep_alive = keep_alive_});
}

ChatService::ChatService(const engine::Engine& engine, scheduler::Scheduler& scheduler, const PromptBuilder& prompts,
                         const CacheControl& control, const std::atomic<bool>& stopping, GrammarLimits grammar_limits,
                         std::chrono::milliseconds stream_keep_alive, std::string served_id)
    : engine_(engine),
      scheduler_(scheduler),
      prompts_(prompts),
      control_(control),
      stopping_(stopping),
      grammar_limits_(grammar_limits),
      stream_keep_alive_(stream_keep_alive),
      served_id_(std::move(served_id)),
      tool_format_(detect_tool_call_format(prompts_.chat_template().source())),
      reasoning_(reasoning_syntax(prompts_.chat_template().source())),
      next_turn_(prompts_, control_, scheduler_, stopping_) {
  spdlog::info("tool calls: the chat template writes them as {}", tool_call_format_name(tool_format_));
  if (reasoning_) spdlog::info("reasoning: the chat template has the model think between {} and {}", reasoning_->open, reasoning_->close);
}

std::expected<scheduler::GenerationRequest, ApiError> ChatService::prompt_of(const ChatRequest& request,
                                                                             const std::string& tenant) const {
  auto generation = prompts_.build(request, scheduler_.max_prompt_tokens(), tenant);
  if (generation && generation->cache.enabled) control_.adjust(*generation, tenant, request.params.cache.session_key);
  return generation;
}

std::expected<scheduler::GenerationRequest, ApiError> ChatService::prompt_of(const CompletionRequest& request,
                                                                             const std::string& tenant) const {
  auto generation = prompts_.build(request, scheduler_.max_prompt_tokens(), tenant);
  if (generation && generation->cache.enabled) control_.adjust(*generation, tenant, request.params.cache.session_key);
  return generation;
}

ResponseMeta ChatService::reply_meta(Endpoint endpoint, std::string_view id_prefix) {
  return ResponseMeta{.endpoint = endpoint, .id = ids_.next(id_prefix), .created = unix_seconds(), .model = served_id_};
}

template <class Parsed>
std::expected<PendingReply, ApiError> ChatService::submit(Parsed request, ChatAsk ask) {
  // An embedding or reranking server's context computes no logits.
  if (engine_.model().embeddings) {
    return std::unexpected(invalid_request(std::format(
        "this server computes {} (started with --{}): it generates no text; POST {}",
        engine_.model().pooling == engine::Pooling::rank ? "rerank scores" : "embeddings",
        engine_.model().pooling == engine::Pooling::rank ? "reranking" : "embeddings",
        engine_.model().pooling == engine::Pooling::rank ? "/v1/rerank" : "/v1/embeddings"), "generation_not_enabled"));
  }
  auto generation = prompt_of(request, ask.tenant);
  if (!generation) return std::unexpected(generation.error());
  for (cache::RetainAsk& retain : ask.retain) {
    retain.length = std::min(retain.length, static_cast<std::int32_t>(generation->prompt.size()));
  }
  generation->cache.retain = std::move(ask.retain);
  PendingReply pending;
  pending.prompt_tokens_ = generation->prompt.size();
  pending.protocol_ = ask.protocol;
  pending.keep_alive_ = stream_keep_alive_;
  pending.calls_.format = tool_format_;
  if constexpr (std::is_same_v<Parsed, ChatRequest>) {
    pending.reasoning_ = reasoning_for(generation->prompt);
    // The tools the reply may call, when the template has a call syntax and tool_choice allows.
    if (tool_format_ != ToolCallFormat::none && request.tools.is_array() && request.tool_choice != "none") {
      pending.calls_.tools = request.tools;
      // The one place a reply reaches the next-turn prediction: collect(), the relay's end of a
      // streamed reply, or the format that reports the reply it sent all call this.
      if (generation->cache.enabled) {
        pending.next_turn_ = [next_turn = &next_turn_, replayed = std::make_shared<const ChatRequest>(request),
                              tenant = ask.tenant, echo = ask.protocol.echo](const ParsedAssistant& reply) {
          next_turn->queue(*replayed, reply, tenant, echo);
        };
      }
    }
    // response_format and forced tool calls become a grammar every sampled token must keep to.
    auto grammar = output_grammar(
        request, tool_format_, [this](const engine::Grammar& g) { return engine_.check_grammar(g); }, grammar_limits_);
    if (!grammar) return std::unexpected(grammar.error());
    generation->sampling.grammar = std::move(*grammar);
  }
  // The prompt now lives in `generation`; the request's text is not needed while it runs.
  pending.params_ = std::move(request.params);
  { [[maybe_unused]] const Parsed done = std::move(request); }
  if (stopping_) return std::unexpected(server_shutting_down());
  auto stream = scheduler_.submit(std::move(*generation));
  if (!stream) return std::unexpected(submit_error(stream.error()));
  pending.stream_ = std::move(*stream);
  return pending;
}

std::expected<PendingReply, ApiError> ChatService::start(ChatRequest request, ChatAsk ask) {
  return submit(std::move(request), std::move(ask));
}

std::expected<PendingReply, ApiError> ChatService::start(CompletionRequest request, ChatAsk ask) {
  return submit(std::move(request), std::move(ask));
}

std::optional<ReasoningSplitter> ChatService::reasoning_for(std::span<const engine::Token> prompt) const {
  if (!reasoning_) return std::nullopt;
  std::string tail;
  for (const engine::Token t : prompt.last(std::min(prompt.size(), kReasoningTailTokens))) {
    tail += engine_.vocab().piece(t, /*render_special=*/true);
  }
  return ReasoningSplitter(*reasoning_, prompt_opens_reasoning(tail, *reasoning_));
}

}  // namespace prefixd::api
