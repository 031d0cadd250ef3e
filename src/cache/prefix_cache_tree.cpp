// PrefixCache::tree: the tiers' holdings as radix trees for people to browse (cache_tree.h).
#include "cache/cache_tree.h"
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {
namespace {

double seconds_since(Clock::time_point then, Clock::time_point now) {
  return std::max(0.0, std::chrono::duration<double>(now - then).count());
}

// The session key a session id (request_key.h, session_id) was made from: the id without its scope.
std::string session_key_of(const std::string& session_id) {
  return session_id.size() > sizeof(ScopeId) ? session_id.substr(sizeof(ScopeId)) : std::string();
}

}  // namespace

CacheTree PrefixCache::Impl::tree(const TreeQuery& query) const {
  CacheTreeBuilder builder(query);
  const auto now = Clock::now();
  for (const auto& [id, e] : device_.entries()) {
    const RadixTree* tree = device_.tree(e.lineage.ns);
    builder.add(HeldSequence{.ns = e.lineage.ns, .scope = e.scope, .tier = kTreeDevice, .tokens = e.tokens,
                             .session = session_key_of(e.session), .locked = tree != nullptr ? tree->locked_length(id) : 0,
                             .idle_seconds = seconds_since(e.last_used, now), .entry = true});
  }
  std::vector<ChainSegment> host;
  for (const auto& [parent, key] : host_.store().parent_links()) {
    const HostSegment* s = host_.store().peek(key);
    if (s == nullptr) continue;
    host.push_back(ChainSegment{.key = key, .parent = s->parent, .begin = s->begin, .tokens = s->token_ids,
                                .scope = s->scope, .idle_seconds = seconds_since(s->last_used, now)});
  }
  add_segment_chains(builder, host, kTreeHost);
  if (const DiskStore* disk = backing_.disk()) {
    // Copies: the disk store's lock is held only while its index is walked.
    std::vector<RecordMeta> records;
    disk->for_each_segment([&](const RecordMeta& meta) { records.push_back(meta); });
    std::vector<ChainSegment> chains;
    chains.reserve(records.size());
    for (const RecordMeta& r : records) {
      chains.push_back(ChainSegment{.key = r.key, .parent = r.parent, .begin = r.begin, .tokens = r.tokens, .scope = r.scope});
    }
    add_segment_chains(builder, chains, kTreeDisk);
  }
  return builder.build();
}

CacheTree PrefixCache::tree(const TreeQuery& query) const { return impl_->tree(query); }

}  // namespace prefixd::cache
