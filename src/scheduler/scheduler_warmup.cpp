// prefixd scheduler — warm-up: after a reply, feed the end of turn the template renders before
// the next message, so the next turn finds it cached (see CacheOptions::continuation).
#include "scheduler/scheduler_impl.h"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace prefixd::scheduler {

using engine::BatchToken;
using engine::DecodeStatus;
using engine::Token;

void Scheduler::Impl::remember_reply(const Active& a) {
  if (!a.uses_cache() || a.generated == 0) return;
  sessions_.remember_reply(a.session(), a.tokens, static_cast<std::size_t>(a.n_prompt));
}

// A reply that ended normally, of a request whose template says what follows the reply, in a
// session whose client sends replies back: the generated tokens are the reply as the next turn
// renders it unless a stop string cut the text.
bool Scheduler::Impl::warmup_applies(const Active& a) const {
  if (!options_.cache_warmup || !a.uses_cache() || a.waiting || a.request.cache.continuation.empty() ||
      a.text.stopped() ||
      static_cast<std::int64_t>(a.tokens.size() + a.request.cache.continuation.size()) >= engine_.context_size()) {
    return false;
  }
  return sessions_.echoes(a.session());
}

void Scheduler::Impl::start_warmup(std::unique_ptr<Active> a) {
  const auto& tail = a->request.cache.continuation;
  a->tokens.insert(a->tokens.end(), tail.begin(), tail.end());
  a->n_prompt = static_cast<std::int32_t>(a->tokens.size());
  a->warming = true;
  a->row = -1;
  active_.push_back(std::move(a));
}

// Warm-ups whose end of turn is now in their sequence go to the cache.
void Scheduler::Impl::finish_warmups() {
  for (size_t i = active_.size(); i-- > 0;) {
    if (active_[i]->warming && active_[i]->n_past >= active_[i]->n_prompt) end_warmup(i, true);
  }
}

void Scheduler::Impl::end_warmup(size_t index, bool keep) {
  std::unique_ptr<Active> a = std::move(active_[index]);
  active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
  end_sequence(*a, keep);
  std::lock_guard lock(mutex_);
  free_seqs_.push_back(a->seq);
  if (keep) stats_.warmups_total += 1;
  stats_.running = static_cast<std::int32_t>(active_.size());
}

}  // namespace prefixd::scheduler
