// The libllama engine on the generated tiny model: load, decode, sequence ops, state I/O.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "modelgen/modelgen.h"

namespace prefixd::engine {
namespace {

ContextOptions small_context() {
  ContextOptions o;
  o.n_ctx = 512;
  o.n_batch = 64;
  o.n_parallel = 2;
  o.n_holder_seqs = 2;
  o.n_threads = 1;  // one: ctest runs another test beside this one (tests/integration/server_process.cpp says why)
  return o;
}

std::vector<Token> prompt_tokens(const Engine& e) {
  return e.vocab().tokenize("<|im_start|>user\nThe quick brown fox jumps over the lazy dog.<|im_end|>\n", false, true);
}

// Feeds `tokens` into `seq` from position `start`, in chunks; returns logits of the last token.
std::vector<float> feed(Engine& e, SeqId seq, std::span<const Token> tokens, Pos start, size_t chunk = 64) {
  std::vector<float> last;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    std::vector<BatchToken> batch;
    for (size_t j = i; j < std::min(tokens.size(), i + chunk); ++j) {
      batch.push_back({tokens[j], start + static_cast<Pos>(j), seq, j + 1 == tokens.size()});
    }
    EXPECT_EQ(e.decode(batch), DecodeStatus::ok);
  }
  const auto row = static_cast<std::int32_t>((tokens.size() - 1) % chunk);
  auto span = e.logits(row);
  last.assign(span.begin(), span.end());
  return last;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

// The threads this process runs now, each as its id and start time (a new thread may reuse the id
// of one that ended).
std::set<std::string> live_threads() {
  std::set<std::string> ids;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // A thread that ended between the listing and the read has no stat left: it is not running.
    const auto name_end = line.rfind(')');
    if (name_end == std::string::npos || name_end + 2 > line.size()) continue;
    // Field 22 (start time) counted after the command name's closing parenthesis, which may hold spaces.
    std::istringstream fields(line.substr(name_end + 2));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i) {}
    ids.insert(task.path().filename().string() + "@" + field);
  }
  return ids;
}

// How many threads run that `before` did not hold, once they are `expected`, or after 10 s: the
// workers of a pool leave a moment after the thread that owned it ended.
std::size_t threads_since_when(const std::set<std::string>& before, std::size_t expected) {
  const auto count = [&] {
    return static_cast<std::size_t>(std::ranges::count_if(live_threads(), [&](const std::string& id) { return !before.contains(id); }));
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::size_t now = count();
  while (now != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    now = count();
  }
  return now;
}

// A load leaves no thread behind on its caller's side. Loading Q8_0 weights converts them (for AMX
// or a repacked layout) in an OpenMP parallel region, and libgomp keeps the worker pool of every
// thread that ran one while that thread lives: a pool left on the server's main thread beside the
// scheduler thread's own made more pooled threads than cores, and decode ran at half speed
// (docs/design.md, "The threads that compute"). On a CPU whose load converts nothing the test
// passes trivially; on this project's build machines it converts for AMX.
TEST(Engine, LoadingAModelLeavesNoThreadBehind) {
  const auto dir = std::filesystem::temp_directory_path() / ("prefixd-engine-threads-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tiny-q8_0.gguf").string();
  modelgen::generate_model({.preset = "tiny", .out_path = path, .seed = 5, .weight_type = "q8_0", .quiet = true});
  inspect_model(path);  // the backends are loaded now, and stay
  const std::set<std::string> before = live_threads();
  {
    ContextOptions two_threads = small_context();
    two_threads.n_threads = 2;  // so that the pool keeps a worker, whose end is checked too
    auto e = load_llama_engine(path, two_threads);
    EXPECT_EQ(threads_since_when(before, 0), 0U) << "the load left threads behind";
    // What the count sees: a thread that decodes, and the worker its pool keeps for the second
    // of its two threads, both gone once it has ended.
    std::thread decoder([&] {
      EXPECT_FALSE(feed(*e, 0, prompt_tokens(*e), 0).empty());
      EXPECT_EQ(threads_since_when(before, 2), 2U) << "the decoding thread and its pooled worker";
    });
    decoder.join();
    EXPECT_EQ(threads_since_when(before, 0), 0U) << "the pool left with its thread";
  }
  std::filesystem::remove_all(dir);
}

// --ctx-size 0: the training context when its K/V fits the budget, else what fits.
TEST(ContextFit, TheTrainingContextWhenItFitsElseTheLargestMultipleOf256ThatDoes) {
  ModelInfo info;
  info.n_ctx_train = 32768;
  info.kv_bytes_per_token = 12288;  // the default model: 384 MiB at 32,768 cells
  EXPECT_EQ(fit_context_size(info, 4ull << 30).n_ctx, 32768);
  EXPECT_FALSE(fit_context_size(info, 4ull << 30).limited_by_memory);
  EXPECT_EQ(fit_context_size(info, 384ull << 20).n_ctx, 32768);  // exactly fits
  const ContextFit small = fit_context_size(info, 100ull << 20);  // 8533 cells fit
  EXPECT_TRUE(small.limited_by_memory);
  EXPECT_EQ(small.n_ctx, 8448);
  EXPECT_EQ(fit_context_size(info, 1 << 20).n_ctx, kMinFittedContextSize);
  info.n_ctx_train = 0;  // the file does not say
  EXPECT_EQ(fit_context_size(info, 4ull << 30).n_ctx, kFallbackContextSize);
  info.n_ctx_train = 1 << 30;
  info.kv_bytes_per_token = 0;  // a recurrent model keeps no per-token K/V
  EXPECT_EQ(fit_context_size(info, 1 << 20).n_ctx, 1 << 22);
}

TEST(LlamaEngine, TheDefaultContextIsTheModelsTrainingContext) {
  ContextOptions o = small_context();
  o.n_ctx = 0;
  auto e = load_llama_engine(PREFIXD_TINY_MODEL, o);
  EXPECT_EQ(e->context_size(), e->model().n_ctx_train);
  o.kv_memory_budget = e->model().kv_bytes_per_token * 3000;  // room for 3000 cells: 2816 is the multiple of 256 below
  EXPECT_EQ(load_llama_engine(PREFIXD_TINY_MODEL, o)->context_size(), 2816);
}

TEST(LlamaEngine, LoadsTinyModelAsDenseWithKvSize) {
  auto e = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  EXPECT_EQ(e->model().family, ModelFamily::dense);
  EXPECT_GT(e->model().kv_bytes_per_token, 0u);
  EXPECT_FALSE(e->model().chat_template.empty());
  EXPECT_EQ(e->sequence_count(), 4);
  EXPECT_EQ(e->context_size(), 512);
}

TEST(LlamaEngine, SpecialTokensTokenizeToOneToken) {
  auto e = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  auto tokens = e->vocab().tokenize("<|im_start|>", false, true);
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(e->vocab().piece(tokens[0], true), "<|im_start|>");
  auto end = e->vocab().tokenize("<|im_end|>", false, true);
  ASSERT_EQ(end.size(), 1u);
  EXPECT_TRUE(e->vocab().is_end_of_generation(end[0]));
}

TEST(LlamaEngine, SequenceCopyRemoveAndPositions) {
  auto e = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  const auto tokens = prompt_tokens(*e);
  feed(*e, 0, tokens, 0);
  const auto n = static_cast<Pos>(tokens.size());
  EXPECT_EQ(e->sequence_positions(0).count(), n);
  e->copy_sequence(0, 2, 0, 5);
  EXPECT_EQ(e->sequence_positions(2).max, 4);
  EXPECT_TRUE(e->remove_sequence(0, 5, -1));
  EXPECT_EQ(e->sequence_positions(0).max, 4);
  EXPECT_TRUE(e->remove_sequence(0));
  EXPECT_TRUE(e->sequence_positions(0).empty());
  EXPECT_EQ(e->sequence_positions(2).count(), 5) << "removing the source keeps the copy";
}

TEST(LlamaEngine, RestoredSequenceInEmptyContextGivesBitIdenticalLogits) {
  auto original = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  const auto tokens = prompt_tokens(*original);
  const auto n = static_cast<Pos>(tokens.size());
  feed(*original, 0, tokens, 0);
  const Bytes state = original->save_sequence(0);
  ASSERT_FALSE(state.empty());
  const Token next = tokens[3];
  const auto expected = feed(*original, 0, std::span(&next, 1), n);

  auto fresh = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  ASSERT_TRUE(fresh->restore_sequence(state, 3));
  EXPECT_EQ(fresh->sequence_positions(3).count(), n);
  const auto restored = feed(*fresh, 3, std::span(&next, 1), n);
  ASSERT_EQ(expected.size(), restored.size());
  EXPECT_EQ(max_abs_diff(expected, restored), 0.0f);
}

TEST(LlamaEngine, RestoredSequenceBesideOthersAgreesWithinTolerance) {
  auto original = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  const auto tokens = prompt_tokens(*original);
  const auto n = static_cast<Pos>(tokens.size());
  feed(*original, 0, tokens, 0);
  const Bytes state = original->save_sequence(0);
  const Token next = tokens[2];
  const auto expected = feed(*original, 0, std::span(&next, 1), n);

  auto busy = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  const auto other = busy->vocab().tokenize("Some unrelated text occupies other cells first.", false, true);
  feed(*busy, 1, other, 0);
  ASSERT_TRUE(busy->restore_sequence(state, 2));
  const auto restored = feed(*busy, 2, std::span(&next, 1), n);
  const float diff = max_abs_diff(expected, restored);
  RecordProperty("max_abs_diff", std::to_string(diff));
  EXPECT_LT(diff, 5e-3f);
  EXPECT_EQ(std::max_element(expected.begin(), expected.end()) - expected.begin(),
            std::max_element(restored.begin(), restored.end()) - restored.begin());
}

TEST(LlamaEngine, CorruptStateIsRefusedAndLeavesSequenceEmpty) {
  auto e = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  const auto tokens = prompt_tokens(*e);
  feed(*e, 0, tokens, 0);
  Bytes state = e->save_sequence(0);
  state.resize(state.size() / 2);
  EXPECT_FALSE(e->restore_sequence(state, 1));
  EXPECT_TRUE(e->sequence_positions(1).empty());
}

// A greedy draw is the first id with the largest logit of the row, end-of-generation ids left out
// under ignore_eos: what libllama's greedy sampler behind its logit bias picks, at every position
// of a prompt and for every row of one call.
TEST(LlamaEngine, AGreedyDrawIsTheFirstLargestLogitAndIgnoreEosSkipsEndOfGeneration) {
  auto e = load_llama_engine(PREFIXD_TINY_MODEL, small_context());
  const std::vector<Token> prompt = prompt_tokens(*e);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({prompt[i], static_cast<Pos>(i), 0, true});
  ASSERT_EQ(e->decode(batch), DecodeStatus::ok);
  SamplingParams greedy{.temperature = 0};
  SamplingParams greedy_no_eos{.temperature = 0, .ignore_eos = true};
  for (size_t row = 0; row < batch.size(); ++row) {
    const auto logits = e->logits(static_cast<std::int32_t>(row));
    const auto best = static_cast<Token>(std::ranges::max_element(logits) - logits.begin());
    EXPECT_EQ(e->make_sampler(greedy)->sample_quick(static_cast<std::int32_t>(row)), best) << "row " << row;
    Token best_not_eog = -1;
    for (Token id = 0; id < static_cast<Token>(logits.size()); ++id) {
      if (e->vocab().is_end_of_generation(id)) continue;
      if (best_not_eog < 0 || logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(best_not_eog)]) best_not_eog = id;
    }
    EXPECT_EQ(e->make_sampler(greedy_no_eos)->sample_quick(static_cast<std::int32_t>(row)), best_not_eog) << "row " << row;
  }
}

TEST(LlamaEngine, MissingModelFileIsAClearError) {
  EXPECT_THROW(load_llama_engine("/nonexistent/model.gguf", small_context()), std::runtime_error);
}

}  // namespace
}  // namespace prefixd::engine
