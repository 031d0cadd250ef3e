#include "cache/retention.h"

#include <algorithm>
#include <utility>

namespace prefixd::cache {
namespace {

bool is_prefix_of(std::span<const engine::Token> prefix, std::span<const engine::Token> tokens) {
  return prefix.size() <= tokens.size() && std::equal(prefix.begin(), prefix.end(), tokens.begin());
}

}  // namespace

Retentions::Added Retentions::add(Retention retention, RetentionClock::time_point now) {
  expire(now);
  const auto length = static_cast<std::int64_t>(retention.tokens.size());
  if (!enabled() || length == 0) return Added::refused;
  if (length > tokens_per_scope_) {
    counters_.refused += 1;
    return Added::refused;
  }
  // A retention this one extends (or repeats) is replaced by it; its deadline carries over when
  // later. One this one is a prefix of already keeps these tokens: it is prolonged instead.
  bool renewed = false;
  for (auto it = retentions_.begin(); it != retentions_.end();) {
    if (it->ns != retention.ns) {
      ++it;
      continue;
    }
    if (is_prefix_of(it->tokens, retention.tokens)) {
      retention.until = std::max(retention.until, it->until);
      renewed = true;
      erase(it++);
      continue;
    }
    if (is_prefix_of(retention.tokens, it->tokens)) {
      if (retention.until > it->until) {
        it->until = retention.until;
        retentions_.splice(retentions_.end(), retentions_, it);  // order: by when last renewed
      }
      counters_.renewed += 1;
      return Added::renewed;
    }
    ++it;
  }
  // Within the scope's budget: its retentions with the nearest deadlines give way.
  while (tokens_of(retention.scope) + length > tokens_per_scope_) {
    auto nearest = retentions_.end();
    for (auto it = retentions_.begin(); it != retentions_.end(); ++it) {
      if (it->scope == retention.scope && (nearest == retentions_.end() || it->until < nearest->until)) nearest = it;
    }
    counters_.lifted += 1;
    erase(nearest);
  }
  index(retention);
  tokens_ += length;
  retentions_.push_back(std::move(retention));
  (renewed ? counters_.renewed : counters_.added) += 1;
  return renewed ? Added::renewed : Added::retained;
}

std::int64_t Retentions::expire(RetentionClock::time_point now) {
  std::int64_t expired = 0;
  for (auto it = retentions_.begin(); it != retentions_.end();) {
    if (it->until <= now) {
      erase(it++);
      ++expired;
    } else {
      ++it;
    }
  }
  counters_.expired += expired;
  return expired;
}

void Retentions::clear() {
  counters_.lifted += size();
  retentions_.clear();
  key_counts_.clear();
  tokens_ = 0;
}

void Retentions::clear_scope(const ScopeId& scope) {
  for (auto it = retentions_.begin(); it != retentions_.end();) {
    if (it->scope == scope) {
      counters_.lifted += 1;
      erase(it++);
    } else {
      ++it;
    }
  }
}

void Retentions::lift_path(const std::string& ns, std::span<const engine::Token> tokens, std::int32_t keep) {
  for (auto it = retentions_.begin(); it != retentions_.end();) {
    const std::size_t n = std::min(it->tokens.size(), tokens.size());
    const auto common = static_cast<std::size_t>(
        std::mismatch(it->tokens.begin(), it->tokens.begin() + static_cast<std::ptrdiff_t>(n), tokens.begin()).first -
        it->tokens.begin());
    if (it->ns == ns && common > static_cast<std::size_t>(std::max(0, keep))) {
      counters_.lifted += 1;
      erase(it++);
    } else {
      ++it;
    }
  }
}

bool Retentions::covers(const std::string& ns, std::span<const engine::Token> tokens) const {
  return std::ranges::any_of(retentions_, [&](const Retention& r) { return r.ns == ns && is_prefix_of(r.tokens, tokens); });
}

std::int64_t Retentions::tokens_of(const ScopeId& scope) const {
  std::int64_t sum = 0;
  for (const Retention& r : retentions_) {
    if (r.scope == scope) sum += static_cast<std::int64_t>(r.tokens.size());
  }
  return sum;
}

void Retentions::index(const Retention& retention) {
  for (const Digest& key : retention.keys) key_counts_[key] += 1;
}

void Retentions::erase(List::iterator it) {
  for (const Digest& key : it->keys) {
    if (auto found = key_counts_.find(key); found != key_counts_.end() && --found->second == 0) key_counts_.erase(found);
  }
  tokens_ -= static_cast<std::int64_t>(it->tokens.size());
  retentions_.erase(it);
}

}  // namespace prefixd::cache
