// prefixd cache — the request-life face of the prompt cache: what the scheduler does with it for a
// request, from queued to ended, and the cache's idle work. PrefixCache implements it
// (prefix_cache.h); the scheduler and the draft model drive a request's life through this face
// alone, keep the owner's face (cache_operations.h: stats, reset, KV events) to themselves, and the
// scheduler hands others the admin face (cache_admin.h).
//
// A request's life:
//   open()          as it is queued: its ticket. The shared-tier lookup of its prompt starts now,
//                   on the tier's reader thread, so that it runs while the request waits.
//   admit()         each time it is offered a free sequence, in arrival order: ready (the sequence
//                   holds the reused prefix), waits_for_prefix (the sequence waits for a prefix
//                   another running request is computing: take_resolved() hands it over),
//                   lookup_pending (nothing used; the requests behind it may go first) or full
//                   (nothing used; admission stops). abandon() instead when its client went away.
//   advance()       after each prefill chunk and decoded token; a prefill chunk ends at next_stop().
//   donate()        at the end, or release() when nothing is worth keeping.
// Running requests keep room with make_room_for_step() before each step and
// release_device_cells() when a decode found no free cell; tick() does the idle work.
//
// Invariants: a sequence is registered from the admit() that took it (unless it bypasses the cache)
// to its donate() or release(); a ticket's lookup is adopted by the admit() that takes a sequence
// only when it completed by its deadline, however late that admit() comes, and is otherwise
// counted once as a lookup timeout (by admit(), or by abandon() when its request leaves first).
// The engine thread never waits for the shared tier.
// REQUIRES: every call is made from the one thread that owns the engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "cache/cache_types.h"
#include "engine/engine.h"

namespace prefixd::cache {

// A queued request's claim on the cache, from open() to the admit() that takes a sequence: its key
// and prompt, and its shared-tier lookup while one is in flight. Move-only; its holder never looks
// inside. Destroying it abandons a lookup still in flight without counting it (a server that shuts
// down times nothing out), and its completion then calls no one: destruction waits for a call in
// progress, so never destroy a ticket while holding what its on_lookup_done locks. May outlive the
// cache.
class Ticket {
 public:
  struct State;  // the cache's alone (ticket_state.h)
  explicit Ticket(std::unique_ptr<State> state);
  Ticket(Ticket&&) noexcept;
  Ticket& operator=(Ticket&&) noexcept;
  ~Ticket();

  // For the implementation of RequestLife; REQUIRES: not moved from.
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// What admit() needs to know of the context beyond the cache.
struct Room {
  // Cells the running requests' sequences hold or will hold for what they have now, the cells they
  // share with the cache included (admit() counts those once).
  std::int64_t running = 0;
  std::int64_t need = 0;  // cells the request needs: its prompt, and room for what it generates first
  // Nothing runs: the request is admitted even when it does not fit (alone, it can only fail alone).
  bool nothing_running = false;
};

struct Admission {
  enum class Kind {
    ready,             // the sequence holds `acquisition.reused` positions; the request computes the rest
    waits_for_prefix,  // the sequence is registered and empty until take_resolved() names it
    lookup_pending,    // the shared-tier lookup is in flight until `deadline`: no sequence used
    full,              // the prompt does not fit beside what the cache and the running requests hold
  };
  Kind kind = Kind::full;
  Acquisition acquisition;  // ready and waits_for_prefix: the cache's answer (counted once it is final)
  std::chrono::steady_clock::time_point deadline;  // lookup_pending: when admit() stops waiting for it
};

class RequestLife {
 public:
  // Opens the ticket of a request that uses the cache, queued now. When the shared tier could take
  // the prompt past what the device, host and disk tiers rebuild, its lookup starts now and
  // `on_lookup_done` is called once, on the tier's reader thread, when the result is in (by the
  // lookup's deadline); never after the ticket is destroyed. `seconds_per_token`: what computing a
  // prompt token costs now (0: unknown, 1 ms is assumed): the request waits for its lookup until the
  // tier's timeout, or as long as computing the tokens the lookup could bring would take, whichever
  // is longer.
  virtual Ticket open(const RequestKey& key, std::span<const engine::Token> prompt, double seconds_per_token,
                      std::function<void()> on_lookup_done) = 0;
  // The ticket of a request that does not use the cache (cache_prompt: false) of `scope`: admit()
  // only makes room for it and counts it as bypass.
  virtual Ticket open_bypass(const ScopeId& scope) = 0;

  // Offers the ticket's request the free sequence `seq`, in this order:
  // 1. its lookup: still in flight before its deadline, lookup_pending (nothing else is done); in
  //    flight past it, or completed after it, abandoned and counted (a lookup timeout);
  // 2. room: the prompt needs room.need cells beside the cells the cache holds and room.running;
  //    idle cells are freed first when it would not fit. When it still does not fit and something
  //    runs, full;
  // 3. `seq` is emptied and registered as running the prompt with the longest reusable prefix, at
  //    most prompt.size() - 1 tokens, put into it — the lookup's verified values adopted first (a
  //    reuse that reaches into them reports tier remote) — or told to wait for a running request
  //    (waits_for_prefix). With the cache disabled, or a bypass ticket, nothing is registered and
  //    the outcome is bypass (ready).
  // Once it took the sequence the ticket is spent. REQUIRES: the ticket is not spent; `seq` is
  // not registered.
  virtual Admission admit(Ticket& ticket, engine::SeqId seq, const Room& room) = 0;
  // How many of the ticket's prompt tokens the device, host and disk tiers would give it now (at
  // least min_prefix, else 0; 0 for a bypass ticket): what the scheduler weighs before it lets a
  // long prefill give way to it. Reads only.
  virtual std::int32_t reusable(Ticket& ticket) const = 0;
  // The ticket's request leaves the queue unadmitted (its client went away): a lookup that did not
  // complete in time is abandoned and counted, as when its deadline passes. The ticket is spent.
  virtual void abandon(Ticket& ticket) = 0;
  // Sequences that waited for a prefix (waits_for_prefix) and now hold it, in admission order; each
  // is returned once, its acquisition counted then. One whose source ended without it starts over
  // on its own (it may get the prefix from elsewhere, or nothing).
  virtual std::vector<Resolved> take_resolved() = 0;

  // `seq` now holds K/V for positions [0, computed): of its prompt, then of the tokens it
  // generated (called after each decoded token too, so the pin covers them). A checkpoint planned
  // at `computed` is taken now. Unregistered sequences are ignored.
  virtual void advance(engine::SeqId seq, std::int32_t computed) = 0;
  // The next prompt position past what `seq` computed (advance()) where the cache takes a
  // checkpoint of it: a prefill chunk must end there. -1 when none is planned.
  virtual std::int32_t next_stop(engine::SeqId seq) const = 0;
  // Ends `seq`: what it holds for positions [0, tokens.size()) becomes a device entry (unless
  // covered already or not worth keeping); afterwards `seq` is empty and unregistered.
  virtual void donate(engine::SeqId seq, std::span<const engine::Token> tokens) = 0;
  // Ends `seq` without keeping anything; afterwards it is empty and unregistered.
  virtual void release(engine::SeqId seq) = 0;

  // Before a step: idle cells give way so that one more cell fits beside the cells the cache holds
  // and `running` (as Room::running), which the running requests' sequences grow by.
  virtual void make_room_for_step(std::int64_t running) = 0;
  // Cells free beside the cache's, `running` (as Room::running) and the one cell make_room_for_step
  // keeps, without anything giving way: what rows that live for one call only (speculative drafts)
  // may take. Never negative.
  virtual std::int64_t spare_cells(std::int64_t running) const = 0;
  // Demotes or cuts back least recently used idle entries until `cells` cells are freed or nothing
  // idle is left (a decode found no free cell); returns the cells freed (exact).
  virtual std::int64_t release_device_cells(std::int64_t cells) = 0;

  // The idle work, called on every turn of the engine thread's loop before admission: drops entries
  // unused for longer than the TTL (at the first tick, then at most once a second), and when
  // `nothing_running` (no sequence runs, the cache's or others': the context is the cache's alone)
  // rewrites the device tier's entries from cell 0 if compaction is on and an entry was donated
  // since the last. Attention runs over every cell up to the highest in use, and a busy context
  // leaves the entries scattered up to its end; compaction makes the span the cells held again.
  // Returns the cells rewritten (0 when none, or when a save failed: then nothing is touched).
  virtual std::int64_t tick(bool nothing_running) = 0;

 protected:
  ~RequestLife() = default;
};

}  // namespace prefixd::cache
