// prefixd engine — a model-free Engine for unit tests of the cache and the scheduler.
//
// It keeps a real unified cell pool (one cell per (position, token), shared by any number of
// sequences, exactly like a unified KV cache), so sequence operations, capacity limits and state
// save/restore behave like libllama's. Its "logits" are a deterministic hash of the sequence's
// whole token history up to the row's position, so a test can check that a reused prefix gives
// the same next-token distribution as a cold run, and that a wrongly adopted prefix does not.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "engine/engine.h"

namespace prefixd::engine {

struct FakeEngineOptions {
  std::int32_t n_ctx = 1024;
  std::int32_t n_batch = 64;
  std::int32_t n_seq = 8;
  std::int32_t n_vocab = 258;  // bytes 0..255, 256 = end of generation, 257 = unused
  bool trimmable = true;       // false: behaves like recurrent memory (no partial removal)
};

class FakeEngine final : public Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options = {});

  const ModelInfo& model() const override { return info_; }
  const Vocabulary& vocab() const override { return *vocab_; }
  std::int32_t context_size() const override { return options_.n_ctx; }
  std::int32_t batch_size() const override { return options_.n_batch; }
  std::int32_t sequence_count() const override { return options_.n_seq; }

  DecodeStatus decode(std::span<const BatchToken> batch) override;
  std::span<const float> logits(std::int32_t row) const override;
  std::unique_ptr<Sampler> make_sampler(const SamplingParams& params) override;

  void copy_sequence(SeqId src, SeqId dst, Pos p0 = 0, Pos p1 = -1) override;
  bool remove_sequence(SeqId seq, Pos p0 = 0, Pos p1 = -1) override;
  PosRange sequence_positions(SeqId seq) const override;
  void clear() override;

  Bytes save_sequence(SeqId seq) const override;
  bool restore_sequence(std::span<const std::uint8_t> state, SeqId dst) override;

  // Test observability.
  std::int64_t tokens_decoded() const { return tokens_decoded_; }
  // Every batch decode() accepted, in order (how the scheduler formed them).
  const std::vector<std::vector<BatchToken>>& batches() const { return batches_; }
  std::int32_t used_cells() const;
  // Cells whose set of owning sequences satisfies `owners` (called for used cells only).
  std::int32_t count_cells(const std::function<bool(const std::set<SeqId>& owners)>& owners) const;
  // Tokens a sequence holds, ordered by position (what its K/V "means").
  std::vector<Token> sequence_tokens(SeqId seq) const;
  // Next-token logits a cold run over exactly `history` would produce.
  std::vector<float> logits_for_history(std::span<const Token> history) const;

 private:
  struct Cell {
    Pos pos = -1;
    Token token = 0;
    std::set<SeqId> seqs;  // empty: the cell is free
  };

  bool valid_seq(SeqId seq) const { return seq >= 0 && seq < options_.n_seq; }

  FakeEngineOptions options_;
  ModelInfo info_;
  std::unique_ptr<Vocabulary> vocab_;
  std::vector<Cell> cells_;
  std::vector<std::vector<float>> logits_;  // one row per batch entry of the last decode
  std::int64_t tokens_decoded_ = 0;
  std::vector<std::vector<BatchToken>> batches_;
};

}  // namespace prefixd::engine
