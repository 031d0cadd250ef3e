// Prompt reuse on every model family, on generated models of real architectures: a chat's next
// turn, an identical resend, an edit of an earlier turn and a second session must feed no more
// prompt tokens than the checkpoints allow, and generate exactly what a cold run generates.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "scheduler/scheduler.h"

namespace prefixd::scheduler {
namespace {

using namespace std::chrono_literals;
using engine::Token;

struct FamilyCase {
  std::string name;
  std::string model;
  engine::SwaFull swa_full = engine::SwaFull::automatic;
  engine::ModelFamily family;
  bool checkpoints;  // reused at checkpoints (false: any prefix)
  // First-token log-probability drift a warm run may show against a cold one: the state is the
  // same, but a resumed prompt is computed in different chunks, and chunked sliding-window
  // attention sums in another order. Recorded from runs of these models.
  double tolerance;
};

std::ostream& operator<<(std::ostream& os, const FamilyCase& c) { return os << c.name; }

struct Reply {
  std::vector<Token> tokens;
  double first_logprob = 0;
  CacheReport cache;
};

// A conversation as token runs: system prompt, then user and assistant turns; each run starts
// with a marker token so that runs never merge.
struct Conversation {
  std::vector<Token> system;
  std::vector<std::vector<Token>> turns;  // user, assistant, user, assistant, ...

  std::vector<Token> prompt(size_t user_turns, std::vector<engine::Pos>* boundaries) const {
    std::vector<Token> out = system;
    for (size_t i = 0; i < 2 * user_turns - 1; ++i) {
      if (i % 2 == 0 && boundaries != nullptr) boundaries->push_back(static_cast<engine::Pos>(out.size()));
      out.insert(out.end(), turns[i].begin(), turns[i].end());
    }
    out.push_back(kAssistantOpen);
    return out;
  }
  static constexpr Token kAssistantOpen = 7;
};

// Tokens [10, min(vocab, 3000)): ordinary tokens in every vocabulary here (the test-llama-archs
// models have 128).
std::vector<Token> run_of(std::uint32_t seed, size_t n, std::int32_t vocab) {
  std::vector<Token> out{static_cast<Token>(5 + seed % 2)};
  std::uint32_t x = seed * 2654435761u + 1;
  const auto range = static_cast<std::uint32_t>(std::min(vocab, 3000) - 10);
  while (out.size() < n) {
    x = x * 1664525u + 1013904223u;
    out.push_back(static_cast<Token>(10 + (x >> 8) % range));
  }
  return out;
}

class FamilyReuse : public ::testing::TestWithParam<FamilyCase> {
 protected:
  void SetUp() override {
    // The build writes every model (tests/CMakeLists.txt); a missing one is a failure, not a skip.
    ASSERT_TRUE(std::filesystem::exists(GetParam().model)) << "model not generated: " << GetParam().model;
    engine::ContextOptions o;
    o.n_ctx = 4096;
    o.n_batch = 32;  // small chunks: the CPU scans of some recurrent kernels grow faster than linearly
    o.n_parallel = 1;
    o.n_holder_seqs = 5;
    o.n_threads = 1;  // one: ctest runs another test beside this one (tests/integration/server_process.cpp says why)
    o.swa_full = GetParam().swa_full;
    // Flash attention's f16 rounding would hide the cache's own exactness, which is measured here.
    o.flash_attention = false;
    engine_ = engine::load_llama_engine(GetParam().model, o);
    ASSERT_EQ(engine_->model().family, GetParam().family);
    SchedulerOptions warm{.n_slots = 1, .cache_holders = 4};
    warm.cache.min_prefix = 16;
    warm.cache.checkpoint_every = 0;  // boundaries and the prompt's end only: the ideal is exact
    warm.cache.host_segment_tokens = 64;
    warm.cache.host_capacity_bytes = 256 << 20;
    warm_ = std::make_unique<Scheduler>(*engine_, warm);
    const std::int32_t vocab = engine_->vocab().size();
    conversation_.system = run_of(1, 120, vocab);
    for (std::uint32_t i = 0; i < 6; ++i) {
      conversation_.turns.push_back(run_of(10 + i, i % 2 == 0 ? 70 : 50, vocab));
      // An assistant turn begins with the opener the previous prompt ended with, as a template's
      // generation prompt begins the assistant message the next request renders.
      if (i % 2 == 1) conversation_.turns.back().front() = Conversation::kAssistantOpen;
    }
    engine::ContextOptions cold = o;
    cold.n_holder_seqs = 0;
    cold_engine_ = engine::load_llama_engine(GetParam().model, cold);
  }

  Reply ask(Scheduler& scheduler, std::vector<Token> prompt, std::vector<engine::Pos> boundaries,
            const std::string& session) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0;
    r.max_tokens = 8;
    r.logprobs = 0;
    r.cache.namespace_digest = std::string(32, 'n');
    r.cache.session_key = session;
    r.cache.boundaries = std::move(boundaries);
    r.cache.continuation = {8, 9};  // the template's end of turn, fed after the reply
    auto stream = scheduler.submit(std::move(r));
    EXPECT_TRUE(stream.has_value());
    Reply reply;
    if (!stream) return reply;
    while (auto event = (*stream)->next(60s)) {
      for (const GeneratedLogprobs& lp : event->logprobs) {
        if (reply.tokens.empty()) reply.first_logprob = lp.chosen.logprob;
        reply.tokens.push_back(lp.chosen.id);
      }
      if (event->kind == StreamEvent::Kind::done) {
        reply.cache = event->cache;
        return reply;
      }
    }
    ADD_FAILURE() << "no reply";
    return reply;
  }

  // The cold reference: the same prompt on a scheduler that never reads the cache, then the
  // warm request; the generated tokens must agree.
  Reply ask_both(std::vector<Token> prompt, std::vector<engine::Pos> boundaries, const std::string& session) {
    Reply cold;
    {
      Scheduler none(*cold_engine_, SchedulerOptions{.n_slots = 1, .cache_holders = 0});
      cold = ask(none, prompt, boundaries, session);
    }
    Reply warm = ask(*warm_, std::move(prompt), std::move(boundaries), session);
    EXPECT_EQ(warm.tokens, cold.tokens) << "greedy output differs warm and cold";
    EXPECT_NEAR(warm.first_logprob, cold.first_logprob, GetParam().tolerance);
    EXPECT_EQ(cold.cache.cached_tokens, 0);
    return warm;
  }

  // Lets the scheduler finish the previous request's warm-up before the next request arrives: the
  // conversation here is sequential. Waits for the condition, however slow a loaded machine is.
  void settle() {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (warm_->stats().running > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(warm_->stats().running, 0) << "the previous request's warm-up never finished";
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::Engine> cold_engine_;
  std::unique_ptr<Scheduler> warm_;
  Conversation conversation_;
};

TEST_P(FamilyReuse, EveryTurnResendEditAndSessionFeedsOnlyWhatIsNew) {
  std::vector<std::int32_t> sizes;
  for (size_t turn = 1; turn <= 3; ++turn) {
    std::vector<engine::Pos> boundaries;
    const std::vector<Token> prompt = conversation_.prompt(turn, &boundaries);
    const Reply reply = ask_both(prompt, boundaries, "alice");
    const auto n = static_cast<std::int32_t>(prompt.size());
    if (turn == 1) {
      EXPECT_EQ(reply.cache.fed_tokens, n) << "the first request finds nothing";
    } else {
      // The previous prompt was checkpointed whole: only the client's assistant turn, the new user
      // turn and the assistant opener are new.
      EXPECT_LE(reply.cache.fed_tokens, n - sizes.back()) << "turn " << turn;
      EXPECT_GT(reply.cache.cached_tokens, 0);
    }
    sizes.push_back(n);
    settle();
  }
  std::vector<engine::Pos> boundaries;
  const std::vector<Token> last = conversation_.prompt(3, &boundaries);
  const Reply resend = ask_both(last, boundaries, "alice");
  EXPECT_EQ(resend.cache.fed_tokens, 1) << "an identical resend feeds its last token only";
  settle();

  // An edit inside the second user turn: reuse up to the boundary before it, never past the edit.
  std::vector<Token> edited = last;
  const engine::Pos edit_at = boundaries[1] + 5;
  edited[static_cast<size_t>(edit_at)] += 1;
  const Reply edit = ask_both(edited, boundaries, "alice");
  EXPECT_LE(edit.cache.cached_tokens, edit_at) << "a state past the edit is never restored";
  if (GetParam().checkpoints) {
    EXPECT_EQ(edit.cache.cached_tokens, boundaries[1]) << "the checkpoint at the edited turn's start serves";
  } else {
    EXPECT_EQ(edit.cache.cached_tokens, edit_at);
  }
  settle();

  // A change a few tokens before the end (a corrected last word): a window-only model may resume
  // right before it when the latest entry still holds the window there, never after it.
  std::vector<Token> corrected = last;
  const auto near_end = static_cast<engine::Pos>(corrected.size()) - 4;
  corrected[static_cast<size_t>(near_end)] += 1;
  const Reply tail = ask_both(corrected, boundaries, "alice");
  EXPECT_LE(tail.cache.cached_tokens, near_end);
  EXPECT_GE(tail.cache.cached_tokens, boundaries.back());
  settle();

  // Another session with the same system prompt resumes after it.
  std::vector<engine::Pos> other_boundaries;
  Conversation other = conversation_;
  other.turns[0] = run_of(99, 60, engine_->vocab().size());
  const std::vector<Token> first = other.prompt(1, &other_boundaries);
  const Reply bob = ask_both(first, other_boundaries, "bob");
  EXPECT_GE(bob.cache.cached_tokens, static_cast<std::int32_t>(conversation_.system.size()) - (GetParam().checkpoints ? 0 : 1));
  EXPECT_LE(bob.cache.fed_tokens, static_cast<std::int32_t>(first.size() - conversation_.system.size()));

  const cache::CacheStats stats = warm_->cache_stats();
  EXPECT_EQ(stats.reuse_mode, GetParam().checkpoints ? "checkpoints" : "trim");
  if (GetParam().checkpoints) {
    EXPECT_GT(stats.checkpoints.entries, 0);
    EXPECT_GT(stats.checkpoints.bytes, 0u);
    EXPECT_GT(stats.checkpoints.restored, 0);
  }
}

std::string model_path(const std::string& name) { return std::string(PREFIXD_TEST_MODELS_DIR) + "/" + name + ".gguf"; }
std::string arch_path(const std::string& name) { return model_path("archs/" + name); }

INSTANTIATE_TEST_SUITE_P(
    Presets, FamilyReuse,
    ::testing::Values(
        FamilyCase{"qwen35_hybrid", model_path("qwen35-tiny"), engine::SwaFull::automatic, engine::ModelFamily::hybrid, true, 1e-4},
        FamilyCase{"mamba2_recurrent", model_path("mamba2-tiny"), engine::SwaFull::automatic, engine::ModelFamily::recurrent, true, 1e-4},
        FamilyCase{"gemma3_window_only", model_path("gemma3-tiny"), engine::SwaFull::off, engine::ModelFamily::sliding_window, true, 2e-3},
        FamilyCase{"gemma3_full_window", model_path("gemma3-tiny"), engine::SwaFull::on, engine::ModelFamily::sliding_window, false, 1e-4},
        // Other architectures, as llama.cpp's test-llama-archs writes them.
        FamilyCase{"jamba_hybrid", arch_path("jamba-dense"), engine::SwaFull::automatic, engine::ModelFamily::hybrid, true, 2e-2},
        FamilyCase{"falcon_h1_hybrid", arch_path("falcon-h1-dense"), engine::SwaFull::automatic, engine::ModelFamily::hybrid, true, 2e-2},
        FamilyCase{"gemma2_window_only", arch_path("gemma2-dense"), engine::SwaFull::off, engine::ModelFamily::sliding_window, true, 2e-2},
        FamilyCase{"gpt_oss_window_only", arch_path("gpt-oss-moe"), engine::SwaFull::off, engine::ModelFamily::sliding_window, true, 2e-2}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace prefixd::scheduler
