// N-gram drafting's lookups at the pool's default bound: 1,048,576 tokens of earlier replies
// (replies of 192 tokens after their 64-token leads, from a 32,000-token vocabulary), one group.
// Each iteration drafts as the scheduler does at a decode step: from the context's own tokens (a
// 4,096-token prompt and reply) and from the pool, through its index.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "speculative/ngram_drafter.h"
#include "speculative/output_pool.h"

namespace {

using prefixd::engine::Token;
using prefixd::speculative::OutputPool;

void BM_DraftFromAFullPool(benchmark::State& state) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<Token> token(0, 31999);
  OutputPool pool(std::size_t{1} << 20);
  std::vector<Token> prompt(OutputPool::kLeadTokens);
  std::vector<Token> reply(192);
  while (pool.tokens() + prompt.size() + reply.size() <= pool.max_tokens()) {
    for (auto& t : prompt) t = token(rng);
    for (auto& t : reply) t = token(rng);
    pool.remember("namespace", "tenant", prompt, reply);
  }
  std::vector<Token> context(4096);
  for (auto& t : context) t = token(rng);
  std::size_t drafted = 0;
  for (auto _ : state) {
    context.back() = token(rng);
    auto draft = prefixd::speculative::draft_ngram(context, &pool, "namespace", 16, 2);
    drafted += draft.tokens.size();
    benchmark::DoNotOptimize(draft);
  }
  state.counters["pool_tokens"] = static_cast<double>(pool.tokens());
  state.counters["drafted"] = static_cast<double>(drafted);
}
BENCHMARK(BM_DraftFromAFullPool)->Unit(benchmark::kMicrosecond);

// What one lookup would cost if the pool were read whole: one pass of longest_suffix_match over
// as many tokens (the pass prompt lookup makes over a request's own tokens, at this length).
void BM_ReadAMillionTokens(benchmark::State& state) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<Token> token(0, 31999);
  std::vector<Token> source(std::size_t{1} << 20);
  for (auto& t : source) t = token(rng);
  std::vector<Token> context(64);
  for (auto& t : context) t = token(rng);
  for (auto _ : state) {
    context.back() = token(rng);
    auto match = prefixd::speculative::longest_suffix_match(source, context, 32);
    benchmark::DoNotOptimize(match);
  }
}
BENCHMARK(BM_ReadAMillionTokens)->Unit(benchmark::kMicrosecond);

}  // namespace
