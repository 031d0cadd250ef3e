// A draft model under the scheduler, over FakeEngines: a drafter whose logits are the target's
// guesses every token right, and its own prompt cache gives a repeated prompt back to it; and the
// rollback of a recurrent state after a rejected draft. The real models' exactness is tested
// through the server (tests/integration/speculation_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/scheduler.h"
#include "support/fake_engine.h"

namespace prefixd::scheduler {
namespace {

using namespace std::chrono_literals;

struct Reply {
  std::string text;
  std::vector<engine::Token> tokens;  // the generated token ids
  StreamEvent done;
};

std::vector<engine::Token> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

Reply run(Scheduler& scheduler, std::vector<engine::Token> prompt, int max_tokens, float temperature = 0,
          std::uint32_t seed = 0, std::vector<std::string> stop = {}) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.stop = std::move(stop);
  r.logprobs = 0;  // each token's id comes with it
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.ignore_eos = true;
  r.max_tokens = max_tokens;
  r.cache.enabled = true;
  r.cache.namespace_digest = "ns";
  auto stream = scheduler.submit(std::move(r));
  EXPECT_TRUE(stream.has_value());
  Reply out;
  while (stream) {
    auto event = (*stream)->next(10s);
    if (!event) ADD_FAILURE() << "stream timed out";
    if (!event || event->kind == StreamEvent::Kind::done) {
      if (event) out.done = *event;
      break;
    }
    out.text += event->text;
    for (const GeneratedLogprobs& token : event->logprobs) out.tokens.push_back(token.chosen.id);
  }
  return out;
}

Reply run(Scheduler& scheduler, const std::string& prompt, int max_tokens, float temperature = 0, std::uint32_t seed = 0) {
  return run(scheduler, bytes_of(prompt), max_tokens, temperature, seed);
}

SchedulerOptions drafting_options() {
  SchedulerOptions o{.n_slots = 2, .cache_holders = 4};
  o.speculation.type = SpeculationOptions::Type::model;
  o.speculation.only_paying = false;
  o.speculation.draft_max = 6;
  o.speculation.draft_min = 1;
  o.speculation.p_min = 0;
  return o;
}

TEST(ModelDrafts, AnAgreeingDrafterIsAcceptedWholeAndChangesNoToken) {
  engine::FakeEngine plain_engine;
  Scheduler plain(plain_engine, {.n_slots = 2, .cache_holders = 4});
  const std::string prompt = "a prompt long enough to be cached: a prompt long";
  const Reply reference = run(plain, prompt, 40);

  engine::FakeEngine target;
  engine::FakeEngine drafter;
  Scheduler scheduler(target, drafting_options(), &drafter);
  const Reply first = run(scheduler, prompt, 40);
  EXPECT_EQ(first.text, reference.text);
  EXPECT_TRUE(first.done.timings.speculative);
  EXPECT_GT(first.done.timings.draft_n, 20);
  EXPECT_EQ(first.done.timings.draft_accepted, first.done.timings.draft_n);
  ASSERT_TRUE(first.done.cache.draft);
  EXPECT_EQ(first.done.cache.draft->cached_tokens, 0);
  EXPECT_EQ(first.done.cache.draft->fed_tokens, static_cast<int>(prompt.size()));

  // The same prompt again: the drafter's cache gives it back (the lane reads the prompt and the
  // first token, and a hit leaves it at least the last of those to compute), and the reply is the
  // same.
  const Reply second = run(scheduler, prompt, 40);
  EXPECT_EQ(second.text, reference.text);
  ASSERT_TRUE(second.done.cache.draft);
  EXPECT_EQ(second.done.cache.draft->cached_tokens, static_cast<int>(prompt.size()));
  EXPECT_EQ(second.done.cache.draft->fed_tokens, 0);
  const auto stats = scheduler.draft_cache_stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->requests.tokens_reused, static_cast<int>(prompt.size()));
  EXPECT_EQ(stats->requests.hits, 1);
  // The drafter's device entry holds the cells its lanes left: count them in the engine.
  std::int64_t cells = 0;
  for (engine::SeqId s = 2; s < 6; ++s) {
    const engine::PosRange held = drafter.sequence_positions(s);
    if (!held.empty()) cells += held.max - held.min + 1;
  }
  EXPECT_EQ(stats->device.cells, cells);
  EXPECT_GT(cells, 0);
  EXPECT_FALSE(plain.draft_cache_stats());
}

TEST(ModelDrafts, ARequestsNMaxZeroAndARecurrentDrafterDraftNothing) {
  engine::FakeEngine target;
  engine::FakeEngine drafter;
  Scheduler scheduler(target, drafting_options(), &drafter);
  GenerationRequest r;
  for (const unsigned char c : std::string("no drafts for me please")) r.prompt.push_back(c);
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.max_tokens = 10;
  r.speculative.n_max = 0;
  auto stream = scheduler.submit(std::move(r));
  ASSERT_TRUE(stream);
  std::optional<StreamEvent> done;
  while (auto event = (*stream)->next(10s)) {
    if (event->kind == StreamEvent::Kind::done) {
      done = *event;
      break;
    }
  }
  ASSERT_TRUE(done);
  EXPECT_FALSE(done->timings.speculative);
  EXPECT_FALSE(done->cache.draft);

  engine::FakeEngine recurrent({.family = engine::ModelFamily::recurrent});
  EXPECT_THROW(Scheduler(target, drafting_options(), &recurrent), std::invalid_argument);
}

// Two schedulers over recurrent FakeEngines, one that never drafts and one that verifies every
// n-gram guess. A recurrent FakeEngine's state is the hash of every token it consumed: a draft
// rolled back to a wrong state would change every later token.
struct RecurrentPair {
  static SchedulerOptions drafting_options() {
    SchedulerOptions o{.n_slots = 2, .cache_holders = 4};
    o.speculation.type = SpeculationOptions::Type::ngram;
    o.speculation.only_paying = false;
    o.speculation.draft_min = 1;
    return o;
  }
  engine::FakeEngine plain_engine{{.family = engine::ModelFamily::recurrent}};
  Scheduler plain{plain_engine, {.n_slots = 2, .cache_holders = 4}};
  engine::FakeEngine drafting_engine{{.family = engine::ModelFamily::recurrent}};
  Scheduler drafting{drafting_engine, drafting_options()};
};

// Nearly greedy replies draft the greedy one from the pool, follow it for a while and leave it, so
// guesses are rejected and states rolled back in the middle of replies; the replies equal those
// without drafts, and the state each leaves to the cache continues as a cold run of its tokens does.
TEST(RecurrentDrafts, RolledBackStatesContinueAsTheTokensDecodedOneByOne) {
  RecurrentPair pair;
  Scheduler& plain = pair.plain;
  Scheduler& drafting = pair.drafting;
  const std::string prompt = "a prompt the replies below continue, each in its own way: ";
  run(drafting, prompt, 40);  // the greedy reply, which the sampled ones below draft from (the pool)
  long drafted = 0, accepted = 0;
  for (int length = 4; length <= 40; length += 3) {
    // Nearly greedy: each follows the greedy reply for a while, then leaves it.
    const auto seed = static_cast<std::uint32_t>(length);
    const Reply reference = run(plain, prompt, length, 0.02f, seed);
    const Reply reply = run(drafting, prompt, length, 0.02f, seed);
    EXPECT_EQ(reply.text, reference.text) << "max_tokens " << length;
    drafted += reply.done.timings.draft_n;
    accepted += reply.done.timings.draft_accepted;
    // The reply's state went to the cache (all but its last token, which was never decoded): the
    // same tokens and more are served from there and go on as a cold run over them does.
    std::vector<engine::Token> next = bytes_of(prompt);
    next.insert(next.end(), reply.tokens.begin(), reply.tokens.end());
    next.push_back('a');
    const Reply continued = run(drafting, next, 4);
    EXPECT_EQ(continued.done.cache.cached_tokens, static_cast<int>(prompt.size() + reply.tokens.size()) - 1)
        << "max_tokens " << length;
    EXPECT_EQ(continued.text, run(plain, next, 4).text) << "max_tokens " << length;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(drafted, accepted);
}

// A reply that stops at a string inside an accepted guess ends with guesses after it in its state:
// it ends only once the state is rolled back, and what it leaves the cache continues as a cold
// run of its tokens does.
TEST(RecurrentDrafts, AReplyThatStopsInsideADraftEndsWithItsStateRolledBack) {
  RecurrentPair pair;
  Scheduler& plain = pair.plain;
  Scheduler& drafting = pair.drafting;
  int stopped_in_drafts = 0;
  for (const std::string topic : {"rivers", "stones", "lanterns", "orbits", "meadows", "signals"}) {
    const std::string prompt = "a prompt about " + topic + ", long enough for the cache to keep it: ";
    const Reply first = run(drafting, prompt, 40);  // its reply is what the next one drafts (the pool)
    // A character that first appears well inside that reply (a FakeEngine token spells one printable
    // character): the same request stopping there takes it as an accepted guess, with more guesses
    // after it.
    const auto spelled = [](engine::Token t) { return static_cast<char>(32 + t % 95); };
    std::string stop;
    std::ptrdiff_t at = 0;
    for (size_t i = 3; i < first.tokens.size() && stop.empty(); ++i) {
      at = static_cast<std::ptrdiff_t>(i);
      const bool earlier = std::any_of(first.tokens.begin(), first.tokens.begin() + at,
                                       [&](engine::Token t) { return spelled(t) == spelled(first.tokens[i]); });
      if (!earlier) stop = std::string(1, spelled(first.tokens[i]));
    }
    if (stop.empty()) continue;
    const Reply reference = run(plain, bytes_of(prompt), 40, 0, 0, {stop});
    const Reply reply = run(drafting, bytes_of(prompt), 40, 0, 0, {stop});
    EXPECT_EQ(reply.text, reference.text) << topic;
    EXPECT_EQ(reply.done.finish, FinishReason::stop) << topic;
    stopped_in_drafts += reply.done.timings.draft_n > reply.done.timings.draft_accepted ? 1 : 0;
    // The stopped reply's state holds the tokens before the stop: only it can give them all.
    std::vector<engine::Token> next = bytes_of(prompt);
    next.insert(next.end(), first.tokens.begin(), first.tokens.begin() + at);
    next.push_back('!');
    const Reply continued = run(drafting, next, 4);
    const Reply plain_continued = run(plain, next, 4);
    EXPECT_EQ(continued.done.cache.cached_tokens, static_cast<int>(prompt.size() + static_cast<size_t>(at))) << topic;
    EXPECT_EQ(continued.text, plain_continued.text) << topic;
  }
  EXPECT_GT(stopped_in_drafts, 0) << "no reply stopped inside a draft";
}

}  // namespace
}  // namespace prefixd::scheduler
