#include "speculative/output_pool.h"

#include <algorithm>
#include <iterator>

namespace prefixd::speculative {

void OutputPool::remember(std::string_view group, std::string_view owner, std::span<const engine::Token> prompt,
                          std::span<const engine::Token> output) {
  if (output.size() < 2) return;
  const std::size_t lead = std::min(prompt.size(), kLeadTokens);
  std::vector<engine::Token> tokens;
  tokens.reserve(lead + output.size());
  tokens.insert(tokens.end(), prompt.end() - static_cast<std::ptrdiff_t>(lead), prompt.end());
  tokens.insert(tokens.end(), output.begin(), output.end());
  if (tokens.size() > max_tokens_) return;
  // The same reply again (a regenerated request at temperature 0) moves to the newest place.
  const auto same = std::ranges::find_if(entries_, [&](const Entry& e) { return e.group == group && e.tokens == tokens; });
  if (same != entries_.end()) {
    Entry kept = std::move(*same);
    entries_.erase(same);
    entries_.push_back(std::move(kept));
    return;
  }
  evict_to(max_tokens_ - tokens.size());
  tokens_ += tokens.size();
  entries_.push_back(Entry{std::string(group), std::string(owner), std::move(tokens)});
}

OutputPool::Found OutputPool::find(std::string_view group, std::span<const engine::Token> context,
                                   std::int32_t max_length) const {
  Found best;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->group != group) continue;
    const SuffixMatch m = longest_suffix_match(it->tokens, context, max_length);
    if (m.length > best.match.length) {
      best.match = m;
      best.continuation = std::span<const engine::Token>(it->tokens).subspan(m.next);
      if (m.length >= max_length) break;  // nothing older can beat it
    }
  }
  return best;
}

void OutputPool::forget_owner(std::string_view owner) {
  std::erase_if(entries_, [&](const Entry& e) {
    if (e.owner != owner) return false;
    tokens_ -= e.tokens.size();
    return true;
  });
}

void OutputPool::clear() {
  entries_.clear();
  tokens_ = 0;
}

void OutputPool::evict_to(std::size_t limit) {
  while (tokens_ > limit && !entries_.empty()) {
    tokens_ -= entries_.front().tokens.size();
    entries_.pop_front();
  }
}

}  // namespace prefixd::speculative
