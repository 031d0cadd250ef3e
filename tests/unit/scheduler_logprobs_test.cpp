// Log-probabilities computed from raw logits: normalisation, ordering, ties.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/fake_engine.h"
#include "scheduler/logprobs.h"

namespace prefixd::scheduler {
namespace {

TEST(Logprobs, AreTheLogSoftmaxOfTheLogits) {
  engine::FakeEngine engine({.n_ctx = 64, .n_batch = 8, .n_seq = 1, .n_vocab = 256});
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -50.0f};
  const GeneratedLogprobs out = logprobs_of(logits, 2, 3, engine.vocab());
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  EXPECT_NEAR(out.chosen.logprob, 2.0 - std::log(z), 1e-6);
  EXPECT_EQ(out.chosen.id, 2);
  ASSERT_EQ(out.top.size(), 3u);
  EXPECT_EQ(out.top[0].id, 1) << "equal logits: the lower id first";
  EXPECT_EQ(out.top[1].id, 3);
  EXPECT_EQ(out.top[2].id, 2);
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) total += std::exp(static_cast<double>(logprobs_of(logits, static_cast<engine::Token>(i), 0, engine.vocab()).chosen.logprob));
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(Logprobs, StayFiniteForHugeLogitsAndClampTheCount) {
  engine::FakeEngine engine({.n_ctx = 64, .n_batch = 8, .n_seq = 1, .n_vocab = 256});
  const std::vector<float> logits = {1000.0f, 999.0f};
  const GeneratedLogprobs out = logprobs_of(logits, 1, 20, engine.vocab());
  EXPECT_TRUE(std::isfinite(out.chosen.logprob));
  EXPECT_NEAR(out.chosen.logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-5);
  EXPECT_EQ(out.top.size(), 2u) << "never more alternatives than the vocabulary has";
  EXPECT_TRUE(logprobs_of(logits, 0, 0, engine.vocab()).top.empty());
}

}  // namespace
}  // namespace prefixd::scheduler
