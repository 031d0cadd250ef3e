// prefixd cache — tickets and admission (request_life.h): a queued request's shared-tier lookup,
// judged when the request is offered a sequence, then room made and the prompt acquired
// (prefix_cache_acquire.cpp). The lookup itself is planned in prefix_cache_remote.cpp; what a
// ticket holds is in ticket_state.h.
#include <optional>
#include <utility>

#include "cache/prefix_cache_impl.h"
#include "cache/ticket_state.h"

namespace prefixd::cache {
namespace {

enum class LookupVerdict {
  none,       // no lookup
  in_time,    // completed by its deadline: adopted at acquire
  in_flight,  // not completed, its deadline still ahead
  late,       // not completed by its deadline: abandoned
};

LookupVerdict judge(const Ticket::State& ticket) {
  if (!ticket.lookup) return LookupVerdict::none;
  const auto deadline = ticket.lookup->deadline();
  if (ticket.lookup->done()) return ticket.signal->completed_by(deadline) ? LookupVerdict::in_time : LookupVerdict::late;
  return Clock::now() < deadline ? LookupVerdict::in_flight : LookupVerdict::late;
}

}  // namespace

Ticket PrefixCache::Impl::open(const RequestKey& key, std::span<const Token> prompt, double seconds_per_token,
                               std::function<void()> on_lookup_done) {
  auto state = std::make_unique<Ticket::State>();
  state->key = key;
  state->prompt.assign(prompt.begin(), prompt.end());
  auto signal = std::make_shared<LookupSignal>(std::move(on_lookup_done));
  state->lookup = fetch_remote(key, prompt, seconds_per_token, [signal] { signal->completed(); });
  if (state->lookup) state->signal = std::move(signal);
  await_segments(*state);
  return Ticket(std::move(state));
}

void PrefixCache::Impl::await_segments(Ticket::State& ticket) {
  if (!can_reuse() || ticket.prompt.size() < 2) return;
  const auto query = std::span<const Token>(ticket.prompt).first(ticket.prompt.size() - 1);  // the one-token guard
  ticket.awaited = host_.plan(lineage_of(ticket.key, next_order_ + 1), query).keys;
  ticket.awaited_in = awaited_;
  for (const Digest& key : ticket.awaited) ++(*awaited_)[key];
}

Ticket PrefixCache::Impl::open_bypass(const ScopeId& scope) {
  auto state = std::make_unique<Ticket::State>();
  state->key.scope = scope;
  state->uses_cache = false;
  return Ticket(std::move(state));
}

Admission PrefixCache::Impl::admit(Ticket::State& ticket, SeqId seq, const Room& room) {
  if (ticket.spent) throw std::logic_error("admit: the ticket is spent");
  switch (judge(ticket)) {
    case LookupVerdict::in_flight:
      return Admission{.kind = Admission::Kind::lookup_pending, .deadline = ticket.lookup->deadline()};
    case LookupVerdict::late:
      abandon_remote();
      ticket.drop_lookup();
      break;
    case LookupVerdict::none:
    case LookupVerdict::in_time:
      break;
  }
  if (!make_room(room.running, room.need) && !room.nothing_running) return Admission{.kind = Admission::Kind::full};
  engine_.remove_sequence(seq, 0, -1);
  ticket.spent = true;
  const Acquisition got =
      ticket.uses_cache ? acquire(ticket.key, ticket.prompt, seq, ticket.lookup.get()) : bypass(ticket.key.scope);
  ticket.stop_awaiting();  // after the restore: until then its segments are still awaited
  ticket.drop_lookup();
  return Admission{.kind = got.waiting ? Admission::Kind::waits_for_prefix : Admission::Kind::ready,
                   .acquisition = got};
}

std::int32_t PrefixCache::Impl::reusable(const Ticket::State& ticket) const {
  if (!ticket.uses_cache || !config_.enabled || ticket.prompt.size() < 2) return 0;
  const auto query = std::span<const Token>(ticket.prompt).first(ticket.prompt.size() - 1);  // the one-token guard
  return held(ticket.key, query).tokens;
}

void PrefixCache::Impl::abandon(Ticket::State& ticket) {
  const LookupVerdict verdict = judge(ticket);
  if (verdict == LookupVerdict::in_flight || verdict == LookupVerdict::late) abandon_remote();
  ticket.drop_lookup();
  ticket.stop_awaiting();
  ticket.spent = true;
}

}  // namespace prefixd::cache
