#include "cache/remote_fetch.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "remote/remote_store.h"

namespace prefixd::cache {
namespace {

using engine::Token;

std::int32_t common_prefix_of(std::span<const Token> a, std::span<const Token> b) {
  return static_cast<std::int32_t>(std::ranges::mismatch(a, b).in1 - a.begin());
}

bool before_deadline(const RemoteFetchPlan& plan) { return std::chrono::steady_clock::now() < plan.deadline; }

// Decodes a value; a bad one is deleted from the store and counted.
std::optional<Record> decode_value(remote::RemoteStore& store, const std::string& name, const std::string& bytes,
                                   const RemoteFetchPlan& plan, RemoteFetchResult& result) {
  const auto span = std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  DecodedRecord decoded = decode_record(span, &plan.model);
  if (decoded.fault != RecordFault::none) {
    spdlog::warn("remote tier: value {} is unusable ({}); deleted", name, record_fault_name(decoded.fault));
    result.bad_values += 1;
    store.del(name);
    return std::nullopt;
  }
  return std::move(decoded.record);
}

void reject(remote::RemoteStore& store, const std::string& name, const char* why, RemoteFetchResult& result) {
  spdlog::warn("remote tier: value {} does not hold what its name promises ({}); deleted", name, why);
  result.bad_values += 1;
  store.del(name);
}

// Whole grid segments from plan.start on, in order, up to the first one missing or bad.
void fetch_grid(remote::RemoteStore& store, const RemoteFetchPlan& plan, RemoteFetchResult& result) {
  std::vector<std::string> names;
  for (const Digest& key : plan.grid_keys) names.push_back(remote_segment_name(key));
  const std::vector<std::optional<std::string>> values = store.get_many(names);
  const std::int32_t seg = plan.segment_tokens;
  for (size_t i = 0; i < values.size() && values[i]; ++i) {
    std::optional<Record> record = decode_value(store, names[i], *values[i], plan, result);
    if (!record) break;
    const auto begin = plan.start + static_cast<std::int32_t>(i) * seg;
    const auto expected = std::span<const Token>(plan.query).subspan(static_cast<size_t>(begin), static_cast<size_t>(seg));
    const RecordMeta& meta = record->meta;
    if (meta.kind != RecordKind::segment || meta.begin != begin || meta.key != plan.grid_keys[i] ||
        meta.parent != plan.grid_parents[i] || !std::ranges::equal(meta.tokens, expected)) {
      reject(store, names[i], "segment", result);
      break;
    }
    result.names.push_back(names[i]);
    result.segments.push_back(std::move(*record));
    result.reach = begin + seg;
  }
}

// The shorter segment at the grid line where the walk stopped that shares the most tokens with
// the rest of the prompt. Its name is its parent and first block, so one name per possible parent:
// a later, longer tail of the same conversation replaces an earlier one under the same name.
void fetch_tail(remote::RemoteStore& store, const RemoteFetchPlan& plan, RemoteFetchResult& result) {
  const std::int32_t g = std::max(result.reach, plan.start);
  const auto line = static_cast<size_t>((g - plan.start) / plan.segment_tokens);
  if (line >= plan.tail_parents.size()) return;
  const auto rest = std::span<const Token>(plan.query).subspan(static_cast<size_t>(g));
  std::vector<std::string> names;
  std::vector<const RemoteFetchPlan::TailParent*> parents;
  for (const RemoteFetchPlan::TailParent& tp : plan.tail_parents[line]) {
    if (const std::optional<Digest> index = tail_index(plan.hasher, tp.parent, rest)) {
      names.push_back(remote_tail_name(*index));
      parents.push_back(&tp);
    }
  }
  if (names.empty()) return;
  const std::vector<std::optional<std::string>> values = store.get_many(names);
  std::optional<Record> best;
  std::int32_t best_take = 0;
  size_t best_name = 0;
  for (size_t j = 0; j < names.size(); ++j) {
    if (!values[j]) continue;
    std::optional<Record> record = decode_value(store, names[j], *values[j], plan, result);
    if (!record) continue;
    const RecordMeta& meta = record->meta;
    // The host tier keys a segment shorter than the grid by its parent and tokens.
    const std::optional<Digest> index = tail_index(plan.hasher, meta.parent, meta.tokens);
    if (meta.kind != RecordKind::segment || meta.begin != g || meta.parent != parents[j]->parent ||
        static_cast<std::int32_t>(meta.tokens.size()) >= plan.segment_tokens ||
        meta.key != plan.hasher.next(meta.parent, meta.tokens) || !index || remote_tail_name(*index) != names[j]) {
      reject(store, names[j], "tail segment", result);
      continue;
    }
    const std::int32_t take = std::min(parents[j]->cap, common_prefix_of(meta.tokens, rest));
    if (take > best_take) {
      best_take = take;
      best_name = j;
      best = std::move(record);
    }
  }
  if (!best) return;
  result.names.push_back(names[best_name]);
  result.segments.push_back(std::move(*best));
  result.reach = g + best_take;
}

// The checkpoint at the highest candidate position the attention cells reach.
void fetch_checkpoint(remote::RemoteStore& store, const RemoteFetchPlan& plan, RemoteFetchResult& result) {
  const std::int32_t limit = plan.segments ? std::max(plan.local_reach, result.reach)
                                           : static_cast<std::int32_t>(plan.query.size());
  std::vector<const RemoteFetchPlan::CheckpointCandidate*> usable;
  for (const auto& c : plan.checkpoints) {
    if (c.position <= limit) usable.push_back(&c);
  }
  if (usable.empty()) return;
  std::vector<std::string> names;
  for (const auto* c : usable) names.push_back(remote_checkpoint_name(c->record_key));
  const std::vector<bool> present = store.exists_many(names);
  for (size_t i = usable.size(); i-- > 0;) {
    if (!present[i] || !before_deadline(plan)) continue;
    const std::optional<std::string> value = store.get(names[i]);
    if (!value) continue;
    std::optional<Record> record = decode_value(store, names[i], *value, plan, result);
    if (!record) continue;
    if (record->meta.kind != RecordKind::checkpoint || record->meta.key != usable[i]->record_key ||
        record->meta.begin != usable[i]->position) {
      reject(store, names[i], "checkpoint", result);
      continue;
    }
    result.names.push_back(names[i]);
    result.checkpoint = std::move(*record);
    return;
  }
}

}  // namespace

std::string remote_segment_name(const Digest& key) { return "s:" + to_hex(key); }
std::string remote_tail_name(const Digest& index) { return "t:" + to_hex(index); }
std::string remote_checkpoint_name(const Digest& record_key) { return "c:" + to_hex(record_key); }

std::optional<Digest> tail_index(const BlockHasher& hasher, const Digest& parent, std::span<const Token> tokens) {
  const auto block = static_cast<size_t>(hasher.block_size());
  if (tokens.size() < block) return std::nullopt;
  return hasher.next(parent, tokens.first(block));
}

RemoteFetchResult run_remote_fetch(remote::RemoteStore& store, const RemoteFetchPlan& plan) {
  RemoteFetchResult result;
  result.reach = plan.start;
  if (plan.segments) {
    if (!plan.grid_keys.empty()) fetch_grid(store, plan, result);
    if (before_deadline(plan)) fetch_tail(store, plan, result);
  }
  if (!plan.checkpoints.empty() && before_deadline(plan)) fetch_checkpoint(store, plan, result);
  if (result.segments.empty()) result.reach = 0;
  return result;
}

}  // namespace prefixd::cache
