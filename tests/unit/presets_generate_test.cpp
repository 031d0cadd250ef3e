// Every generated preset loads through libllama and generates through the scheduler — the path a
// real model takes. Families whose memory cannot be trimmed take the cold path, correctly.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "modelgen/modelgen.h"
#include "scheduler/scheduler.h"

namespace prefixd {
namespace {

using namespace std::chrono_literals;

struct Generation {
  std::string text;
  scheduler::StreamEvent done;
};

Generation generate(scheduler::Scheduler& s, const engine::Engine& e, const std::string& prompt) {
  scheduler::GenerationRequest r;
  r.prompt = e.vocab().tokenize(prompt, false, true);
  r.sampling.temperature = 0;
  r.max_tokens = 6;
  r.cache.namespace_digest = "presets";
  auto stream = s.submit(std::move(r));
  EXPECT_TRUE(stream.has_value());
  Generation out;
  if (!stream) return out;
  while (auto event = (*stream)->next(60s)) {
    if (event->kind == scheduler::StreamEvent::Kind::done) {
      out.done = *event;
      return out;
    }
    out.text += event->text;
  }
  ADD_FAILURE() << "no result";
  return out;
}

class PresetGenerates : public ::testing::TestWithParam<std::pair<const char*, engine::ModelFamily>> {};

TEST_P(PresetGenerates, LoadsClassifiesAndGeneratesRepeatably) {
  const auto [preset, family] = GetParam();
  const auto dir = std::filesystem::temp_directory_path() / ("prefixd-preset-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / (std::string(preset) + ".gguf")).string();
  modelgen::generate_model({.preset = preset, .out_path = path, .seed = 3, .weight_type = "", .quiet = true});

  engine::ContextOptions options;
  options.n_ctx = 1024;
  options.n_batch = 32;
  options.n_parallel = 2;
  options.n_holder_seqs = 3;
  options.n_threads = 1;  // one: ctest runs another test beside this one (tests/integration/server_process.cpp says why)
  auto e = engine::load_llama_engine(path, options);
  EXPECT_EQ(e->model().family, family) << preset;
  {
    scheduler::SchedulerOptions so;
    so.n_slots = 2;
    so.cache_holders = 2;
    so.cache.min_prefix = 4;
    scheduler::Scheduler s(*e, so);
    const std::string prompt =
        "<|im_start|>user\nTell me about rivers and the mountains they come from.<|im_end|>\n<|im_start|>assistant\n";
    const Generation first = generate(s, *e, prompt);
    const Generation second = generate(s, *e, prompt);
    EXPECT_EQ(first.done.finish, scheduler::FinishReason::length) << preset;
    EXPECT_EQ(first.done.usage.completion_tokens, 6);
    EXPECT_EQ(second.text, first.text) << preset << ": greedy output is the same warm or cold";
    // An identical resend feeds one token on every family: dense memory is cut back to it, the
    // others resume at the checkpoint before the last prompt token.
    EXPECT_EQ(second.done.cache.fed_tokens, 1) << preset;
    if (engine::memory_is_trimmable(e->model())) {
      EXPECT_EQ(second.done.cache.outcome, cache::Outcome::hit_extend);
    }
  }
  e.reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(AllPresets, PresetGenerates,
                         ::testing::Values(std::pair{"tiny", engine::ModelFamily::dense},
                                           std::pair{"gemma3-tiny", engine::ModelFamily::sliding_window},
                                           std::pair{"mamba2-tiny", engine::ModelFamily::recurrent},
                                           std::pair{"qwen35-tiny", engine::ModelFamily::hybrid}),
                         [](const auto& info) {
                           std::string name = info.param.first;
                           std::erase(name, '-');
                           return name;
                         });

}  // namespace
}  // namespace prefixd
