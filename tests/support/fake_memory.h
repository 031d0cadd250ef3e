// prefixd engine — the sequence memory behind FakeEngine, shaped like libllama's for each model
// family, so the cache's reuse decisions meet the same constraints they meet on a real model.
//
//   dense           one unified pool of attention cells (position, token, owning sequences).
//   sliding_window  as dense while the window layers keep every cell (swa_full); otherwise a second
//                   pool for the window layers that drops, after every decode, the cells no later
//                   position can attend to, so cutting a sequence back past its window loses data.
//   recurrent       no cells: one state per sequence that has consumed positions [0, next_pos) and
//                   can only be extended at next_pos, copied whole or dropped whole.
//   hybrid          an attention pool plus the recurrent state, with the recurrent rules on top.
//
// Every decode also yields a digest of exactly what the memory holds for the decoded position; the
// engine turns it into logits. cold_digest() gives the digest a cold run over a history produces,
// so a state rebuilt from the wrong pieces shows up as different logits.
// REQUIRES: FakeEngine validated sequence ids and positions of a batch before decode().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace prefixd::engine {

// SplitMix64's finalizer: every digest and every fake logit is built from it.
inline std::uint64_t fake_mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A unified cell pool: each cell holds one (position, token) and is shared by any number of
// sequences, the way copy_sequence shares libllama's KV cells without copying them.
class CellPool {
 public:
  explicit CellPool(std::int32_t capacity) : cells_(static_cast<std::size_t>(capacity)) {}

  std::int32_t free_count() const;
  std::int32_t used_count() const;
  std::int32_t count(const std::function<bool(const std::set<SeqId>& owners)>& owners) const;
  // Claims a free cell; the caller checked free_count() first.
  void add(Pos pos, Token token, SeqId seq);
  // Ranges are [p0, p1); p1 < 0 means "to the end". remove: seq < 0 removes from every sequence.
  void copy(SeqId src, SeqId dst, Pos p0, Pos p1);
  void remove(SeqId seq, Pos p0, Pos p1);
  PosRange positions(SeqId seq) const;
  // The cells `seq` holds in [p0, p1), by position.
  std::map<Pos, Token> held(SeqId seq, Pos p0 = 0, Pos p1 = -1) const;
  void clear();

 private:
  struct Cell {
    Pos pos = -1;
    Token token = 0;
    std::set<SeqId> seqs;  // empty: the cell is free
  };
  std::vector<Cell> cells_;
};

// The digest of an empty token history; each token then folds in with fake_mix64.
inline constexpr std::uint64_t kFakeEmptyHistory = 0x1234567;

// What one sequence's recurrent layers remember: a fixed-size summary of everything consumed.
struct RecurrentState {
  Pos next_pos = 0;                         // positions [0, next_pos) have been consumed
  std::uint64_t hash = kFakeEmptyHistory;   // digest of the tokens consumed, in order
};

class FakeMemory {
 public:
  FakeMemory(ModelFamily family, std::int32_t n_ctx, std::int32_t n_seq, std::int32_t sliding_window, bool swa_full);

  // Stores a batch whose sequence ids and positions FakeEngine already checked. After ok,
  // digests[row] is set for every row whose logits are read. On failure nothing changed.
  DecodeStatus decode(std::span<const BatchToken> batch, std::vector<std::optional<std::uint64_t>>& digests);
  std::uint64_t cold_digest(std::span<const Token> history) const;

  void copy(SeqId src, SeqId dst, Pos p0, Pos p1);
  bool remove(SeqId seq, Pos p0, Pos p1);
  PosRange positions(SeqId seq) const;
  void clear();

  Bytes save(SeqId seq) const;
  bool restore(std::span<const std::uint8_t> state, SeqId dst);
  Bytes save_checkpoint(SeqId seq) const;
  bool restore_checkpoint(std::span<const std::uint8_t> state, SeqId dst);
  void drop_checkpoint_state(SeqId seq);

  // The full-attention cells (empty for recurrent models): what count and capacity refer to.
  const CellPool& attention() const { return attention_; }
  // Positions the recurrent state has consumed (0 for families without one).
  Pos recurrent_position(SeqId seq) const;
  // Positions the window layers still hold when they drop old cells (else the attention range).
  PosRange window_positions(SeqId seq) const;

 private:
  // The parts a state or checkpoint is made of, parsed before anything is changed.
  struct Parts {
    std::vector<std::pair<Pos, Token>> attention;
    std::vector<std::pair<Pos, Token>> window;
    RecurrentState recurrent;
  };

  bool has_attention() const { return family_ != ModelFamily::recurrent; }
  bool has_recurrent() const { return family_ == ModelFamily::recurrent || family_ == ModelFamily::hybrid; }
  bool prunes_window() const { return family_ == ModelFamily::sliding_window && !swa_full_; }
  bool trimmable() const {
    return family_ == ModelFamily::dense || (family_ == ModelFamily::sliding_window && swa_full_);
  }
  bool valid_seq(SeqId seq) const { return seq >= 0 && seq < n_seq_; }
  std::uint32_t layout() const;
  const CellPool& window_source() const { return prunes_window() ? window_ : attention_; }

  std::uint64_t digest_at(SeqId seq, Pos pos, std::uint64_t recurrent_hash) const;
  void prune_windows();
  // A whole sequence state, or (checkpoint) only the parts that cannot be cut back.
  Bytes serialize(SeqId seq, bool checkpoint) const;
  std::optional<Parts> parse(std::span<const std::uint8_t> bytes, bool checkpoint) const;

  ModelFamily family_;
  std::int32_t n_seq_;
  std::int32_t window_size_;
  bool swa_full_;
  CellPool attention_;                  // full-attention cells: every layer of dense, the global ones of swa
  CellPool window_;                     // window-layer cells, only when they are pruned
  std::vector<RecurrentState> states_;  // one per sequence id, only for recurrent layers
};

}  // namespace prefixd::engine
