// A draft model under the scheduler, over FakeEngines: a drafter whose logits are the target's
// guesses every token right, and its own prompt cache gives a repeated prompt back to it. The
// real models' exactness is tested through the server (tests/integration/speculation_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "scheduler/scheduler.h"
#include "support/fake_engine.h"

namespace prefixd::scheduler {
namespace {

using namespace std::chrono_literals;

struct Reply {
  std::string text;
  StreamEvent done;
};

Reply run(Scheduler& scheduler, const std::string& prompt, int max_tokens) {
  GenerationRequest r;
  for (const unsigned char c : prompt) r.prompt.push_back(c);
  r.sampling.temperature = 0;
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
  }
  return out;
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
  EXPECT_EQ(stats->tokens_reused, static_cast<int>(prompt.size()));
  EXPECT_EQ(stats->hits, 1);
  // The drafter's device entry holds the cells its lanes left: count them in the engine.
  std::int64_t cells = 0;
  for (engine::SeqId s = 2; s < 6; ++s) {
    const engine::PosRange held = drafter.sequence_positions(s);
    if (!held.empty()) cells += held.max - held.min + 1;
  }
  EXPECT_EQ(stats->device_cells, cells);
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

}  // namespace
}  // namespace prefixd::scheduler
