// prefixd scheduler — what the scheduler's parts share about a request on its way: queued (not yet
// holding a sequence) and active (holding one). Internal to src/scheduler.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/request_life.h"
#include "engine/engine.h"
#include "scheduler/request.h"
#include "scheduler/step_clock.h"
#include "scheduler/text_stream.h"
#include "speculative/draft_economics.h"

namespace prefixd::scheduler {

using Clock = std::chrono::steady_clock;

// A request waiting for a sequence. Owned by the scheduler thread once it left the inbox.
struct Queued {
  std::uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<RequestStream> stream;
  Clock::time_point submitted;
  // Its claim on the cache, opened once it is queued (then its shared-tier lookup starts): none
  // until then, and never for a request cancelled before. Offered to the cache (admit) in arrival
  // order whenever a sequence is free.
  std::optional<cache::Ticket> ticket;
  // When the cache last answered that its lookup is in flight: until when. The request holds no
  // sequence meanwhile; those behind it are admitted.
  std::optional<Clock::time_point> lookup_deadline;
  // Made by submit() on the caller's thread when the request has a grammar (parsing a large one
  // takes a step's time or more); null: start() makes it.
  std::unique_ptr<engine::Sampler> sampler;
  // A prefill that gave way (preempt_for) carries how long it has been held back (Active's).
  std::int64_t passed_over_tokens = 0;
  // A request that ran and went back to the queue (preempted, requeued) carries its steps (Active's).
  StepShare step_share{};
};

// A prompt that has watched others prefill this many times its own remaining tokens goes first:
// shortest remaining first alone lets a stream of short prompts (the later turns of many
// conversations, mostly cached) hold a cold first turn back for as long as they keep coming. The
// bound keeps the order's gain on the median and caps any prompt's slowdown near this factor.
inline constexpr std::int64_t kMaxPrefillSlowdown = 4;

// While requests under several LoRA adapter sets have work, a set keeps the steps (its turn) for at
// least this long while its own requests have work, then the set that waited longest takes over.
// libllama re-plans its graph's memory (a reserve) at the next call after the adapters change,
// which costs a good part of a decode step on a CPU: switching at every step made two requests
// under different sets run at 0.91x llama-server's pair (docs/benchmarks.md, "LoRA adapters").
// Steps longer than a turn (a long prefill chunk) switch at each step, where a reserve costs little.
inline constexpr Clock::duration kAdapterTurn = std::chrono::milliseconds(250);

// A request that has been given a sequence id.
struct Active {
  std::uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<RequestStream> stream;
  engine::SeqId seq = 0;
  Clock::time_point submitted;
  Clock::time_point started;
  Clock::time_point first_token;
  std::vector<engine::Token> tokens;  // prompt, then every sampled token
  std::int32_t n_past = 0;     // tokens[0, n_past) are in the KV cache of `seq`
  std::int32_t n_prompt = 0;
  std::int32_t max_new = 0;    // most tokens this request may sample
  std::int32_t generated = 0;  // tokens sampled (end-of-generation excluded)
  std::int32_t row = -1;       // batch row whose logits this request samples from, -1 if none
  // Shared with MaskedDraws while a masked draw of it is in flight (the request may end meanwhile).
  std::shared_ptr<engine::Sampler> sampler;
  bool drawing = false;  // its next token is being drawn off this thread (MaskedDraws)
  TextStream text{{}};
  CacheReport cache;
  bool emitted_any = false;
  bool wrote_newline = false;  // a sampled token held '\n' (time_limit_after_newline counts from then on)
  bool out_of_time = false;    // ended by time_limit_after_newline
  std::vector<GeneratedLogprobs> pending_logprobs;  // tokens not yet sent with a text event
  std::vector<float> embedding;  // an embedding request's result (GenerationRequest::embed), once computed
  bool waiting = false;  // the cache will hand it a prefix another request is computing (take_resolved)
  // The reply is delivered; the sequence is fed the template's end of turn before it goes to the
  // cache (no events, no sampling). n_prompt then counts those tokens too.
  bool warming = false;
  // Prompt tokens prefilled for other requests in the batches where this one was prefilling and
  // got none: how long shortest-remaining-first has held it back, in the unit its own work is.
  std::int64_t passed_over_tokens = 0;
  // Speculative decoding, when on for the request: the lengths its drafts may have, the draft of
  // this step (verified in the rows after its decode token, `row` + 1 on), and how its drafts fared.
  struct DraftLimits {
    std::int32_t most = 0;
    std::int32_t fewest = 1;
  };
  std::optional<DraftLimits> drafting;
  std::vector<engine::Token> draft;
  speculative::DraftRecord drafts;
  // Recurrent and hybrid models (roll_back_states): the state saved before the call that verifies
  // the draft; once it was not all taken, the position that call began at (-1: none), and whether
  // the request ends once its state is rolled back.
  engine::Bytes state_before_draft;
  std::int32_t rollback_from = -1;
  bool ends_after_rollback = false;
  bool rollback_failed = false;
  // A step computes under one set of LoRA adapters (choose_adapters): a request under another
  // sits that step out (benched), and when a set's turn ends, the set whose request has gone
  // longest without a step (last_step, a serial of steps) is served next.
  bool benched = false;
  std::uint64_t last_step = 0;
  // The steps it took part in and their time by phase (joined in start(), left in finish()): its
  // debug line says whether its time went to the model or around it.
  StepShare step_share;

  // Prompt tokens it has left to put into its sequence.
  std::int64_t prompt_left() const { return static_cast<std::int64_t>(n_prompt) - n_past; }
  // Shortest remaining first has held it back long enough (kMaxPrefillSlowdown): it goes first.
  bool held_back_too_long() const { return passed_over_tokens >= kMaxPrefillSlowdown * prompt_left(); }

  // The image whose positions hold `pos`, or null.
  const PromptImage* image_at(engine::Pos pos) const {
    for (const PromptImage& image : request.images) {
      if (image.begin <= pos && pos < image.end()) return &image;
    }
    return nullptr;
  }
  // Where the next image at or after `pos` begins; n_prompt when none does.
  engine::Pos next_image(engine::Pos pos) const {
    for (const PromptImage& image : request.images) {
      if (image.begin >= pos) return image.begin;
    }
    return n_prompt;
  }

  bool prefilling() const { return !waiting && !benched && n_past < n_prompt; }
  bool decoding() const { return !waiting && !benched && !drawing && n_past >= n_prompt; }
  bool uses_cache() const { return request.cache.enabled; }
  // Its whole prompt goes into one call (EmbedMode::whole_prompt).
  bool whole_prompt() const { return request.embed == EmbedMode::whole_prompt; }
  // Whose replies and template inputs are remembered together (SessionMemory).
  std::string session() const { return request.cache.namespace_digest + request.cache.session_key; }
};

}  // namespace prefixd::scheduler
