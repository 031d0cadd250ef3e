#include "engine/window_states.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace prefixd::engine::detail {

namespace {

// "PXWS", then the piece count and, for each piece, its size and libllama's state.
constexpr std::array<std::uint8_t, 4> kMagic = {'P', 'X', 'W', 'S'};

void put_u64(Bytes& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

bool get_u64(std::span<const std::uint8_t>& in, std::uint64_t& v) {
  if (in.size() < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[static_cast<size_t>(i)]) << (8 * i);
  in = in.subspan(8);
  return true;
}

}  // namespace

WindowStates::WindowStates(llama_context* ctx, SeqId spare, SeqId guard, std::int32_t window)
    : ctx_(ctx), spare_(spare), guard_(guard), piece_(std::max<std::int32_t>(1, window / 2)) {}

bool WindowStates::is_pieces(std::span<const std::uint8_t> state) {
  return state.size() >= kMagic.size() && std::equal(kMagic.begin(), kMagic.end(), state.begin());
}

Bytes WindowStates::save(SeqId seq) const {
  const llama_pos first = llama_memory_seq_pos_min(memory(), seq);
  const llama_pos last = llama_memory_seq_pos_max(memory(), seq);
  if (first < 0) return {};
  Bytes out(kMagic.begin(), kMagic.end());
  const size_t count_at = out.size();
  put_u64(out, 0);
  std::uint64_t pieces = 0;
  for (llama_pos from = first - first % piece_; from <= last; from += piece_) {
    llama_memory_seq_rm(memory(), spare_, -1, -1);
    llama_memory_seq_cp(memory(), seq, spare_, from, from + piece_);
    if (llama_memory_seq_pos_min(memory(), spare_) < 0) continue;  // a gap: nothing to save
    const size_t size = llama_state_seq_get_size_ext(ctx_, spare_, LLAMA_STATE_SEQ_FLAGS_NONE);
    const size_t at = out.size();
    put_u64(out, 0);
    out.resize(at + 8 + size);
    const size_t written = llama_state_seq_get_data_ext(ctx_, out.data() + at + 8, size, spare_, LLAMA_STATE_SEQ_FLAGS_NONE);
    out.resize(at + 8 + written);
    for (int i = 0; i < 8; ++i) out[at + static_cast<size_t>(i)] = static_cast<std::uint8_t>(written >> (8 * i));
    pieces += 1;
  }
  llama_memory_seq_rm(memory(), spare_, -1, -1);
  for (int i = 0; i < 8; ++i) out[count_at + static_cast<size_t>(i)] = static_cast<std::uint8_t>(pieces >> (8 * i));
  return out;
}

bool WindowStates::restore(std::span<const std::uint8_t> state, SeqId dst) const {
  llama_memory_seq_rm(memory(), dst, -1, -1);
  std::span<const std::uint8_t> in = state.subspan(kMagic.size());
  std::uint64_t pieces = 0;
  bool ok = get_u64(in, pieces) && pieces > 0;
  for (std::uint64_t i = 0; ok && i < pieces; ++i) {
    std::uint64_t size = 0;
    ok = get_u64(in, size) && size <= in.size() && size > 0;
    if (!ok) break;
    ok = llama_state_seq_set_data_ext(ctx_, in.data(), size, spare_, LLAMA_STATE_SEQ_FLAGS_NONE) != 0;
    if (ok) {
      llama_memory_seq_cp(memory(), spare_, dst, -1, -1);
      llama_memory_seq_cp(memory(), spare_, guard_, -1, -1);
    }
    llama_memory_seq_rm(memory(), spare_, -1, -1);
    in = in.subspan(size);
  }
  llama_memory_seq_rm(memory(), guard_, -1, -1);  // dst owns every cell the guard shared
  ok = ok && in.empty();
  if (!ok) llama_memory_seq_rm(memory(), dst, -1, -1);
  return ok;
}

}  // namespace prefixd::engine::detail
