// prefixd scheduler — what a request asks for and what flows back from it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/cache_types.h"
#include "engine/types.h"
#include "engine/vision.h"

namespace prefixd::scheduler {

// Digests of what produced a prompt's tokens besides its messages (the chat template, its kwargs,
// tools, tool_choice), by name. A diagnostic only, never part of the namespace: when a session's
// inputs change from one request to the next, the response and the trace name the ones that did.
using PromptInputs = std::vector<std::pair<std::string, std::uint64_t>>;

// Cache-related parameters of one request, computed by the API layer (which knows the template,
// tools, salt and session) and consumed by the prompt cache. `namespace_digest` is opaque here.
struct CacheOptions {
  bool enabled = true;             // false: read nothing, donate nothing (cache_prompt: false)
  std::string namespace_digest;    // 32 raw bytes; requests share K/V only within one namespace
  std::string session_key;         // prompt_cache_key > user > "" (anonymous)
  cache::ScopeId scope{};          // whose entries and counters these are (the tenant's scope)
  // Session isolation: prompt positions [0, shared_prefix) may be reused from other sessions, the
  // rest only from this session's own entries (cache::RequestKey::shared_prefix). kNoFork: no wall.
  std::int32_t shared_prefix = cache::kNoFork;
  // Prompt positions where a later request is likely to resume or diverge (the start of each user
  // turn, the end of the system prompt): checkpoint families save their state there. Ascending.
  std::vector<engine::Pos> boundaries;
  // The tokens the chat template renders right after this request's reply (the end of the
  // assistant turn) when the reply comes back in the next request. After the reply, the scheduler
  // feeds them off the request path so that the next turn resumes after them (warm-up). Empty:
  // no warm-up (raw completions, or a template that re-renders earlier turns).
  std::vector<engine::Token> continuation;
  PromptInputs prompt_inputs;
  // Prefixes to keep ahead of LRU eviction for a while after the request (a cache_control
  // breakpoint with a TTL; cache/retention.h).
  std::vector<cache::RetainAsk> retain;
  // The prompt's images: ranges computed in one piece (GenerationRequest::images).
  std::vector<cache::UnbrokenSpan> unbroken;
  // n_cache_reuse: -1 the server's --cache-reuse, 0 off, else the shortest chunk worth shifting.
  std::int32_t shift_reuse_min = -1;
  // The LoRA adapters the namespace holds, in words (AppliedAdapters::label; empty: none): what
  // KV events say of its blocks (cache::RequestKey::adapter).
  std::string adapter_label;
};

// Who a request is to the prompt cache: the one place a cache::RequestKey is made from a request.
cache::RequestKey cache_key(const CacheOptions& options);

// The latest sequence a named session left to the cache (its key and the tokens donated): what
// saving that session as an artifact saves.
struct SessionPrompt {
  cache::RequestKey key;
  std::vector<engine::Token> tokens;
};

// One of the n_slots sequences requests run in, as llama-server's /slots shows a slot: what runs
// there now, and how many tokens the last request that ran there left to the cache.
struct SlotState {
  std::int32_t id = 0;
  std::uint64_t task = 0;        // the running request's id; 0 when the slot is idle
  bool processing = false;
  std::int32_t prompt_tokens = 0;
  std::int32_t computed = 0;     // prompt (and generated) positions in the slot's sequence
  std::int32_t generated = 0;
  std::int32_t max_new = 0;      // the most tokens the running request may still generate in all
  bool speculative = false;      // it drafts
  std::int32_t kept_tokens = 0;  // what the slot's last request left to the cache (0: nothing yet)
};

// Most alternatives a request may ask for with each generated token.
inline constexpr std::int32_t kMaxTopLogprobs = 20;

// An image in a prompt: positions [begin, begin + image->n_tokens) hold its stand-in token ids
// (engine::image_token_ids), which the scheduler computes from the image's embeddings.
struct PromptImage {
  engine::Pos begin = 0;
  std::shared_ptr<const engine::PreparedImage> image;
  engine::Pos end() const { return begin + image->n_tokens; }
};

// A request's own speculation settings (llama-server's `speculative.n_max`, `.n_min` and `.p_min`):
// unset fields take the server's. n_max 0 turns drafting off for the request.
struct DraftSettings {
  std::optional<std::int32_t> n_max;
  std::optional<std::int32_t> n_min;
  std::optional<float> p_min;
};

// What an embedding request computes (an engine with ModelInfo::embeddings), instead of generating.
//  - last_row: what the engine pools from the prompt's last token (a causal model's last pooling).
//    That token is computed in the row-wise call a generated request's last prompt token takes, so
//    the prompt's earlier tokens may come from the cache as any prompt's do, warm = cold.
//  - whole_prompt: every token of the prompt in one model call (mean, cls and rank pooling read
//    every row, and a model without memory sees only its call), each with its output; nothing is
//    read from or left to the cache. The prompt must fit in one batch.
enum class EmbedMode { none, last_row, whole_prompt };

struct GenerationRequest {
  std::vector<engine::Token> prompt;        // at least one token
  // Sorted by position, non-overlapping; the prompt's last token is never an image's. Requires an
  // engine with a vision projector.
  std::vector<PromptImage> images;
  engine::SamplingParams sampling;
  std::int32_t max_tokens = -1;             // -1: until end of generation or the context is full
  // Feed the whole prompt, sample nothing, and leave all of it to the cache (the control plane's
  // update and prepare_modules). Finishes with `length` and no text once the prompt is in.
  bool prefill_only = false;
  // Return the prompt's embedding in the done event instead of generating (EmbedMode), with
  // per_token (Pooling::none, whole_prompt only) one vector per prompt token.
  EmbedMode embed = EmbedMode::none;
  bool per_token = false;
  // The LoRA adapters its every token is computed under (Engine::use_adapters: sorted by id, no
  // scale 0); empty: the base model. Part of its cache namespace too, which the caller computes.
  std::vector<engine::AdapterScale> adapters;
  std::vector<std::string> stop;            // generation stops before any of these strings
  // llama.cpp's t_max_predict_ms: once the reply holds a newline, generation ends (`length`) when
  // this long has passed since its first token; zero: no limit. Code completion bounds its wait.
  std::chrono::milliseconds time_limit_after_newline{0};
  // llama.cpp's n_indent: after the first newline, the reply ends (`length`) before the first
  // non-blank character of a line indented by fewer spaces or tabs than this; zero: no floor.
  std::int32_t indent_floor = 0;
  // -1: no log-probabilities; n >= 0: each generated token's own log-probability and the n most
  // likely alternatives (at most kMaxTopLogprobs), from the model's distribution before sampling.
  std::int32_t logprobs = -1;
  DraftSettings speculative;
  CacheOptions cache;
};

struct TokenLogprob {
  engine::Token id = 0;
  std::string piece;     // the token's bytes (may be part of a UTF-8 character)
  float logprob = 0;     // natural log of its probability under the model's softmax
};

// One generated token with the alternatives the request asked for, most likely first.
struct GeneratedLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};

enum class FinishReason { stop, length, cancelled, error };
const char* finish_reason_name(FinishReason reason);

// What the prompt cache did for a request (telemetry in every response).
// What the prompt cache did for a request, as the cache decided it (cache::PrefixCache::acquire).
// A draft model's reading of a request's prompt (ModelDrafter): the prompt tokens its own prompt
// cache gave it and those it computed; together the prompt, once its lane read it all.
struct DraftCacheReport {
  std::int32_t cached_tokens = 0;
  std::int32_t fed_tokens = 0;
};

struct CacheReport {
  cache::Outcome outcome = cache::Outcome::cold;
  std::int32_t cached_tokens = 0;  // prompt tokens reused, not fed through the model
  std::int32_t fed_tokens = 0;     // prompt tokens fed through the model
  cache::Tier tier = cache::Tier::none;
  bool in_session = false;         // meaningful when cached_tokens > 0
  // The prompt inputs (CacheOptions::prompt_inputs) that differ from the session's previous
  // request: why its prompt may diverge from that request's earlier than its messages do.
  std::vector<std::string> changed_inputs;
  // The prompt's images: those whose positions were all reused (cached), those whose embeddings
  // came from the embedding cache, and those the vision encoder ran for.
  std::int32_t images = 0;
  std::int32_t images_cached = 0;
  std::int32_t image_embeddings_reused = 0;
  std::int32_t images_encoded = 0;
  // Prefill time the cached tokens saved: cached_tokens at the prompt rate measured when the request
  // was admitted (what /metrics sums in prefixd_prefill_seconds_saved_total).
  double seconds_saved = 0;
  std::optional<DraftCacheReport> draft;  // set when a draft model drafted for the request
  // Of cached_tokens, those moved from later positions of a cached sequence (--cache-reuse): not
  // the K/V a cold run computes.
  std::int32_t shifted_tokens = 0;
};

struct Usage {
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;
};

struct Timings {
  double queued_ms = 0;      // submit -> first scheduled
  double prefill_ms = 0;     // first scheduled -> first token sampled
  double decode_ms = 0;      // first token -> finish
  // Speculative decoding (SpeculationOptions): whether it was on for the request, the tokens it
  // drafted and verified, and of those the ones the model drew too.
  bool speculative = false;
  std::int32_t draft_n = 0;
  std::int32_t draft_accepted = 0;
};

// How far a request's prompt has come, in prompt tokens: sent when the cache has answered and
// after each prefill chunk, so a client can show it (and hear from a long prefill at all).
struct PromptProgress {
  std::int32_t total = 0;      // the prompt's tokens
  std::int32_t cached = 0;     // of which reused from the cache
  std::int32_t processed = 0;  // of which in the sequence now, the cached ones included
  double elapsed_ms = 0;       // since the request was admitted
};

// One event of a request's stream. Text events carry complete UTF-8 with stop strings removed.
struct StreamEvent {
  enum class Kind { text, progress, done } kind = Kind::text;
  std::string text;                       // kind == text
  PromptProgress progress;                // kind == progress
  // kind == text, when the request asked for them: the tokens generated since the previous text
  // event, in order (text held back for a stop string or a split character arrives later than
  // its token's entry).
  std::vector<GeneratedLogprobs> logprobs;
  FinishReason finish = FinishReason::stop;  // kind == done
  std::string error;                      // kind == done && finish == error
  std::string stop_sequence;              // kind == done: the stop string that ended the text, if one did
  Usage usage;                            // kind == done
  CacheReport cache;                      // kind == done
  Timings timings;                        // kind == done
  // kind == done, for an embedding request that finished: the pooled vector, or one per prompt
  // token in order (engine::ModelInfo::embedding_width floats each).
  std::vector<float> embedding;

  static StreamEvent text_event(std::string text) {
    StreamEvent e;
    e.text = std::move(text);
    return e;
  }
};

// The channel between the scheduler thread (producer) and one HTTP handler (consumer).
// Thread-safe. Invariant: exactly one `done` event is pushed, and it is the last one.
class RequestStream {
 public:
  // Blocks up to `timeout` for the next event; nullopt on timeout.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout);
  // Asks the scheduler to stop this request; a `done` event with FinishReason::cancelled follows.
  void cancel();
  bool cancelled() const;

  // Scheduler side.
  void push(StreamEvent event);

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  bool cancelled_ = false;
};

}  // namespace prefixd::scheduler
