// prefixd scheduler — a draft model: a second, smaller engine whose greedy guesses the target
// verifies (scheduler_drafts.cpp). It is a client of its own prompt cache, as the target is of its
// own: a PrefixCache over the drafter's context, keyed by the same request keys, so a request whose
// prompt the drafter has read before needs no draft prefill either, and reports what it reused.
// Its tiers: device, host and, with the target's disk tier, a disk directory of its own; never the
// shared tier, whose keys would name the target's K/V.
//
// Each target sequence that runs a request has a lane: the drafter sequence of the same id. A lane
// opens at its request's first draft (a ticket admitted into the drafter's cache), catches up on
// the request's tokens in chunks shared by all lanes (at most one batch of the drafter per step),
// then guesses one token per drafter call, the calls shared by every lane drafting this step. The
// guesses stay in the lane's cells; those the target rejected are cut at the next draft, when the
// lane compares what it holds with the request's tokens. At the end the lane's verified cells are
// donated to the drafter's cache.
//
// Invariants: a lane's sequence holds K/V for exactly `held`, positions [0, held.size()); held[0,
// confirmed) equals the request's tokens; a lane is registered with the drafter's cache from its
// admission to end(). Only the scheduler thread calls in.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cache/cache_operations.h"
#include "cache/request_life.h"
#include "engine/engine.h"
#include "scheduler/step_clock.h"

namespace prefixd::cache {
class PrefixCache;  // owned here, used only through its faces: its header is model_drafter.cpp's alone
}  // namespace prefixd::cache

namespace prefixd::scheduler {

// The draft model's disk tier: this directory inside the target's (--cache-disk-path).
inline constexpr const char* kDraftModelDiskDirectory = "draft-model";

class ModelDrafter {
 public:
  // Lanes are the drafter's sequence ids [0, lanes); the cache takes the `holders` ids after them
  // and one scratch id (the drafter's engine must have lanes + holders + 1 sequences). Token ids
  // from `token_limit` on are not the target's and the drafter's alike (vocabulary_match.h): a
  // context holding one (or an image's stand-in ids, negative) is not drafted for, and a draft
  // ends before a guess of one. Its model calls and its cache's room-making count in the
  // scheduler's `clock` (compute, cache), which must outlive it.
  ModelDrafter(engine::Engine& drafter, cache::CacheConfig config, std::int32_t lanes, std::int32_t holders,
               engine::Token token_limit, StepClock& clock);
  ~ModelDrafter();

  struct Job {
    engine::SeqId lane = 0;                  // the target sequence's id
    std::span<const engine::Token> context;  // the request's tokens so far
    std::int32_t prompt = 0;                 // how many of them are its prompt (for LaneReport)
    const cache::RequestKey* key = nullptr;  // null: the request bypasses the cache
    std::int32_t most = 0;                   // guesses wanted
    float p_min = 0;  // a guess the drafter gives less than this probability ends the draft
    std::vector<engine::Token> guesses{};    // out: at most `most`; empty while the lane catches up
  };
  // Drafts for every job (one job per lane). A lane that cannot be admitted (the drafter's context
  // is full) or whose calls fail drafts nothing this step.
  void draft(std::span<Job> jobs);
  // The lane's request ended with `tokens` (all it has, the last sampled one included): the cells
  // of their prefix the lane holds go to the drafter's cache (`keep`), or are dropped.
  void end(engine::SeqId lane, std::span<const engine::Token> tokens, bool keep);

  // What a lane did with its request's prompt, for the request's report: the prompt tokens the
  // drafter's cache gave it and those it computed (together the prompt, once it read it all).
  struct LaneReport {
    std::int32_t cached_tokens = 0;
    std::int32_t fed_tokens = 0;
  };
  LaneReport report(engine::SeqId lane) const;

  // The time one guess costs (a drafter call of one row per lane, averaged), seconds; 0 until
  // measured.
  double seconds_per_guess() const { return seconds_per_guess_; }
  // The drafter's cache as its owner's face (cache_operations.h): its stats and resets, which the
  // scheduler reports and runs beside its own; the lanes drive its request life themselves.
  cache::CacheOperations& cache();
  const cache::CacheOperations& cache() const;
  // The idle work of the drafter's cache (RequestLife::tick).
  void tick();

 private:
  struct Lane {
    bool open = false;
    bool uses_cache = false;
    bool waiting = false;  // the cache hands it a prefix another lane computes (take_resolved)
    bool refused = false;  // no room in the drafter's context: no drafts for this request
    std::vector<engine::Token> held;
    std::size_t confirmed = 0;
    std::vector<engine::Token> admitted;  // while waiting: the context it was admitted with
    std::int32_t prompt = 0;              // its request's prompt tokens
    LaneReport report;
  };

  bool open(Lane& lane, engine::SeqId id, const Job& job);
  void take_resolved();
  // Cuts the lane back to what the request's tokens confirm, leaving at least one token to feed;
  // false (nothing done) when the lane has read the whole context already.
  bool settle(Lane& lane, engine::SeqId id, std::span<const engine::Token> context);
  std::int64_t running_cells() const;
  engine::DecodeStatus decode(std::span<const engine::BatchToken> batch);

  engine::Engine& engine_;
  engine::Token token_limit_;
  StepClock& clock_;
  // Owned, and used only through its faces: the lanes' request life through life().
  std::unique_ptr<cache::PrefixCache> cache_;
  cache::RequestLife& life();
  bool cache_enabled_ = false;  // the cache's resolved configuration's, fixed for its life
  std::vector<Lane> lanes_;
  std::vector<engine::BatchToken> batch_;
  double seconds_per_guess_ = 0;
};

}  // namespace prefixd::scheduler
