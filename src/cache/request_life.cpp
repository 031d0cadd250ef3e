// prefixd cache — tickets and admission (request_life.h): a queued request's shared-tier lookup,
// judged when the request is offered a sequence, then room made and the prompt acquired
// (prefix_cache_acquire.cpp). The lookup itself is planned in prefix_cache_remote.cpp.
#include "cache/request_life.h"

#include <mutex>
#include <optional>
#include <utility>

#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {
namespace {

// What a ticket and the shared tier's reader thread share: whom to wake when the lookup completes,
// and when it did (a lookup is judged by whether it completed by its deadline, however late the
// engine thread looks).
class LookupSignal {
 public:
  explicit LookupSignal(std::function<void()> wake) : wake_(std::move(wake)) {}

  // The reader thread, once the result is in.
  void completed() {
    std::lock_guard lock(mutex_);
    completed_at_ = Clock::now();
    if (wake_) wake_();
  }
  // From now on a completion wakes no one.
  void disconnect() {
    std::lock_guard lock(mutex_);
    wake_ = nullptr;
  }
  // REQUIRES: the lookup is done. One whose completion call has not come yet completed now.
  bool completed_by(Clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    return completed_at_.value_or(Clock::now()) <= deadline;
  }

 private:
  std::mutex mutex_;
  std::function<void()> wake_;
  std::optional<Clock::time_point> completed_at_;
};

}  // namespace

struct Ticket::State {
  RequestKey key;
  std::vector<Token> prompt;
  bool uses_cache = true;
  bool spent = false;  // an admit() took a sequence, or abandon() was called
  // Host segments its prompt would restore, counted in the cache's set while it waits.
  std::vector<Digest> awaited;
  std::weak_ptr<AwaitedSegments> awaited_in;
  // The shared-tier lookup, from open() until it is adopted or abandoned; `signal` with it.
  std::shared_ptr<RemoteFetch> lookup;
  std::shared_ptr<LookupSignal> signal;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    drop_lookup();
    stop_awaiting();
  }

  void stop_awaiting() {
    if (const auto set = awaited_in.lock()) {
      for (const Digest& key : awaited) {
        const auto it = set->find(key);
        if (it != set->end() && --it->second <= 0) set->erase(it);
      }
    }
    awaited.clear();
  }

  void drop_lookup() {
    if (signal) signal->disconnect();
    signal.reset();
    lookup.reset();
  }
};

Ticket::Ticket(std::unique_ptr<State> state) : state_(std::move(state)) {}
Ticket::Ticket(Ticket&&) noexcept = default;
Ticket& Ticket::operator=(Ticket&&) noexcept = default;
Ticket::~Ticket() = default;

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
