// The walks the host and disk stores share (cache/segment_index.h): the tail where a grid walk
// stops, under the session fork's rule, and what an index says is stored where. An index of a
// few segments in memory stands in for a store: the rules are the index's, not a store's.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <vector>

#include "cache/block_hash.h"
#include "cache/cache_types.h"
#include "cache/segment_index.h"

namespace prefixd::cache {
namespace {

using engine::Token;

class SegmentsInMemory final : public SegmentIndex {
 public:
  void add(const Digest& key, const Digest& parent, engine::Pos begin, std::vector<Token> tokens) {
    children_.emplace(std::pair{parent, tokens.front()}, key);
    stored_[key] = {begin, std::move(tokens)};
  }
  std::optional<Compared> compare(const Digest& key, std::span<const Token> rest) const override {
    const auto it = stored_.find(key);
    if (it == stored_.end()) return std::nullopt;
    const std::vector<Token>& tokens = it->second.second;
    const auto common = std::ranges::mismatch(tokens, rest).in1 - tokens.begin();
    return Compared{it->second.first, static_cast<std::int32_t>(tokens.size()), static_cast<std::int32_t>(common)};
  }
  std::vector<Digest> children(const Digest& parent, Token first) const override {
    std::vector<Digest> out;
    const auto [lo, hi] = children_.equal_range(std::pair{parent, first});
    for (auto it = lo; it != hi; ++it) out.push_back(it->second);
    return out;
  }

 private:
  std::map<Digest, std::pair<engine::Pos, std::vector<Token>>> stored_;
  std::multimap<std::pair<Digest, Token>, Digest> children_;
};

Digest key_named(std::uint8_t n) {
  Digest d{};
  d[0] = n;
  return d;
}

std::vector<Token> tokens_from(Token first, int n) {
  std::vector<Token> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), first);
  return out;
}

class SegmentIndexTest : public ::testing::Test {
 protected:
  BlockHasher hasher_{CacheConfig{}.hash, 4};
  std::vector<Token> query_ = tokens_from(100, 16);  // positions 0..15
  std::vector<Token> rest_at(engine::Pos pos, int n) const { return tokens_from(100 + pos, n); }
};

TEST_F(SegmentIndexTest, TheTailSharingTheMostTokensWinsAndOnlyWhereTheWalkStopped) {
  const Lineage lineage{std::string(32, 'n')};
  const std::vector<Digest> chain = hasher_.chain(lineage, query_);
  const Digest parent = hasher_.parent(lineage, chain, 8, 16);
  SegmentsInMemory index;
  std::vector<Token> three = rest_at(8, 3);
  three.push_back(7);  // diverges after 3 tokens
  index.add(key_named(1), parent, 8, three);
  index.add(key_named(2), parent, 8, rest_at(8, 5));
  index.add(key_named(3), parent, 4, rest_at(8, 8));  // begins elsewhere: not this tail
  const Tail tail = best_tail(index, hasher_, lineage, chain, query_, 8);
  EXPECT_EQ(tail.key, key_named(2));
  EXPECT_EQ(tail.take, 5);
  EXPECT_EQ(tail.parent, parent);
  EXPECT_EQ(best_tail(index, hasher_, lineage, chain, query_, 16).take, 0) << "nothing past the query";
}

TEST_F(SegmentIndexTest, BeforeTheForkTheNamespacesSegmentsServeEverySessionUpToTheForkOnly) {
  Lineage lineage{std::string(32, 'n'), 10, key_named(9)};
  const std::vector<Digest> chain = hasher_.chain(lineage, query_);
  const Digest salted = hasher_.parent(lineage, chain, 8, 16);
  const Digest unforked = hasher_.parent(lineage, chain, 8, 9);
  ASSERT_NE(salted, unforked);
  SegmentsInMemory index;
  // Another session's segment of the namespace shares all 8 tokens, but only [8, 10) lies before
  // the fork.
  index.add(key_named(1), unforked, 8, rest_at(8, 8));
  Tail tail = best_tail(index, hasher_, lineage, chain, query_, 8);
  EXPECT_EQ(tail.key, key_named(1));
  EXPECT_EQ(tail.take, 2);
  EXPECT_EQ(tail.parent, unforked);
  // The session's own (salted) segment goes on past the fork.
  index.add(key_named(2), salted, 8, rest_at(8, 6));
  tail = best_tail(index, hasher_, lineage, chain, query_, 8);
  EXPECT_EQ(tail.key, key_named(2));
  EXPECT_EQ(tail.take, 6);
  // Where the walk stops past the fork, only the lineage's own salted chain counts: neither the
  // namespace's segments nor those stored under the earlier fork are found.
  lineage.fork = 4;
  const std::vector<Digest> late = hasher_.chain(lineage, query_);
  EXPECT_EQ(best_tail(index, hasher_, lineage, late, query_, 8).take, 0);
}

TEST_F(SegmentIndexTest, BeginsAtNamesAStoredKeyAndItsStart) {
  const Digest parent = key_named(7);
  SegmentsInMemory index;
  index.add(key_named(4), parent, 8, rest_at(8, 6));
  EXPECT_TRUE(index.begins_at(key_named(4), 8));
  EXPECT_FALSE(index.begins_at(key_named(4), 4));
  EXPECT_FALSE(index.begins_at(key_named(5), 8));
}

}  // namespace
}  // namespace prefixd::cache
