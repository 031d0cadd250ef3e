#include "cache/prefix_cache_impl.h"
#include "cache/prefix_cache_probe.h"

namespace prefixd::cache {

Compaction parse_compaction(std::string_view name) {
  if (name == "auto" || name == "automatic") return Compaction::automatic;
  if (name == "idle") return Compaction::idle;
  if (name == "never" || name == "off") return Compaction::never;
  throw std::invalid_argument("unknown compaction policy '" + std::string(name) + "' (auto, idle, never)");
}

namespace {

// Indexed by the enums' values, which are dense from 0.
constexpr std::array<const char*, 3> kCompactionNames = {"auto", "idle", "never"};
constexpr std::array<const char*, kOutcomeCount> kOutcomeNames = {"cold", "hit_extend", "hit_restore", "partial",
                                                                  "bypass"};
constexpr std::array<const char*, 5> kTierNames = {"", "device", "host", "disk", "remote"};

// With CacheConfig::verify_every_operation, checks every invariant when an operation ends (also
// when it throws: a refused operation must leave the cache whole) and aborts on a violation, which
// would otherwise surface far from its cause.
template <typename Cache>
class VerifiedAfter {
 public:
  VerifiedAfter(const Cache& cache, const char* operation) : cache_(cache), operation_(operation) {}
  ~VerifiedAfter() {
    if (!cache_.config().verify_every_operation) return;
    const std::string problems = cache_.verify(/*against_engine=*/true);
    if (problems.empty()) return;
    spdlog::critical("prompt cache invariant violated after {}: {}", operation_, problems);
    std::abort();
  }
  VerifiedAfter(const VerifiedAfter&) = delete;
  VerifiedAfter& operator=(const VerifiedAfter&) = delete;

 private:
  const Cache& cache_;
  const char* operation_;
};


}  // namespace

const char* reuse_mode_name(ReuseMode mode) { return mode == ReuseMode::trim ? "trim" : "checkpoints"; }

const char* compaction_name(Compaction compaction) { return kCompactionNames.at(static_cast<size_t>(compaction)); }
const char* outcome_name(Outcome outcome) { return kOutcomeNames.at(static_cast<size_t>(outcome)); }
const char* tier_name(Tier tier) { return kTierNames.at(static_cast<size_t>(tier)); }

void PrefixCache::Impl::advance(SeqId seq, std::int32_t computed) {
  auto it = leases_.find(seq);
  if (it == leases_.end()) return;
  Lease& lease = it->second;
  lease.computed = std::min<std::int32_t>(computed, static_cast<std::int32_t>(lease.prompt.size()));
  // Every cell the sequence computed, its generated tokens' too, is pinned as it lands.
  if (pin_ >= 0 && computed > lease.pinned) {
    pin_cells(engine_, pin_, seq, lease.pinned, computed);
    lease.pinned = computed;
  }
  bool saved = false;
  while (!lease.stops.empty() && lease.stops.front() <= lease.computed) {
    if (lease.stops.front() == lease.computed) {
      const auto prefix = std::span<const Token>(lease.prompt).first(static_cast<size_t>(lease.computed));
      const bool end = lease.computed + 1 >= static_cast<std::int32_t>(lease.prompt.size());
      saved |= backing_.keep_checkpoint(lease.lineage, prefix, lease.chain, engine_.save_checkpoint(seq), lease.session,
                               end ? CheckpointKind::prompt_end : CheckpointKind::boundary,
                               device_.window_run(seq, lease.window_from), lease.key.scope);
      trace("checkpoint seq={} at {}", seq, lease.computed);
    }
    lease.stops.erase(lease.stops.begin());
  }
  if (saved) publish();
}

std::int32_t PrefixCache::Impl::next_stop(SeqId seq) const {
  auto it = leases_.find(seq);
  if (it == leases_.end() || it->second.stops.empty()) return -1;
  return it->second.stops.front();
}

void PrefixCache::Impl::donate(SeqId seq, std::span<const Token> tokens) {
  auto found = leases_.find(seq);
  if (found == leases_.end()) {
    engine_.remove_sequence(seq, 0, -1);
    return;
  }
  Lease lease = std::move(found->second);
  leases_.erase(found);
  refresh_window_entries();
  if (!trimmable()) {
    donate_with_state(lease, seq, tokens);
    retain(lease, tokens);
    return;
  }
  const SequenceKeeper::Kept kept = keeper_.keep_cells(lease, seq, tokens);
  retain(lease, tokens);  // before the budget: a retained entry is not the first to go
  if (!kept.tree_changed) {
    budget_.enforce_idle();
    publish();
    return;
  }
  after_tree_change(lease.lineage.ns);
  // After the pin co-owns the new entry's cells (publish): serializing them copies them to the
  // scratch sequence, which must not take over cells only the holder owns.
  if (const DeviceEntry* entry = kept.entry != 0 ? device_.find(kept.entry) : nullptr) {
    backing_.write_behind(entry->lineage, entry->tokens, entry->holder, entry->scope);
  }
}

void PrefixCache::Impl::release(SeqId seq) {
  if (auto found = leases_.find(seq); found != leases_.end()) {
    unlock(device_, found->second);
    leases_.erase(found);
  }
  engine_.remove_sequence(seq, 0, -1);
  budget_.enforce_idle();  // what it had locked may be idle now
  publish();
}

std::int32_t PrefixCache::Impl::locked_by(SeqId seq) const {
  auto it = leases_.find(seq);
  return it == leases_.end() ? 0 : it->second.locked;
}

// After the tree of `ns` gained an entry: running sequences whose computed prompt prefix the
// tree now holds beyond what they lock take the tree's cells for it (freeing their duplicates),
// so that cells shared in the tree stay shared in the KV. Then the stats are published.
void PrefixCache::Impl::after_tree_change(const std::string& ns) {
  repin(ns);
  budget_.enforce_idle();
  publish();
}

void PrefixCache::Impl::repin(const std::string& ns) {
  device_.erase_if_empty(ns);
  const RadixTree* tree = device_.tree(ns);
  if (tree == nullptr) return;
  // A running sequence of a checkpoint family cannot give up a prefix of its cells: it keeps its
  // own until it ends (they are committed to it, not counted as the cache's).
  if (!trimmable()) return;
  // With a stream per sequence no cells are shared: a duplicate freed here would be a copy made.
  if (!family_.shares_cells()) return;
  for (auto& [seq, lease] : leases_) {
    if (lease.lineage.ns != ns || lease.computed <= lease.locked) continue;
    const auto held = std::span<const Token>(lease.prompt).first(static_cast<size_t>(lease.computed));
    // The sequence computed these tokens itself: taking the tree's cells for them changes no
    // reuse, whoever's entry they are (no reach).
    const RadixTree::Match m = tree->match(held, lease.session);
    if (m.length <= lease.locked) continue;
    engine_.remove_sequence(seq, 0, m.length);
    engine_.copy_sequence(device_.entry(m.entry).holder, seq, 0, m.length);
    lock(device_, lease, m.length);
  }
}

PrefixCache::PrefixCache(engine::Engine& engine, CacheConfig config, std::vector<SeqId> holders, SeqId scratch,
                         SeqId pin)
    : impl_(std::make_unique<Impl>(engine, config, std::move(holders), scratch, pin)) {}
PrefixCache::~PrefixCache() = default;

const CacheConfig& PrefixCache::config() const { return impl_->config(); }
ReuseMode PrefixCache::reuse_mode() const { return impl_->reuse_mode(); }
std::int32_t PrefixCache::next_stop(SeqId seq) const { return impl_->next_stop(seq); }
Ticket PrefixCache::open(const RequestKey& key, std::span<const Token> prompt, double seconds_per_token,
                         std::function<void()> on_lookup_done) {
  const VerifiedAfter verified(*impl_, "open");
  return impl_->open(key, prompt, seconds_per_token, std::move(on_lookup_done));
}
Ticket PrefixCache::open_bypass(const ScopeId& scope) { return impl_->open_bypass(scope); }
Admission PrefixCache::admit(Ticket& ticket, SeqId seq, const Room& room) {
  const VerifiedAfter verified(*impl_, "admit");
  return impl_->admit(ticket.state(), seq, room);
}
void PrefixCache::abandon(Ticket& ticket) {
  const VerifiedAfter verified(*impl_, "abandon");
  impl_->abandon(ticket.state());
}
std::int32_t PrefixCache::reusable(Ticket& ticket) const { return impl_->reusable(ticket.state()); }
void PrefixCache::advance(SeqId seq, std::int32_t computed) {
  const VerifiedAfter verified(*impl_, "advance");
  impl_->advance(seq, computed);
}
std::vector<Resolved> PrefixCache::take_resolved() {
  const VerifiedAfter verified(*impl_, "take_resolved");
  return impl_->poll();
}
void PrefixCache::donate(SeqId seq, std::span<const Token> tokens) {
  const VerifiedAfter verified(*impl_, "donate");
  impl_->donate(seq, tokens);
}
void PrefixCache::release(SeqId seq) {
  const VerifiedAfter verified(*impl_, "release");
  impl_->release(seq);
}
std::int64_t PrefixCache::release_device_cells(std::int64_t cells) {
  const VerifiedAfter verified(*impl_, "release_device_cells");
  return impl_->release_device_cells(cells);
}
void PrefixCache::make_room_for_step(std::int64_t running) {
  const VerifiedAfter verified(*impl_, "make_room_for_step");
  impl_->make_room(running, 1);
}
std::int64_t PrefixCache::spare_cells(std::int64_t running) const { return impl_->spare_cells(running); }
std::int64_t PrefixCache::tick(bool nothing_running) {
  // Called on every turn of the engine thread's loop: checked only when it changes something.
  const auto now = Clock::now();
  if (!impl_->tick_due(now, nothing_running)) return 0;
  const VerifiedAfter verified(*impl_, "tick");
  return impl_->tick(now, nothing_running);
}
ResetReport PrefixCache::reset() {
  const VerifiedAfter verified(*impl_, "reset");
  return impl_->reset();
}
ResetReport PrefixCache::reset_scope(const ScopeId& scope) {
  const VerifiedAfter verified(*impl_, "reset_scope");
  return impl_->reset_scope(scope);
}
ArtifactInfo PrefixCache::save_artifact(const RequestKey& key, std::span<const Token> tokens,
                                        const std::filesystem::path& path, const std::string& manifest) {
  const VerifiedAfter verified(*impl_, "save_artifact");
  return impl_->save_artifact(key, tokens, path, manifest);
}
ArtifactInfo PrefixCache::load_artifact(const std::filesystem::path& path, const ScopeId& scope,
                                        const std::function<void(const Artifact&)>& admit) {
  const VerifiedAfter verified(*impl_, "load_artifact");
  return impl_->load_artifact(path, scope, admit);
}
HeldPrefix PrefixCache::held(const RequestKey& key, std::span<const Token> tokens) const {
  return impl_->held(key, tokens);
}
ResetReport PrefixCache::forget(const RequestKey& key, std::span<const Token> tokens, engine::Pos keep) {
  const VerifiedAfter verified(*impl_, "forget");
  return impl_->forget(key, tokens, keep);
}
CacheStats PrefixCache::stats() const { return impl_->stats(); }

CacheSummary PrefixCache::summary(std::optional<std::uint64_t> since, bool by_medium,
                                  const std::optional<ScopeId>& scope) {
  return impl_->summary(since, by_medium, scope);
}
void PrefixCache::record_kv_events(KvEventScopes scopes) { impl_->record_kv_events(std::move(scopes)); }
std::vector<KvEvent> PrefixCache::take_kv_events() { return impl_->take_kv_events(); }

std::vector<Digest> PrefixCache::chain_of(const RequestKey& key, std::span<const engine::Token> prompt) const {
  return impl_->chain_of(key, prompt);
}

// The probe (prefix_cache_probe.h): tests' and benchmarks' look inside, checked as the faces are.
Acquisition PrefixCacheProbe::acquire(const RequestKey& key, std::span<const Token> prompt, SeqId seq) {
  const VerifiedAfter verified(*cache_.impl_, "acquire");
  return cache_.impl_->acquire(key, prompt, seq, nullptr);
}
bool PrefixCacheProbe::make_room(std::int64_t running, std::int64_t need) {
  const VerifiedAfter verified(*cache_.impl_, "make_room");
  return cache_.impl_->make_room(running, need);
}
std::int32_t PrefixCacheProbe::locked_by(SeqId seq) const { return cache_.impl_->locked_by(seq); }
std::int64_t PrefixCacheProbe::device_cells() const { return cache_.impl_->device_cells(); }
std::int64_t PrefixCacheProbe::idle_cells() const { return cache_.impl_->idle_cells(); }
std::int64_t PrefixCacheProbe::budgeted_idle_cells() const { return cache_.impl_->budgeted_idle_cells(); }
std::string PrefixCacheProbe::verify() const { return cache_.impl_->verify(); }
void PrefixCacheProbe::flush_disk() { cache_.impl_->flush_disk(); }

}  // namespace prefixd::cache
