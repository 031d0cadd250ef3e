// prefixd engine — a model-free Engine for unit tests of the cache and the scheduler.
//
// Its memory (fake_memory.h) imitates libllama's for the chosen model family: a unified cell pool
// shared by any number of sequences (dense, and the attention layers of the other families), a
// window pool that forgets old cells (sliding window without swa_full), a per-sequence recurrent
// state (recurrent, hybrid). So sequence operations, capacity limits, state and checkpoint
// save/restore succeed and fail where libllama's do, or fail outright where libllama would go on
// with a wrong state (a recurrent sequence restarted past position 0). Its "logits" are a deterministic hash of
// exactly what the memory holds for the row's sequence and position, so a test can check that a
// reused prefix gives the same next-token distribution as a cold run, and that a wrongly adopted
// prefix or a wrongly restored state does not.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <vector>

#include "engine/engine.h"
#include "support/fake_memory.h"

namespace prefixd::engine {

struct FakeEngineOptions {
  std::int32_t n_ctx = 1024;
  std::int32_t n_batch = 64;
  // > 0: the rows up to which a call computes every row alike (Engine::rowwise_rows), as
  // libllama's CPU kernels do up to 63; 0: the fake promises nothing of the kind.
  std::int32_t rowwise_rows = 0;
  std::int32_t n_seq = 8;
  std::int32_t n_vocab = 258;  // bytes 0..255, 256 = end of generation, 257 = unused
  bool newline_token = false;  // token 10 prints as '\n' (else every token prints as printable ASCII)
  ModelFamily family = ModelFamily::dense;  // whose libllama memory the engine imitates
  std::int32_t sliding_window = 0;  // sliding_window family: positions a window layer attends to (> 0)
  bool swa_full = true;             // sliding_window family: the window layers keep every cell
  // Called at the start of every decode, on the caller's thread: a test can hold the engine until
  // all its requests are queued, so the scheduler sees them together whatever the machine's load.
  std::function<void()> before_decode;
  // Samplers made with a grammar defer every draw to sample_masked (as a real grammar does when
  // it refuses the unconstrained draw), which first calls this hook on its caller's thread: a test
  // can hold a masked draw and watch what the scheduler does meanwhile. The grammar constrains
  // nothing here.
  bool defer_grammar_draws = false;
  std::function<void()> before_masked_sample;
};

class FakeEngine final : public Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options = {});

  const ModelInfo& model() const override { return info_; }
  const FakeEngineOptions& options() const { return options_; }
  const Vocabulary& vocab() const override { return *vocab_; }
  std::int32_t context_size() const override { return options_.n_ctx; }
  std::int32_t batch_size() const override { return options_.n_batch; }
  std::int32_t rowwise_rows() const override { return options_.rowwise_rows; }
  std::int32_t sequence_count() const override { return options_.n_seq; }

  DecodeStatus decode(std::span<const BatchToken> batch) override;
  std::span<const float> logits(std::int32_t row) const override;
  // Throws std::invalid_argument for a grammar check_grammar refuses; records every grammar asked for.
  std::unique_ptr<Sampler> make_sampler(const SamplingParams& params) override;
  // A structural check only (the fake does not constrain its output): refuses an empty grammar and
  // one that does not define its root rule, as libllama does.
  std::optional<std::string> check_grammar(const Grammar& grammar) const override;

  void copy_sequence(SeqId src, SeqId dst, Pos p0 = 0, Pos p1 = -1) override;
  bool remove_sequence(SeqId seq, Pos p0 = 0, Pos p1 = -1) override;
  PosRange sequence_positions(SeqId seq) const override;
  void clear() override;

  Bytes save_sequence(SeqId seq) const override;
  bool restore_sequence(std::span<const std::uint8_t> state, SeqId dst) override;
  Bytes save_checkpoint(SeqId seq) const override;
  bool restore_checkpoint(std::span<const std::uint8_t> state, SeqId dst) override;
  void drop_checkpoint_state(SeqId seq) override { memory_.drop_checkpoint_state(seq); }

  // Test observability.
  // The grammar of every sampler made with one, in order.
  std::vector<Grammar> grammars_requested() const {
    std::lock_guard lock(grammars_mutex_);
    return grammars_requested_;
  }
  std::int64_t tokens_decoded() const { return tokens_decoded_; }
  // Every batch decode() accepted, in order (how the scheduler formed them).
  const std::vector<std::vector<BatchToken>>& batches() const { return batches_; }
  // Used full-attention cells (0 for a recurrent model, which has none).
  std::int32_t used_cells() const { return memory_.attention().used_count(); }
  // Full-attention cells whose set of owning sequences satisfies `owners` (called for used cells only).
  std::int32_t count_cells(const std::function<bool(const std::set<SeqId>& owners)>& owners) const {
    return memory_.attention().count(owners);
  }
  // Tokens a sequence's full-attention cells hold, ordered by position (what its K/V "means");
  // empty for a recurrent model.
  std::vector<Token> sequence_tokens(SeqId seq) const;
  // Positions [0, n) a sequence's recurrent state has consumed (0 without recurrent layers).
  Pos recurrent_position(SeqId seq) const { return memory_.recurrent_position(seq); }
  // Positions the window layers still hold (sliding window without swa_full; else all cells).
  PosRange window_positions(SeqId seq) const { return memory_.window_positions(seq); }
  // Next-token logits a cold run over exactly `history` would produce.
  std::vector<float> logits_for_history(std::span<const Token> history) const;

 private:
  bool valid_seq(SeqId seq) const { return seq >= 0 && seq < options_.n_seq; }
  std::vector<float> logits_for_digest(std::uint64_t digest) const;

  FakeEngineOptions options_;
  ModelInfo info_;
  std::unique_ptr<Vocabulary> vocab_;
  FakeMemory memory_;
  std::vector<std::vector<float>> logits_;  // one row per batch entry of the last decode
  std::int64_t tokens_decoded_ = 0;
  std::vector<std::vector<BatchToken>> batches_;
  mutable std::mutex grammars_mutex_;  // make_sampler may run on any thread
  std::vector<Grammar> grammars_requested_;
};

}  // namespace prefixd::engine
