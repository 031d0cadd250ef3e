// The next-turn warm-up: after a reply, the end of the assistant turn is fed off the request path,
// but only for sessions whose client sends replies back verbatim; and on every family the next
// turn then feeds only its new message.
#include <gtest/gtest.h>

#include <thread>

#include "support/fake_engine.h"
#include "scheduler/scheduler.h"

namespace prefixd::scheduler {
namespace {

using namespace std::chrono_literals;
using engine::Token;

struct Turn {
  std::vector<Token> reply;
  CacheReport cache;
};

Turn ask(Scheduler& scheduler, std::vector<Token> prompt, const std::string& session) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = 6;
  r.logprobs = 0;
  r.cache.namespace_digest = "namespace";
  r.cache.session_key = session;
  r.cache.continuation = {250, 251};  // what the template renders after a reply
  auto stream = scheduler.submit(std::move(r));
  EXPECT_TRUE(stream.has_value());
  Turn turn;
  if (!stream) return turn;
  while (auto event = (*stream)->next(10s)) {
    for (const GeneratedLogprobs& lp : event->logprobs) turn.reply.push_back(lp.chosen.id);
    if (event->kind == StreamEvent::Kind::done) {
      turn.cache = event->cache;
      return turn;
    }
  }
  ADD_FAILURE() << "no reply";
  return turn;
}

void settle(const Scheduler& scheduler) {
  for (int i = 0; i < 500 && scheduler.stats().running > 0; ++i) std::this_thread::sleep_for(2ms);
}

std::vector<Token> user_turn(int seed) {
  std::vector<Token> out;
  for (int i = 0; i < 40; ++i) out.push_back(static_cast<Token>((seed * 37 + i * 11) % 240));
  return out;
}

engine::FakeEngineOptions engine_options(engine::ModelFamily family) {
  return {.n_ctx = 4096, .n_batch = 32, .n_seq = 8, .n_vocab = 256, .family = family, .sliding_window = 16,
          .swa_full = false};
}

SchedulerOptions scheduler_options() {
  SchedulerOptions options{.n_slots = 2, .cache_holders = 4};
  options.cache.min_prefix = 8;
  return options;
}

class Warmup : public ::testing::TestWithParam<engine::ModelFamily> {};

TEST_P(Warmup, AnEchoingClientsNextTurnFeedsOnlyItsNewMessage) {
  engine::FakeEngine engine(engine_options(GetParam()));
  Scheduler scheduler(engine, scheduler_options());
  std::vector<Token> conversation = user_turn(1);
  std::int64_t fed_after_first_echo = -1;
  for (int turn = 0; turn < 4; ++turn) {
    const Turn t = ask(scheduler, conversation, "echo");
    settle(scheduler);
    ASSERT_FALSE(t.reply.empty());
    if (turn >= 2) {
      // The session was seen sending its reply back on turn 1, so the reply of turn 1 onwards was
      // warmed up: only the new user turn is fed.
      EXPECT_EQ(t.cache.fed_tokens, 40) << "turn " << turn;
    }
    if (turn == 1) fed_after_first_echo = scheduler.stats().warmup_tokens_total;
    conversation.insert(conversation.end(), t.reply.begin(), t.reply.end());
    conversation.push_back(250);
    conversation.push_back(251);
    const auto next = user_turn(turn + 2);
    conversation.insert(conversation.end(), next.begin(), next.end());
  }
  EXPECT_EQ(scheduler.stats().warmups_total, 3) << "turns 1, 2 and 3 were warmed up";
  EXPECT_GT(scheduler.stats().warmup_tokens_total, fed_after_first_echo);
}

TEST_P(Warmup, AClientThatWritesItsOwnAssistantTurnsCostsNoWarmup) {
  engine::FakeEngine engine(engine_options(GetParam()));
  Scheduler scheduler(engine, scheduler_options());
  std::vector<Token> conversation = user_turn(1);
  std::int32_t previous_prompt = 0;
  for (int turn = 0; turn < 4; ++turn) {
    const Turn t = ask(scheduler, conversation, "writer");
    settle(scheduler);
    if (turn > 0) {
      EXPECT_EQ(t.cache.cached_tokens, previous_prompt) << "turn " << turn << " resumes after the previous prompt";
    }
    previous_prompt = static_cast<std::int32_t>(conversation.size());
    const auto written = user_turn(100 + turn);  // the client's own assistant text
    conversation.insert(conversation.end(), written.begin(), written.begin() + 6);
    conversation.push_back(250);
    conversation.push_back(251);
    const auto next = user_turn(turn + 2);
    conversation.insert(conversation.end(), next.begin(), next.end());
  }
  EXPECT_EQ(scheduler.stats().warmup_tokens_total, 0);
  EXPECT_EQ(scheduler.stats().warmups_total, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, Warmup,
                         ::testing::Values(engine::ModelFamily::dense, engine::ModelFamily::hybrid,
                                           engine::ModelFamily::recurrent, engine::ModelFamily::sliding_window),
                         [](const auto& info) { return std::string(engine::family_name(info.param)); });

}  // namespace
}  // namespace prefixd::scheduler
