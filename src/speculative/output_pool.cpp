#include "speculative/output_pool.h"

#include <algorithm>
#include <functional>
#include <iterator>

namespace prefixd::speculative {

std::uint64_t OutputPool::run_key(std::string_view group, std::span<const engine::Token> run) {
  std::uint64_t key = std::hash<std::string_view>{}(group);
  for (const engine::Token t : run) {
    key ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(t)) + 0x9e3779b97f4a7c15ULL + (key << 6) + (key >> 2);
  }
  return key;
}

void OutputPool::remember(std::string_view group, std::string_view owner, std::span<const engine::Token> prompt,
                          std::span<const engine::Token> output) {
  if (output.size() < 2) return;
  const std::size_t lead = std::min(prompt.size(), kLeadTokens);
  std::vector<engine::Token> tokens;
  tokens.reserve(lead + output.size());
  tokens.insert(tokens.end(), prompt.end() - static_cast<std::ptrdiff_t>(lead), prompt.end());
  tokens.insert(tokens.end(), output.begin(), output.end());
  if (tokens.size() > max_tokens_) return;
  // The same reply again (a regenerated request at temperature 0) becomes the newest entry.
  const auto same = std::ranges::find_if(entries_, [&](const auto& e) { return e.second.group == group && e.second.tokens == tokens; });
  if (same != entries_.end()) erase(same);
  evict_to(max_tokens_ - tokens.size());
  add(next_id_++, Entry{std::string(group), std::string(owner), std::move(tokens)});
}

void OutputPool::add(std::uint64_t id, Entry entry) {
  const std::span<const engine::Token> tokens(entry.tokens);
  for (std::size_t end = kIndexedTokens - 1; end + 1 < tokens.size(); ++end) {
    const auto run = tokens.subspan(end + 1 - kIndexedTokens, kIndexedTokens);
    index_[run_key(entry.group, run)].push_back(Place{id, static_cast<std::uint32_t>(end)});
  }
  tokens_ += entry.tokens.size();
  entries_.emplace(id, std::move(entry));
}

void OutputPool::erase(std::map<std::uint64_t, Entry>::iterator it) {
  const std::uint64_t id = it->first;
  const Entry& entry = it->second;
  const std::span<const engine::Token> tokens(entry.tokens);
  for (std::size_t end = kIndexedTokens - 1; end + 1 < tokens.size(); ++end) {
    const auto key = run_key(entry.group, tokens.subspan(end + 1 - kIndexedTokens, kIndexedTokens));
    const auto places = index_.find(key);
    if (places == index_.end()) continue;
    std::erase_if(places->second, [id](const Place& p) { return p.entry == id; });
    if (places->second.empty()) index_.erase(places);
  }
  tokens_ -= entry.tokens.size();
  entries_.erase(it);
}

OutputPool::Found OutputPool::find(std::string_view group, std::span<const engine::Token> context,
                                   std::int32_t max_length) const {
  Found best;
  if (context.size() < static_cast<std::size_t>(kIndexedTokens) || max_length < kIndexedTokens) return best;
  const auto places = index_.find(run_key(group, context.last(kIndexedTokens)));
  if (places == index_.end()) return best;
  const std::size_t context_end = context.size() - 1;
  // Newest entries first, each from its latest place: among equally long matches the first found
  // stays.
  for (auto it = places->second.rbegin(); it != places->second.rend(); ++it) {
    const auto entry = entries_.find(it->entry);
    if (entry == entries_.end() || entry->second.group != group) continue;
    const std::vector<engine::Token>& tokens = entry->second.tokens;
    std::int32_t length = 0;
    while (length < max_length && static_cast<std::size_t>(length) <= it->end &&
           static_cast<std::size_t>(length) <= context_end &&
           tokens[it->end - static_cast<std::size_t>(length)] == context[context_end - static_cast<std::size_t>(length)]) {
      ++length;
    }
    if (length < kIndexedTokens) continue;  // another run under the same key
    if (length > best.match.length) {
      best.match = SuffixMatch{length, it->end + 1};
      best.continuation = std::span<const engine::Token>(tokens).subspan(it->end + 1);
      if (length >= max_length) break;
    }
  }
  return best;
}

void OutputPool::forget_owner(std::string_view owner) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    const auto next = std::next(it);
    if (it->second.owner == owner) erase(it);
    it = next;
  }
}

void OutputPool::clear() {
  entries_.clear();
  index_.clear();
  tokens_ = 0;
}

void OutputPool::evict_to(std::size_t limit) {
  while (tokens_ > limit && !entries_.empty()) erase(entries_.begin());
}

}  // namespace prefixd::speculative
