// The scheduler over the FakeEngine: batching, streaming, stops, cancellation, admission.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "support/fake_engine.h"
#include "scheduler/scheduler.h"
#include "scheduler/text_stream.h"

namespace prefixd::scheduler {
namespace {

using namespace std::chrono_literals;

struct Collected {
  std::string text;
  StreamEvent done;
  int text_events = 0;
};

Collected collect(RequestStream& stream) {
  Collected out;
  while (true) {
    auto event = stream.next(10s);
    if (!event) ADD_FAILURE() << "stream timed out";
    if (!event) return out;
    if (event->kind == StreamEvent::Kind::done) {
      out.done = *event;
      return out;
    }
    out.text += event->text;
    ++out.text_events;
  }
}

// A FakeEngine whose first decode waits until release(): a test submits a one-token blocker,
// waits for held(), queues everything else, then releases, so the scheduler admits the rest
// together and their order is the policy's alone, however loaded the machine is.
struct HeldFirstDecode {
  std::promise<void> entered, released;
  std::shared_future<void> go = released.get_future().share();
  std::atomic<bool> first{true};
  std::function<void()> hook() {
    return [this] {
      if (!first.exchange(false)) return;
      entered.set_value();
      go.wait();
    };
  }
  void held() { entered.get_future().wait(); }
  void release() { released.set_value(); }
};

GenerationRequest greedy(std::string_view prompt, int max_tokens) {
  GenerationRequest r;
  for (unsigned char c : prompt) r.prompt.push_back(c);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  return r;
}

TEST(Scheduler, GeneratesUpToMaxTokensWithExactUsage) {
  engine::FakeEngine engine({.n_ctx = 512, .n_batch = 16, .n_seq = 4, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 0});
  auto stream = scheduler.submit(greedy("hello there, how are you?", 12));
  ASSERT_TRUE(stream.has_value());
  Collected c = collect(**stream);
  EXPECT_EQ(c.done.finish, FinishReason::length);
  EXPECT_EQ(c.done.usage.prompt_tokens, 25);
  EXPECT_EQ(c.done.usage.completion_tokens, 12);
  EXPECT_EQ(c.done.cache.fed_tokens, 25);
  // The prompt (25 tokens, batch 16) is fed in two chunks, then 11 decode steps: 36 tokens.
  EXPECT_EQ(engine.tokens_decoded(), 25 + 11);
  EXPECT_EQ(engine.used_cells(), 0) << "without a cache, a finished request leaves no cells behind";
}

// The fake's end-of-generation token is 256: a prompt whose greedy next token is that one ends
// with no output, unless the request asks to ignore it.
TEST(Scheduler, IgnoreEosRunsToMaxTokensWhereGreedyWouldEndAtOnce) {
  engine::FakeEngine engine({.n_ctx = 512, .n_batch = 16, .n_seq = 4, .n_vocab = 257});
  std::string prompt;
  for (int i = 0; i < 100000 && prompt.empty(); ++i) {
    const std::string candidate = "prompt " + std::to_string(i);
    const std::vector<engine::Token> tokens(candidate.begin(), candidate.end());
    const auto logits = engine.logits_for_history(tokens);
    if (std::max_element(logits.begin(), logits.end()) - logits.begin() == 256) prompt = candidate;
  }
  ASSERT_FALSE(prompt.empty()) << "no prompt whose greedy next token ends generation";
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 0});
  auto plain = scheduler.submit(greedy(prompt, 5));
  ASSERT_TRUE(plain.has_value());
  const Collected ended = collect(**plain);
  EXPECT_EQ(ended.done.finish, FinishReason::stop);
  EXPECT_EQ(ended.done.usage.completion_tokens, 0);
  GenerationRequest ignoring = greedy(prompt, 5);
  ignoring.sampling.ignore_eos = true;
  auto stream = scheduler.submit(std::move(ignoring));
  ASSERT_TRUE(stream.has_value());
  const Collected ran = collect(**stream);
  EXPECT_EQ(ran.done.finish, FinishReason::length);
  EXPECT_EQ(ran.done.usage.completion_tokens, 5);
}

// t_max_predict_ms: once a newline was generated, the reply ends (length) when the limit has
// passed since its first token; before the newline the limit does not apply.
// A prompt whose greedy reply (one character per token) writes its first newline as its token
// `newline_at`, neither the first token nor later than `within`; empty when none was found.
std::pair<std::string, int> prompt_with_early_newline(const engine::FakeEngine& engine, int within) {
  for (int i = 0; i < 10000; ++i) {
    const std::string candidate = "line " + std::to_string(i);
    std::vector<engine::Token> history(candidate.begin(), candidate.end());
    for (int k = 0; k < within; ++k) {
      const auto logits = engine.logits_for_history(history);
      const auto next = static_cast<engine::Token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (next == '\n') {
        if (k >= 1) return {candidate, k};
        break;
      }
      history.push_back(next);
    }
  }
  return {"", -1};
}

TEST(Scheduler, ATimeLimitEndsTheReplyAtTheFirstTokenPastItOnceANewlineWasWritten) {
  engine::FakeEngine engine({.n_ctx = 512, .n_batch = 16, .n_seq = 4, .n_vocab = 256, .newline_token = true,
                             .before_decode = [] { std::this_thread::sleep_for(3ms); }});
  constexpr int kMaxTokens = 40;
  const auto [prompt, newline_at] = prompt_with_early_newline(engine, kMaxTokens / 2);
  ASSERT_FALSE(prompt.empty()) << "no prompt whose greedy reply writes a newline early";
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 0});

  auto unlimited = scheduler.submit(greedy(prompt, kMaxTokens));
  ASSERT_TRUE(unlimited.has_value());
  const Collected whole = collect(**unlimited);
  EXPECT_EQ(whole.done.usage.completion_tokens, kMaxTokens);
  ASSERT_EQ(whole.text.find('\n'), static_cast<std::size_t>(newline_at)) << "one character per token";

  GenerationRequest bounded = greedy(prompt, kMaxTokens);
  bounded.time_limit_after_newline = 1ms;  // every decode takes 3 ms: past it at the newline itself
  auto stream = scheduler.submit(std::move(bounded));
  ASSERT_TRUE(stream.has_value());
  const Collected cut = collect(**stream);
  EXPECT_EQ(cut.done.finish, FinishReason::length);
  EXPECT_EQ(cut.done.usage.completion_tokens, newline_at + 1);
  EXPECT_EQ(cut.text, whole.text.substr(0, static_cast<std::size_t>(newline_at) + 1));
}

TEST(Scheduler, AnIndentFloorEndsTheReplyWithLengthBeforeALessIndentedLine) {
  engine::FakeEngine engine({.n_ctx = 512, .n_batch = 16, .n_seq = 4, .n_vocab = 256, .newline_token = true});
  constexpr int kMaxTokens = 40;
  const auto [prompt, newline_at] = prompt_with_early_newline(engine, kMaxTokens / 2);
  ASSERT_FALSE(prompt.empty()) << "no prompt whose greedy reply writes a newline early";
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 0});
  auto unlimited = scheduler.submit(greedy(prompt, kMaxTokens));
  ASSERT_TRUE(unlimited.has_value());
  const Collected whole = collect(**unlimited);
  // Where the line after the first newline has its first non-blank character.
  const std::size_t first_non_blank = whole.text.find_first_not_of(" \t\n", static_cast<std::size_t>(newline_at));
  ASSERT_NE(first_non_blank, std::string::npos) << whole.text;
  ASSERT_EQ(whole.text.find('\n', static_cast<std::size_t>(newline_at) + 1) < first_non_blank, false)
      << "the search wants a line with text right after the first newline";

  GenerationRequest floored = greedy(prompt, kMaxTokens);
  floored.indent_floor = static_cast<std::int32_t>(first_non_blank - static_cast<std::size_t>(newline_at));
  auto stream = scheduler.submit(std::move(floored));
  ASSERT_TRUE(stream.has_value());
  const Collected cut = collect(**stream);
  EXPECT_EQ(cut.done.finish, FinishReason::length);
  EXPECT_EQ(cut.text, whole.text.substr(0, first_non_blank));
  EXPECT_EQ(cut.done.usage.completion_tokens, static_cast<std::int32_t>(first_non_blank) + 1);
}

TEST(Scheduler, LogprobsComeWithEveryGeneratedTokenAndNameTheGreedyChoice) {
  engine::FakeEngine engine({.n_ctx = 512, .n_batch = 16, .n_seq = 4, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 0});
  GenerationRequest r = greedy("logprobs please", 6);
  r.logprobs = 3;
  auto stream = scheduler.submit(std::move(r));
  ASSERT_TRUE(stream.has_value());
  std::vector<GeneratedLogprobs> all;
  std::string pieces;
  for (;;) {
    auto event = (*stream)->next(10s);
    ASSERT_TRUE(event.has_value());
    if (event->kind == StreamEvent::Kind::done) break;
    for (auto& t : event->logprobs) {
      pieces += t.chosen.piece;
      all.push_back(std::move(t));
    }
  }
  ASSERT_EQ(all.size(), 6u);
  for (const auto& t : all) {
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_EQ(t.top[0].id, t.chosen.id) << "greedy sampling picks the most likely token";
    EXPECT_FLOAT_EQ(t.top[0].logprob, t.chosen.logprob);
    EXPECT_LE(t.chosen.logprob, 0.0f);
    EXPECT_GE(t.top[0].logprob, t.top[1].logprob);
    EXPECT_GE(t.top[1].logprob, t.top[2].logprob);
  }
  GenerationRequest plain = greedy("logprobs please", 6);
  EXPECT_EQ(collect(**scheduler.submit(std::move(plain))).text, pieces) << "the entries spell the generated text";
}

TEST(Scheduler, ConcurrentRequestsGiveTheSameOutputAsAlone) {
  engine::FakeEngine engine({.n_ctx = 1024, .n_batch = 8, .n_seq = 4});
  Scheduler scheduler(engine, {.n_slots = 4});
  const std::vector<std::string> prompts = {"alpha prompt", "the second, longer prompt here", "c", "delta delta"};
  std::vector<std::string> alone;
  for (const auto& p : prompts) alone.push_back(collect(**scheduler.submit(greedy(p, 20))).text);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) streams.push_back(*scheduler.submit(greedy(p, 20)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    Collected c = collect(*streams[i]);
    EXPECT_EQ(c.text, alone[i]) << "request " << i;
    EXPECT_NE(c.done.finish, FinishReason::error);
  }
}

TEST(Scheduler, CancelledRequestFinishesAsCancelledAndFreesItsSequence) {
  engine::FakeEngine engine({.n_ctx = 4096, .n_batch = 4, .n_seq = 1, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 1});
  auto stream = *scheduler.submit(greedy("a long generation", -1));
  ASSERT_TRUE(stream->next(10s).has_value());
  stream->cancel();
  Collected c = collect(*stream);
  EXPECT_EQ(c.done.finish, FinishReason::cancelled);
  // The only slot is free again: a new request completes.
  Collected next = collect(**scheduler.submit(greedy("next", 3)));
  EXPECT_EQ(next.done.finish, FinishReason::length);
}

TEST(Scheduler, FullQueueIsRefused) {
  engine::FakeEngine engine({.n_ctx = 4096, .n_batch = 4, .n_seq = 1, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 1, .max_queued = 1});
  std::vector<std::shared_ptr<RequestStream>> accepted;
  bool refused = false;
  for (int i = 0; i < 4 && !refused; ++i) {
    auto r = scheduler.submit(greedy("busy busy", -1));
    if (r) accepted.push_back(*r);
    else refused = r.error() == SubmitError::queue_full;
  }
  EXPECT_TRUE(refused);
  for (auto& s : accepted) s->cancel();
  for (auto& s : accepted) collect(*s);
}

// A burst into an idle server: as many requests as it has free slots start at once, so they are
// not queued, and max_queued more wait. Before, the inbox counted the whole burst as queued and
// refused the request that would have started in the second free slot.
TEST(Scheduler, ABurstFillsTheFreeSlotsBeforeTheQueueLimitCounts) {
  engine::FakeEngine engine({.n_ctx = 4096, .n_batch = 4, .n_seq = 4, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 3, .max_queued = 1, .cache_holders = 0});
  // The scheduler thread runs a command that waits, so nothing leaves the inbox meanwhile.
  std::promise<void> entered, released;
  std::shared_future<void> go = released.get_future().share();
  std::thread holder([&] { scheduler.ask_cache([&](cache::CacheAdmin&) { entered.set_value(); go.wait(); }); });
  entered.get_future().wait();
  std::vector<std::shared_ptr<RequestStream>> accepted;
  for (int i = 0; i < 4; ++i) {
    auto r = scheduler.submit(greedy("burst " + std::to_string(i), 2));
    ASSERT_TRUE(r.has_value()) << "request " << i << " of 3 slots + 1 queued was refused";
    accepted.push_back(*r);
  }
  auto beyond = scheduler.submit(greedy("one too many", 2));
  ASSERT_FALSE(beyond.has_value());
  EXPECT_EQ(beyond.error(), SubmitError::queue_full);
  released.set_value();
  holder.join();
  for (auto& s : accepted) EXPECT_EQ(collect(*s).done.finish, FinishReason::length);
}

TEST(Scheduler, PromptLongerThanTheContextIsRefused) {
  engine::FakeEngine engine({.n_ctx = 32, .n_batch = 8, .n_seq = 1});
  Scheduler scheduler(engine, {.n_slots = 1});
  auto r = scheduler.submit(greedy(std::string(40, 'x'), 1));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), SubmitError::prompt_too_long);
  EXPECT_EQ(scheduler.submit(GenerationRequest{}).error(), SubmitError::empty_prompt);
}

TEST(Scheduler, StopStringEndsGenerationAndIsNotReturned) {
  engine::FakeEngine engine({.n_ctx = 512, .n_batch = 16, .n_seq = 1, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 1});
  const std::string full = collect(**scheduler.submit(greedy("stop test", 30))).text;
  ASSERT_GE(full.size(), 10u);
  GenerationRequest r = greedy("stop test", 30);
  r.stop = {full.substr(5, 3)};
  Collected c = collect(**scheduler.submit(std::move(r)));
  EXPECT_EQ(c.done.finish, FinishReason::stop);
  EXPECT_EQ(c.text, full.substr(0, full.find(full.substr(5, 3))));
}

TEST(TextStream, HoldsBackIncompleteUtf8) {
  TextStream s({});
  EXPECT_EQ(s.append("a\xC3"), "a");
  EXPECT_EQ(s.append("\xA9"), "\xC3\xA9");
  EXPECT_EQ(s.append("\xE2\x82"), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD\xEF\xBF\xBD") << "an unfinished sequence becomes replacement characters";
}

TEST(TextStream, StopStringSplitAcrossPiecesIsRemoved) {
  TextStream s({"END"});
  EXPECT_EQ(s.append("hello E"), "hello ");
  EXPECT_EQ(s.append("N"), "");
  EXPECT_EQ(s.append("D tail"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.finish(), "");
}

TEST(TextStream, SaysWhichStopStringEndedTheText) {
  TextStream s({"zz", "END", "ND"});
  EXPECT_EQ(s.matched_stop(), "");
  EXPECT_EQ(s.append("a E"), "a ");
  EXPECT_EQ(s.append("ND"), "");  // "END" starts first, though "ND" is found too
  EXPECT_EQ(s.matched_stop(), "END");
  TextStream tie({"xy", "x"});
  tie.append("axyz");
  EXPECT_EQ(tie.matched_stop(), "xy");  // one place: the first listed
}

TEST(TextStream, FalseStopPrefixIsReleased) {
  TextStream s({"END"});
  EXPECT_EQ(s.append("E"), "");
  EXPECT_EQ(s.append("x"), "Ex");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, AnIndentFloorEndsTheTextBeforeTheFirstLessIndentedLineAfterTheFirst) {
  TextStream s({}, 4);
  // The cursor's own line is never measured, however little it is indented.
  EXPECT_EQ(s.append("x = 1"), "x = 1");
  EXPECT_EQ(s.append("\n    y"), "\n    y");  // four spaces: at the floor
  EXPECT_EQ(s.append("\n\t\t\t\tz"), "\n\t\t\t\tz");  // a tab counts as one, as in llama.cpp
  EXPECT_EQ(s.append("\n\n"), "\n\n");  // a blank line never ends the text
  EXPECT_EQ(s.append("  "), "  ");      // nor does a line's indent before its first non-blank
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.append(" w = 2\n"), " ");  // three blanks: the text ends before the 'w'
  EXPECT_TRUE(s.stopped());
  EXPECT_TRUE(s.ended_by_indent());
  EXPECT_EQ(s.matched_stop(), "");
  EXPECT_EQ(s.append("more"), "");
}

TEST(TextStream, AStopStringBeforeTheIndentCutWins) {
  TextStream s({"END"}, 2);
  EXPECT_EQ(s.append("a\n  bEND\nc"), "a\n  b");
  EXPECT_FALSE(s.ended_by_indent());
  EXPECT_EQ(s.matched_stop(), "END");

  TextStream later({"END"}, 2);
  EXPECT_EQ(later.append("a\nbEND"), "a\n");
  EXPECT_TRUE(later.ended_by_indent());
}

TEST(TextStream, IndentIsMeasuredAcrossHeldBackText) {
  TextStream s({"ZZZ"}, 2);
  EXPECT_EQ(s.append("a\n  Z"), "a\n  ");  // "Z" is held back: it may start the stop string
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.append("q\n b"), "Zq\n ");  // one blank, then a non-blank: below the floor of two
  EXPECT_TRUE(s.ended_by_indent());
}

}  // namespace
}  // namespace prefixd::scheduler

namespace prefixd::scheduler {
namespace {

GenerationRequest cached(std::vector<engine::Token> prompt, int max_tokens, std::string session = "") {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.cache.namespace_digest = "namespace";
  r.cache.session_key = std::move(session);
  return r;
}

std::vector<engine::Token> tokens_from(int seed, int count) {
  std::vector<engine::Token> out;
  for (int i = 0; i < count; ++i) out.push_back((seed * 31 + i * 7) % 250);
  return out;
}

TEST(SchedulerCache, IdenticalResendFeedsOneTokenAndGivesTheSameOutput) {
  engine::FakeEngine engine({.n_ctx = 2048, .n_batch = 32, .n_seq = 8, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 4});
  const auto prompt = tokens_from(1, 300);
  Collected cold = collect(**scheduler.submit(cached(prompt, 8)));
  const auto decoded_before = engine.tokens_decoded();
  Collected warm = collect(**scheduler.submit(cached(prompt, 8)));
  EXPECT_EQ(cold.done.cache.outcome, cache::Outcome::cold);
  EXPECT_EQ(warm.done.cache.outcome, cache::Outcome::hit_extend);
  EXPECT_EQ(warm.done.cache.fed_tokens, 1);
  EXPECT_EQ(warm.done.usage.cached_tokens, 299);
  EXPECT_EQ(warm.text, cold.text) << "a warm request samples from the same logits as a cold one";
  EXPECT_EQ(engine.tokens_decoded() - decoded_before, 1 + 7);
}

// The batches decode() got from `from` on that hold a row of `seq`: how the scheduler computed it.
std::vector<std::vector<engine::BatchToken>> batches_of(const engine::FakeEngine& engine, size_t from, engine::SeqId seq) {
  std::vector<std::vector<engine::BatchToken>> out;
  for (size_t i = from; i < engine.batches().size(); ++i) {
    std::vector<engine::BatchToken> rows;
    for (const engine::BatchToken& t : engine.batches()[i]) {
      if (t.seq == seq) rows.push_back(t);
    }
    if (!rows.empty()) out.push_back(std::move(rows));
  }
  return out;
}

// A prompt's rest that fits a row-wise call with its last token (a short prompt, a hit with a
// short suffix) is computed in that one call, only its last row sampled from; a longer rest
// prefills first. The text is the one computed without the tail (rowwise_rows 0: two calls).
TEST(SchedulerPrefill, APromptsShortRestIsComputedInTheCallItsLastTokenIsSampledFrom) {
  engine::FakeEngine two_calls({.n_ctx = 2048, .n_batch = 64, .n_seq = 8, .n_vocab = 256});
  engine::FakeEngine engine({.n_ctx = 2048, .n_batch = 64, .rowwise_rows = 63, .n_seq = 8, .n_vocab = 256});
  Scheduler plain(two_calls, {.n_slots = 2, .cache_holders = 4});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 4});
  const auto prefix = tokens_from(3, 300);
  auto with_suffix = prefix;
  for (const engine::Token t : tokens_from(4, 20)) with_suffix.push_back(t);
  const auto short_prompt = tokens_from(5, 40);

  const Collected short_reply = collect(**scheduler.submit(cached(short_prompt, 4)));
  EXPECT_EQ(short_reply.text, collect(**plain.submit(cached(short_prompt, 4))).text);
  auto calls = batches_of(engine, 0, 0);
  ASSERT_GE(calls.size(), 1U);
  ASSERT_EQ(calls[0].size(), 40U) << "the whole short prompt in one call";
  EXPECT_EQ(std::ranges::count_if(calls[0], [](const engine::BatchToken& t) { return t.logits; }), 1);
  EXPECT_TRUE(calls[0].back().logits);
  EXPECT_EQ(calls.size(), 1U + 3U) << "then one call per decode token";

  collect(**scheduler.submit(cached(prefix, 1)));
  collect(**plain.submit(cached(prefix, 1)));
  const size_t before_hit = engine.batches().size();
  const Collected hit = collect(**scheduler.submit(cached(with_suffix, 4)));
  EXPECT_EQ(hit.done.cache.outcome, cache::Outcome::hit_extend);
  EXPECT_EQ(hit.done.cache.fed_tokens, 20);
  EXPECT_EQ(hit.text, collect(**plain.submit(cached(with_suffix, 4))).text);
  calls = batches_of(engine, before_hit, 0);
  ASSERT_GE(calls.size(), 1U);
  EXPECT_EQ(calls[0].size(), 20U) << "the suffix and its last token in one call";
  EXPECT_EQ(calls[0].front().pos, 300);

  // 300 new tokens: batches of 64 until the rest (44) fits one row-wise call with its last token.
  const size_t before_long = engine.batches().size();
  collect(**scheduler.submit(cached(tokens_from(6, 300), 1)));
  calls = batches_of(engine, before_long, 0);
  ASSERT_EQ(calls.size(), 5U);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(calls[i].size(), 64U);
  EXPECT_EQ(calls[4].size(), 44U);
}

// The control plane's update: the whole prompt goes in, nothing is sampled, and all of it is left
// to the cache, so a generation with that prompt feeds only the one-token guard.
TEST(SchedulerCache, PrefillOnlyRequestFeedsThePromptSamplesNothingAndLeavesItCached) {
  engine::FakeEngine engine({.n_ctx = 2048, .n_batch = 32, .n_seq = 8, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 4});
  const auto prompt = tokens_from(3, 200);
  GenerationRequest prefill = cached(prompt, 8);
  prefill.prefill_only = true;
  Collected warmed = collect(**scheduler.submit(std::move(prefill)));
  EXPECT_EQ(warmed.done.finish, FinishReason::length);
  EXPECT_EQ(warmed.done.usage.completion_tokens, 0);
  EXPECT_EQ(warmed.text, "");
  EXPECT_EQ(warmed.done.cache.fed_tokens, 200);
  EXPECT_EQ(engine.tokens_decoded(), 200) << "no decode step after the prompt";
  EXPECT_EQ(scheduler.cache_stats().device.cells, 200) << "all 200 prompt tokens are cached, the last one too";
  Collected next = collect(**scheduler.submit(cached(prompt, 4)));
  EXPECT_EQ(next.done.usage.cached_tokens, 199);
  EXPECT_EQ(next.done.cache.fed_tokens, 1);
}

TEST(SchedulerCache, DisabledRequestBypassesTheCache) {
  engine::FakeEngine engine({.n_ctx = 2048, .n_batch = 32, .n_seq = 8, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 4});
  const auto prompt = tokens_from(2, 100);
  collect(**scheduler.submit(cached(prompt, 2)));
  GenerationRequest off = cached(prompt, 2);
  off.cache.enabled = false;
  Collected c = collect(**scheduler.submit(std::move(off)));
  EXPECT_EQ(c.done.cache.outcome, cache::Outcome::bypass);
  EXPECT_EQ(c.done.cache.fed_tokens, 100);
  EXPECT_EQ(scheduler.cache_stats().device.entries, 1) << "a bypassing request donates nothing";
}

TEST(SchedulerCache, BurstWithACommonPrefixComputesItOnce) {
  engine::FakeEngine engine({.n_ctx = 4096, .n_batch = 64, .n_seq = 16, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 4, .cache_holders = 8});
  const auto prefix = tokens_from(3, 400);
  std::vector<std::shared_ptr<RequestStream>> streams;
  int question_tokens = 0;
  for (int i = 0; i < 8; ++i) {
    auto prompt = prefix;
    const auto question = tokens_from(100 + i, 10 + i);
    question_tokens += static_cast<int>(question.size());
    prompt.insert(prompt.end(), question.begin(), question.end());
    streams.push_back(*scheduler.submit(cached(prompt, 1, "user-" + std::to_string(i))));
  }
  int fed = 0;
  for (auto& s : streams) {
    Collected c = collect(*s);
    fed += c.done.cache.fed_tokens;
    EXPECT_EQ(c.done.finish, FinishReason::length);
  }
  EXPECT_LE(fed, 400 + question_tokens + 8);
  EXPECT_LE(engine.tokens_decoded(), 400 + question_tokens + 8);
}

TEST(SchedulerCache, ResetEmptiesTheCache) {
  engine::FakeEngine engine({.n_ctx = 2048, .n_batch = 32, .n_seq = 8, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 4});
  collect(**scheduler.submit(cached(tokens_from(4, 100), 2)));
  EXPECT_EQ(scheduler.cache_stats().device.entries, 1);
  const cache::ResetReport report = scheduler.reset_cache();
  EXPECT_EQ(report.entries, 1);
  EXPECT_EQ(scheduler.cache_stats().device.entries, 0);
  EXPECT_EQ(engine.used_cells(), 0);
}


// A context too small for every request at once: decodes fail for lack of cells, the scheduler
// frees idle cache cells, requeues requests that have sent nothing and ends others with `length`.
// Every request still gets exactly one final event, what the responses say the cache did is what
// the cache counted, and afterwards every used cell is one the cache accounts for.
TEST(SchedulerCache, KvFullPathsFinishEveryRequestAndKeepTheCacheExact) {
  engine::FakeEngine engine({.n_ctx = 320, .n_batch = 32, .n_seq = 8, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 3, .cache_holders = 4});
  const auto shared = tokens_from(7, 60);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 9; ++i) {
    auto prompt = i % 3 == 0 ? tokens_from(50 + i, 70) : shared;
    const auto tail = tokens_from(300 + i, 10 + 5 * i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    streams.push_back(*scheduler.submit(cached(prompt, 120, "s" + std::to_string(i % 2))));
  }
  std::array<std::int64_t, cache::kOutcomeCount> outcomes{};
  int ended_by_length = 0;
  for (auto& s : streams) {
    Collected c = collect(*s);
    outcomes[static_cast<size_t>(c.done.cache.outcome)] += 1;
    ended_by_length += c.done.finish == FinishReason::length ? 1 : 0;
    EXPECT_NE(c.done.finish, FinishReason::error) << c.done.error;
    EXPECT_EQ(c.done.cache.cached_tokens + c.done.cache.fed_tokens, c.done.usage.prompt_tokens);
  }
  EXPECT_GT(ended_by_length, 0);
  const cache::CacheStats stats = scheduler.cache_stats();
  EXPECT_EQ(stats.requests.outcomes, outcomes) << "responses and the cache's counters agree";
  EXPECT_GT(stats.device.demotions + stats.device.evictions, 0) << "the context ran full";
  EXPECT_EQ(stats.requests.running, 0);
  EXPECT_EQ(engine.used_cells(), stats.device.cells);
}

TEST(SchedulerCache, ACacheWithoutRoomForAScratchSequenceIsOff) {
  engine::FakeEngine engine({.n_ctx = 256, .n_batch = 32, .n_seq = 2, .n_vocab = 256});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 4});
  Collected c = collect(**scheduler.submit(cached(tokens_from(1, 40), 3)));
  EXPECT_EQ(c.done.cache.outcome, cache::Outcome::bypass);
  EXPECT_FALSE(scheduler.cache_stats().enabled);
}


// Without packing (the CPU default), prompts are prefilled shortest-remaining first and a batch
// completes at most one prompt: a short prompt never waits for another prompt's tokens.
TEST(SchedulerPrefill, ShortPromptsPreemptLongOnesAndNeverShareTheirLastBatch) {
  HeldFirstDecode hold;
  engine::FakeEngine engine({.n_ctx = 2048, .n_batch = 32, .n_seq = 8, .n_vocab = 256, .before_decode = hold.hook()});
  Scheduler scheduler(engine, {.n_slots = 5, .cache_holders = 0, .prefill_packing = PrefillPacking::off});
  const auto blocker = *scheduler.submit(greedy("z", 1));
  hold.held();
  std::vector<std::shared_ptr<RequestStream>> streams;
  streams.push_back(*scheduler.submit(greedy(std::string(600, 'L'), 1)));
  for (int length : {10, 20, 30, 40}) {
    streams.push_back(*scheduler.submit(greedy(std::string(static_cast<size_t>(length), static_cast<char>('a' + length / 10)), 1)));
  }
  hold.release();
  EXPECT_EQ(collect(*blocker).done.finish, FinishReason::length);
  for (auto& s : streams) EXPECT_EQ(collect(*s).done.finish, FinishReason::length);

  // max_tokens 1: no sampled token is ever fed back, so every batched token is a prompt token and a
  // token with logits completes its prompt.
  std::map<engine::Token, size_t> completed_in;  // first prompt token ('L' for the long one) -> batch
  std::map<engine::SeqId, engine::Token> first_token;
  for (size_t b = 0; b < engine.batches().size(); ++b) {
    int completed = 0;
    for (const engine::BatchToken& t : engine.batches()[b]) {
      if (t.pos == 0) first_token[t.seq] = t.token;
      if (!t.logits) continue;
      completed += 1;
      completed_in[first_token.at(t.seq)] = b;
    }
    EXPECT_LE(completed, 1) << "batch " << b << " completes " << completed << " prompts";
  }
  ASSERT_EQ(completed_in.size(), 6u);  // with the blocker's 'z'
  ASSERT_EQ(completed_in.at('z'), 0u);
  // Reached: the short prompts were computed while the long one was pending (two short ones would
  // fit in one 32-token batch together: packing would have completed them in one).
  EXPECT_LT(completed_in.at('b'), completed_in.at('c'));
  EXPECT_LT(completed_in.at('c'), completed_in.at('d'));
  EXPECT_LT(completed_in.at('d'), completed_in.at('e'));
  EXPECT_LT(completed_in.at('e'), completed_in.at('L'));
}

// Bounded packing (the CPU default): a prompt joins the batch where others complete when the step
// it spares itself and the prompts behind it (at least the batch's decode tokens) outweighs its
// tokens times the prompts completing there. Without decode tokens nothing joins; beside four
// generating streams short prompts finish two and three to a batch; a chunk of a prompt that does
// not complete never joins them.
TEST(SchedulerPrefill, BoundedPackingJoinsPromptsWhenTheStepItSparesOutweighsTheirTokens) {
  HeldFirstDecode hold;
  engine::FakeEngine engine({.n_ctx = 4096, .n_batch = 64, .n_seq = 12, .n_vocab = 256, .before_decode = hold.hook()});
  Scheduler scheduler(engine, {.n_slots = 11, .cache_holders = 0, .prefill_packing = PrefillPacking::bounded});
  const auto blocker = *scheduler.submit(greedy("z", 1));
  hold.held();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (char first : std::string("ABCD")) streams.push_back(*scheduler.submit(greedy(std::string(2, first), 30)));
  for (char first : std::string("abcdef")) streams.push_back(*scheduler.submit(greedy(std::string(8, first), 1)));
  hold.release();
  EXPECT_EQ(collect(*blocker).done.finish, FinishReason::length);
  for (auto& s : streams) EXPECT_EQ(collect(*s).done.finish, FinishReason::length);

  // A step is a prefill call (no logits) and a row-wise call with the rows sampled from (each
  // prompt's last token and the decode tokens); a prompt completes in the step whose row-wise call
  // holds its last token, and its prefill in the prefill call just before.
  const auto prompt_length = [](engine::Token first) { return first == 'z' ? 1 : (std::isupper(first) != 0 ? 2 : 8); };
  std::map<engine::Token, size_t> completed_in;  // first prompt token -> step that completed it
  std::map<engine::SeqId, engine::Token> first_token;
  size_t step = 0;
  for (size_t b = 0; b < engine.batches().size(); ++b) {
    const auto& batch = engine.batches()[b];
    const bool sampled = std::ranges::any_of(batch, [](const engine::BatchToken& t) { return t.logits; });
    for (const engine::BatchToken& t : batch) {
      if (t.pos == 0) first_token[t.seq] = t.token;  // a new request on this sequence (ids are reused)
    }
    if (sampled) {
      for (const engine::BatchToken& t : batch) {
        const engine::Token first = first_token.at(t.seq);
        EXPECT_TRUE(t.logits) << "batch " << b << " mixes prompt tokens with sampled rows";
        if (t.pos == prompt_length(first) - 1) completed_in[first] = step;
      }
      step += 1;
      continue;
    }
    // A prefill call: where one prompt's prefill completes, every prompt in it completes.
    std::map<engine::SeqId, bool> completes;
    for (const engine::BatchToken& t : batch) {
      completes[t.seq] = completes[t.seq] || t.pos == prompt_length(first_token.at(t.seq)) - 2;
    }
    const bool any = std::ranges::any_of(completes, [](const auto& c) { return c.second; });
    for (const auto& [seq, done] : completes) {
      EXPECT_TRUE(!any || done) << "batch " << b << " holds a chunk of a prompt it does not complete";
    }
  }
  ASSERT_EQ(completed_in.size(), 11u);
  // Step 1 has no decode token: A alone. Step 2 (A decoding): B, C, D, 2 tokens each, join
  // (1 × 2 ≤ 8 × 1, 2 × 2 ≤ 7 × 1); a (3 × 8 > 6 × 1) does not. Step 3 (four decoding): a, b, c
  // (1 × 8 ≤ 5 × 4, 2 × 8 ≤ 4 × 4); step 4: d, e (8 ≤ 2 × 4); step 5: f.
  const std::map<engine::Token, size_t> expected = {{'z', 0}, {'A', 1}, {'B', 2}, {'C', 2}, {'D', 2}, {'a', 3},
                                                    {'b', 3}, {'c', 3}, {'d', 4}, {'e', 4}, {'f', 5}};
  EXPECT_EQ(completed_in, expected);
}

// Shortest remaining first, with a bound: a long prompt that keeps losing to a stream of short
// ones goes first once others have prefilled four times its own tokens while it waited.
TEST(SchedulerPrefill, AStreamOfShortPromptsHoldsALongOneBackOnlySoLong) {
  HeldFirstDecode hold;
  engine::FakeEngine engine({.n_ctx = 2048, .n_batch = 32, .n_seq = 4, .n_vocab = 256, .before_decode = hold.hook()});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 0, .prefill_packing = PrefillPacking::off});
  constexpr int kLong = 64, kShort = 8, kShorts = 40;
  const auto blocker = *scheduler.submit(greedy("b", 1));
  hold.held();
  std::vector<std::shared_ptr<RequestStream>> streams;
  streams.push_back(*scheduler.submit(greedy(std::string(kLong, 'L'), 1)));
  for (int i = 0; i < kShorts; ++i) {
    // Each short prompt starts with its own byte (1..40), which names it in the batches below.
    streams.push_back(*scheduler.submit(greedy(std::string(kShort, static_cast<char>(1 + i)), 1)));
  }
  hold.release();
  EXPECT_EQ(collect(*blocker).done.finish, FinishReason::length);
  for (auto& s : streams) EXPECT_EQ(collect(*s).done.finish, FinishReason::length);

  std::map<engine::Token, size_t> completed_in;  // first prompt token -> batch that completed it
  std::map<engine::SeqId, engine::Token> first_token;
  for (size_t b = 0; b < engine.batches().size(); ++b) {
    for (const engine::BatchToken& t : engine.batches()[b]) {
      if (t.pos == 0) first_token[t.seq] = t.token;
      if (t.logits) completed_in[first_token.at(t.seq)] = b;
    }
  }
  ASSERT_EQ(completed_in.size(), static_cast<size_t>(kShorts + 2));  // with the blocker's 'b'
  ASSERT_EQ(completed_in.at('b'), 0u);
  int shorts_before = 0;
  for (int i = 0; i < kShorts; ++i) shorts_before += completed_in.at(static_cast<engine::Token>(1 + i)) < completed_in.at('L') ? 1 : 0;
  // Held back while the others prefilled less than 4 × 64 tokens (32 short prompts), then first.
  EXPECT_GE(shorts_before, 4 * kLong / kShort - 1) << "shortest remaining first still orders the prompts";
  EXPECT_LE(shorts_before, 4 * kLong / kShort + 1) << "the long prompt waited for every short one";
}

// A FakeEngine whose samplers with a grammar defer every draw to a masked draw, the first of which
// waits until release(): a test sees what the scheduler does while a masked draw is out.
struct HeldFirstMaskedDraw {
  std::promise<void> entered, released;
  std::shared_future<void> go = released.get_future().share();
  std::atomic<int> draws{0};
  engine::FakeEngine engine{{.n_ctx = 1024, .n_batch = 32, .n_seq = 4, .n_vocab = 256, .defer_grammar_draws = true,
                             .before_masked_sample = [this] {
                               if (draws.fetch_add(1) > 0) return;
                               entered.set_value();
                               go.wait();
                             }}};
  void held() { entered.get_future().wait(); }
  void release() { released.set_value(); }
};

GenerationRequest constrained(std::string_view prompt, int max_tokens) {
  GenerationRequest r = greedy(prompt, max_tokens);
  r.sampling.grammar = engine::Grammar{.text = "root ::= [a-z]*", .root = "root"};
  return r;
}

// A masked draw (the grammar refused the unconstrained one) leaves the scheduler thread: while one
// request's draw is held, another request decodes every one of its tokens. In place, the held
// draw would stall the step, and the plain request could not finish before the release.
TEST(SchedulerMaskedDraws, OtherRequestsKeepDecodingWhileAGrammarDrawIsHeld) {
  HeldFirstMaskedDraw hold;
  Scheduler scheduler(hold.engine, {.n_slots = 2, .cache_holders = 0});
  const std::string expected = collect(**scheduler.submit(greedy("constrained", 6))).text;
  const auto held = *scheduler.submit(constrained("constrained", 6));
  hold.held();
  const auto plain = *scheduler.submit(greedy("plain request", 20));
  auto plain_done = std::async(std::launch::async, [&] { return collect(*plain); });
  const bool finished_while_held = plain_done.wait_for(60s) == std::future_status::ready;
  hold.release();
  EXPECT_TRUE(finished_while_held) << "the plain request waited for the held masked draw";
  EXPECT_EQ(plain_done.get().done.usage.completion_tokens, 20);
  const Collected c = collect(*held);
  EXPECT_EQ(c.done.finish, FinishReason::length);
  EXPECT_EQ(c.text, expected) << "a masked draw takes the token a draw in place would";
  EXPECT_EQ(hold.draws.load(), 6) << "every token of the constrained request came from a masked draw";
}

// A request that ends while its masked draw is out (its client went away) ends cleanly; the draw
// that comes back later finds no request and is dropped.
TEST(SchedulerMaskedDraws, ARequestCancelledDuringItsDrawEndsAndTheDrawIsDropped) {
  HeldFirstMaskedDraw hold;
  Scheduler scheduler(hold.engine, {.n_slots = 1, .cache_holders = 0});
  const auto held = *scheduler.submit(constrained("constrained", 6));
  hold.held();
  held->cancel();
  const auto next = *scheduler.submit(greedy("next", 3));
  auto next_done = std::async(std::launch::async, [&] { return collect(*next); });
  EXPECT_EQ(collect(*held).done.finish, FinishReason::cancelled);
  hold.release();
  EXPECT_EQ(next_done.get().done.usage.completion_tokens, 3) << "the slot went to the next request";
  EXPECT_EQ(hold.draws.load(), 1) << "the cancelled request drew nothing more";
}

}  // namespace
}  // namespace prefixd::scheduler
