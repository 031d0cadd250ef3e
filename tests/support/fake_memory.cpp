#include "support/fake_memory.h"

#include <algorithm>
#include <array>
#include <bit>

namespace prefixd::engine {
namespace {

constexpr std::uint32_t kStateMagic = 0x4b414646;       // "FFAK": a whole sequence
constexpr std::uint32_t kCheckpointMagic = 0x50434646;  // "FFCP": a checkpoint
constexpr std::uint64_t kEmptyWindow = 0x77696e646f77;
constexpr std::uint64_t kWindowSalt = 0x5357;
constexpr std::uint64_t kHybridSalt = 0x4859;

std::uint64_t extend(std::uint64_t hash, Token token) {
  return fake_mix64(hash ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)));
}

// The window layers see positions as well as tokens (rotary embeddings), so a window moved to
// other positions digests differently.
std::uint64_t extend_window(std::uint64_t hash, Pos pos, Token token) {
  return fake_mix64(hash ^ ((static_cast<std::uint64_t>(static_cast<std::uint32_t>(pos)) << 32) |
                            static_cast<std::uint64_t>(static_cast<std::uint32_t>(token))));
}

std::uint64_t history_digest(const std::map<Pos, Token>& cells) {
  std::uint64_t hash = kFakeEmptyHistory;
  for (const auto& [pos, token] : cells) hash = extend(hash, token);
  return hash;
}

std::uint64_t window_digest(const std::map<Pos, Token>& cells) {
  std::uint64_t hash = kEmptyWindow;
  for (const auto& [pos, token] : cells) hash = extend_window(hash, pos, token);
  return hash;
}

// Two views of a sequence mixed so that each one matters, even when both are the same.
std::uint64_t combine(std::uint64_t a, std::uint64_t b, std::uint64_t salt) {
  return fake_mix64(a ^ fake_mix64(b ^ salt));
}

template <typename T>
void put(Bytes& out, T value) {
  const auto raw = std::bit_cast<std::array<std::uint8_t, sizeof(T)>>(value);
  out.insert(out.end(), raw.begin(), raw.end());
}

void put_cells(Bytes& out, const std::map<Pos, Token>& cells) {
  put(out, static_cast<std::uint32_t>(cells.size()));
  for (const auto& [pos, token] : cells) {
    put(out, pos);
    put(out, token);
  }
}

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  std::optional<T> take() {
    if (bytes_.size() < sizeof(T)) return std::nullopt;
    std::array<std::uint8_t, sizeof(T)> raw{};
    std::copy_n(bytes_.begin(), sizeof(T), raw.begin());
    bytes_ = bytes_.subspan(sizeof(T));
    return std::bit_cast<T>(raw);
  }

  std::optional<std::vector<std::pair<Pos, Token>>> take_cells() {
    const auto count = take<std::uint32_t>();
    // Checked against what is left before allocating, so a corrupt count cannot ask for gigabytes.
    if (!count || *count > bytes_.size() / (sizeof(Pos) + sizeof(Token))) return std::nullopt;
    std::vector<std::pair<Pos, Token>> cells;
    cells.reserve(*count);
    for (std::uint32_t i = 0; i < *count; ++i) {
      const auto pos = take<Pos>();
      const auto token = take<Token>();
      if (!pos || !token || *pos < 0) return std::nullopt;
      cells.emplace_back(*pos, *token);
    }
    return cells;
  }

  bool at_end() const { return bytes_.empty(); }

 private:
  std::span<const std::uint8_t> bytes_;
};

}  // namespace

std::int32_t CellPool::free_count() const {
  return static_cast<std::int32_t>(std::ranges::count_if(cells_, [](const Cell& c) { return c.seqs.empty(); }));
}

std::int32_t CellPool::used_count() const { return static_cast<std::int32_t>(cells_.size()) - free_count(); }

std::int32_t CellPool::count(const std::function<bool(const std::set<SeqId>&)>& owners) const {
  return static_cast<std::int32_t>(
      std::ranges::count_if(cells_, [&](const Cell& c) { return !c.seqs.empty() && owners(c.seqs); }));
}

void CellPool::add(Pos pos, Token token, SeqId seq) {
  const auto free_cell = std::ranges::find_if(cells_, [](const Cell& c) { return c.seqs.empty(); });
  if (free_cell != cells_.end()) *free_cell = Cell{pos, token, {seq}};
}

void CellPool::copy(SeqId src, SeqId dst, Pos p0, Pos p1) {
  for (Cell& cell : cells_) {
    if (cell.seqs.contains(src) && cell.pos >= std::max(p0, 0) && (p1 < 0 || cell.pos < p1)) cell.seqs.insert(dst);
  }
}

void CellPool::remove(SeqId seq, Pos p0, Pos p1) {
  for (Cell& cell : cells_) {
    if ((seq < 0 || cell.seqs.contains(seq)) && cell.pos >= std::max(p0, 0) && (p1 < 0 || cell.pos < p1)) {
      if (seq < 0) cell.seqs.clear(); else cell.seqs.erase(seq);
    }
  }
}

PosRange CellPool::positions(SeqId seq) const {
  PosRange range;
  for (const Cell& cell : cells_) {
    if (!cell.seqs.contains(seq)) continue;
    range.min = range.min < 0 ? cell.pos : std::min(range.min, cell.pos);
    range.max = std::max(range.max, cell.pos);
  }
  return range;
}

std::map<Pos, Token> CellPool::held(SeqId seq, Pos p0, Pos p1) const {
  std::map<Pos, Token> out;
  for (const Cell& cell : cells_) {
    if (cell.seqs.contains(seq) && cell.pos >= p0 && (p1 < 0 || cell.pos < p1)) out[cell.pos] = cell.token;
  }
  return out;
}

void CellPool::clear() { std::ranges::fill(cells_, Cell{}); }

FakeMemory::FakeMemory(ModelFamily family, std::int32_t n_ctx, std::int32_t n_seq, std::int32_t sliding_window,
                       bool swa_full)
    : family_(family), n_seq_(n_seq), window_size_(sliding_window), swa_full_(swa_full),
      attention_(has_attention() ? n_ctx : 0), window_(prunes_window() ? n_ctx : 0),
      states_(has_recurrent() ? static_cast<std::size_t>(n_seq) : 0) {}

std::uint32_t FakeMemory::layout() const {
  // A state fits only a memory of the same shape: the family, and whether window cells are pruned.
  return static_cast<std::uint32_t>(family_) * 2 + (prunes_window() ? 1 : 0);
}

DecodeStatus FakeMemory::decode(std::span<const BatchToken> batch, std::vector<std::optional<std::uint64_t>>& digests) {
  // Recurrent layers consume tokens strictly in order: every token must continue its sequence's
  // state exactly (a gap or an overlap is an error), worked out on a copy so a failure changes nothing.
  std::vector<RecurrentState> states = states_;
  std::vector<std::uint64_t> consumed(batch.size(), 0);
  if (has_recurrent()) {
    for (std::size_t row = 0; row < batch.size(); ++row) {
      RecurrentState& state = states[static_cast<std::size_t>(batch[row].seq)];
      if (batch[row].pos != state.next_pos) return DecodeStatus::error;
      state.hash = extend(state.hash, batch[row].token);
      ++state.next_pos;
      consumed[row] = state.hash;
    }
  }
  const auto needed = static_cast<std::int32_t>(batch.size());
  if ((has_attention() && attention_.free_count() < needed) || (prunes_window() && window_.free_count() < needed)) {
    return DecodeStatus::no_kv_space;
  }
  for (const BatchToken& entry : batch) {
    if (has_attention()) attention_.add(entry.pos, entry.token, entry.seq);
    if (prunes_window()) window_.add(entry.pos, entry.token, entry.seq);
  }
  states_ = std::move(states);
  digests.assign(batch.size(), std::nullopt);
  for (std::size_t row = 0; row < batch.size(); ++row) {
    if (batch[row].logits) digests[row] = digest_at(batch[row].seq, batch[row].pos, consumed[row]);
  }
  prune_windows();  // after the digests: every row of this batch still saw its whole window
  return DecodeStatus::ok;
}

std::uint64_t FakeMemory::digest_at(SeqId seq, Pos pos, std::uint64_t recurrent_hash) const {
  switch (family_) {
    case ModelFamily::dense:
      return history_digest(attention_.held(seq, 0, pos + 1));
    case ModelFamily::sliding_window: {
      // Global layers read every earlier cell; window layers the last window_size_ positions only.
      const std::uint64_t global = history_digest(attention_.held(seq, 0, pos + 1));
      const Pos first = std::max<Pos>(0, pos - window_size_ + 1);
      return combine(global, window_digest(window_source().held(seq, first, pos + 1)), kWindowSalt);
    }
    case ModelFamily::recurrent:
      return recurrent_hash;
    case ModelFamily::hybrid:
      return combine(recurrent_hash, history_digest(attention_.held(seq, 0, pos + 1)), kHybridSalt);
  }
  return 0;
}

std::uint64_t FakeMemory::cold_digest(std::span<const Token> history) const {
  std::uint64_t full = kFakeEmptyHistory;
  for (Token token : history) full = extend(full, token);
  switch (family_) {
    case ModelFamily::dense:
    case ModelFamily::recurrent:
      return full;
    case ModelFamily::sliding_window: {
      const auto n = static_cast<Pos>(history.size());
      std::uint64_t window = kEmptyWindow;
      for (Pos pos = std::max<Pos>(0, n - window_size_); pos < n; ++pos) {
        window = extend_window(window, pos, history[static_cast<std::size_t>(pos)]);
      }
      return combine(full, window, kWindowSalt);
    }
    case ModelFamily::hybrid:
      return combine(full, full, kHybridSalt);
  }
  return 0;
}

void FakeMemory::prune_windows() {
  if (!prunes_window()) return;
  for (SeqId seq = 0; seq < n_seq_; ++seq) {
    // The next position, max + 1, attends to [max + 2 - window, max + 1]: a cell before that can
    // never be read again, and libllama lets it be overwritten, so it is dropped right away.
    const PosRange range = window_.positions(seq);
    const Pos keep_from = range.max + 2 - window_size_;
    if (!range.empty() && keep_from > 0) window_.remove(seq, 0, keep_from);
  }
}

void FakeMemory::copy(SeqId src, SeqId dst, Pos p0, Pos p1) {
  if (!valid_seq(src) || !valid_seq(dst) || src == dst) return;
  attention_.copy(src, dst, p0, p1);
  window_.copy(src, dst, p0, p1);
  // A recurrent state has no positions to select from: dst takes src's whole state.
  if (has_recurrent()) states_[static_cast<std::size_t>(dst)] = states_[static_cast<std::size_t>(src)];
}

bool FakeMemory::remove(SeqId seq, Pos p0, Pos p1) {
  if (seq >= n_seq_) return false;
  const Pos from = std::max<Pos>(p0, 0);
  if (p1 >= 0 && p1 <= from) return true;  // an empty range
  if (has_recurrent()) {
    // A recurrent state cannot forget part of what it consumed. As in libllama, a removal must
    // start at 0 or after the state's last position; one from 0 takes the state only when it
    // reaches the last position (the attention cells before it go either way).
    if (seq < 0) {
      if (from > 0 || p1 >= 0) return false;
      states_.assign(states_.size(), RecurrentState{});
    } else {
      RecurrentState& state = states_[static_cast<std::size_t>(seq)];
      if (from == 0 && (p1 < 0 || p1 >= state.next_pos)) {
        state = RecurrentState{};
      } else if (from > 0 && from < state.next_pos) {
        return false;
      }
    }
  }
  attention_.remove(seq, from, p1);
  window_.remove(seq, from, p1);
  return true;
}

PosRange FakeMemory::positions(SeqId seq) const {
  const Pos last = recurrent_position(seq) - 1;  // a recurrent state knows only its last position
  switch (family_) {
    case ModelFamily::dense:
      return attention_.positions(seq);
    case ModelFamily::sliding_window:
      // libllama reports the window cache, of which the full-attention cache holds a superset.
      return window_source().positions(seq);
    case ModelFamily::recurrent:
      return last < 0 ? PosRange{} : PosRange{last, last};
    case ModelFamily::hybrid: {
      // What both parts hold, as libllama's hybrid memory reports it.
      const PosRange cells = attention_.positions(seq);
      if (cells.empty() || last < 0) return {};
      return {std::max(cells.min, last), std::min(cells.max, last)};
    }
  }
  return {};
}

void FakeMemory::clear() {
  attention_.clear();
  window_.clear();
  states_.assign(states_.size(), RecurrentState{});
}

Pos FakeMemory::recurrent_position(SeqId seq) const {
  return has_recurrent() && valid_seq(seq) ? states_[static_cast<std::size_t>(seq)].next_pos : 0;
}

PosRange FakeMemory::window_positions(SeqId seq) const { return window_source().positions(seq); }

Bytes FakeMemory::serialize(SeqId seq, bool checkpoint) const {
  Bytes out;
  put(out, checkpoint ? kCheckpointMagic : kStateMagic);
  put(out, layout());
  if (!checkpoint && has_attention()) put_cells(out, attention_.held(seq));
  if (prunes_window()) put_cells(out, window_.held(seq));
  if (has_recurrent()) {
    const RecurrentState& state = states_[static_cast<std::size_t>(seq)];
    put(out, state.next_pos);
    put(out, state.hash);
  }
  return out;
}

std::optional<FakeMemory::Parts> FakeMemory::parse(std::span<const std::uint8_t> bytes, bool checkpoint) const {
  Reader in(bytes);
  if (in.take<std::uint32_t>() != (checkpoint ? kCheckpointMagic : kStateMagic)) return std::nullopt;
  if (in.take<std::uint32_t>() != layout()) return std::nullopt;
  Parts parts;
  if (!checkpoint && has_attention()) {
    auto cells = in.take_cells();
    if (!cells) return std::nullopt;
    parts.attention = std::move(*cells);
  }
  if (prunes_window()) {
    auto cells = in.take_cells();
    if (!cells) return std::nullopt;
    parts.window = std::move(*cells);
  }
  if (has_recurrent()) {
    const auto next_pos = in.take<Pos>();
    const auto hash = in.take<std::uint64_t>();
    if (!next_pos || !hash || *next_pos < 0) return std::nullopt;
    parts.recurrent = {*next_pos, *hash};
  }
  if (!in.at_end()) return std::nullopt;
  return parts;
}

Bytes FakeMemory::save(SeqId seq) const { return valid_seq(seq) ? serialize(seq, false) : Bytes{}; }

bool FakeMemory::restore(std::span<const std::uint8_t> state, SeqId dst) {
  if (!valid_seq(dst)) return false;
  const std::optional<Parts> parts = parse(state, false);
  remove(dst, 0, -1);  // whatever happens next, dst holds nothing of its earlier state
  if (!parts) return false;
  if (attention_.free_count() < static_cast<std::int32_t>(parts->attention.size()) ||
      window_.free_count() < static_cast<std::int32_t>(parts->window.size())) {
    return false;
  }
  for (const auto& [pos, token] : parts->attention) attention_.add(pos, token, dst);
  for (const auto& [pos, token] : parts->window) window_.add(pos, token, dst);
  if (has_recurrent()) states_[static_cast<std::size_t>(dst)] = parts->recurrent;
  return true;
}

Bytes FakeMemory::save_checkpoint(SeqId seq) const {
  return valid_seq(seq) && !trimmable() ? serialize(seq, true) : Bytes{};
}

bool FakeMemory::restore_checkpoint(std::span<const std::uint8_t> state, SeqId dst) {
  if (!valid_seq(dst) || trimmable()) return false;  // a trimmable memory has no partial state
  const std::optional<Parts> parts = parse(state, true);
  // The partial state goes first; the full-attention cells stay whatever happens.
  window_.remove(dst, 0, -1);
  if (has_recurrent()) states_[static_cast<std::size_t>(dst)] = RecurrentState{};
  if (!parts || window_.free_count() < static_cast<std::int32_t>(parts->window.size())) return false;
  for (const auto& [pos, token] : parts->window) window_.add(pos, token, dst);
  if (has_recurrent()) states_[static_cast<std::size_t>(dst)] = parts->recurrent;
  return true;
}

void FakeMemory::drop_checkpoint_state(SeqId seq) {
  if (!valid_seq(seq) || trimmable()) return;
  window_.remove(seq, 0, -1);
  if (has_recurrent()) states_[static_cast<std::size_t>(seq)] = RecurrentState{};
}

}  // namespace prefixd::engine
