#include "engine/call_rows.h"

#include <algorithm>
#include <cstring>
#include <format>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/llama_handles.h"

namespace prefixd::engine::detail {

namespace {

llama_token token_at(std::int32_t pos, std::int32_t n_vocab) {
  return static_cast<llama_token>((static_cast<std::int64_t>(pos) * 7919 + 17) % n_vocab);
}

class Calls {
 public:
  Calls(llama_context* ctx, std::int32_t n_vocab, std::int32_t n_batch)
      : ctx_(ctx), memory_(llama_get_memory(ctx)), n_vocab_(n_vocab), batch_(n_batch) {}

  // Rows [from, from + rows) of `seq`; `logits_at` (an index into them, or -1) is read.
  void add(llama_seq_id seq, llama_pos from, std::int32_t rows, std::int32_t logits_at = -1) {
    llama_batch& b = batch_.get();
    for (std::int32_t i = 0; i < rows; ++i) {
      const int32_t k = b.n_tokens++;
      b.token[k] = token_at(from + i, n_vocab_);
      b.pos[k] = from + i;
      b.n_seq_id[k] = 1;
      b.seq_id[k][0] = seq;
      b.logits[k] = i == logits_at ? 1 : 0;
      if (i == logits_at) read_ = k;
    }
  }

  // Decodes what was added; the logits of the row asked for, if any.
  std::vector<float> run() {
    llama_batch& b = batch_.get();
    const int32_t rc = llama_decode(ctx_, b);
    b.n_tokens = 0;
    const int32_t read = std::exchange(read_, -1);
    if (rc != 0) throw std::runtime_error(std::format("measuring how calls must be padded: a call failed ({})", rc));
    if (read < 0) return {};
    const float* row = llama_get_logits_ith(ctx_, read);
    if (row == nullptr) throw std::runtime_error("measuring how calls must be padded: no logits for the measured row");
    return {row, row + n_vocab_};
  }

  // Fills `seq` with `count` tokens from position 0.
  void history(llama_seq_id seq, std::int32_t count) {
    for (std::int32_t at = 0; at < count;) {
      const std::int32_t rows = std::min(count - at, batch_.capacity());
      add(seq, at, rows);
      run();
      at += rows;
    }
  }

  void cut(llama_seq_id seq, llama_pos from) { llama_memory_seq_rm(memory_, seq, from, -1); }

 private:
  llama_context* ctx_;
  llama_memory_t memory_;
  std::int32_t n_vocab_;
  OwnedBatch batch_;
  int32_t read_ = -1;
};

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Prompt lengths whose last row is compared, and where a prompt of the longer two is split.
constexpr std::int32_t kRows[] = {1, 5, 77, 150};
constexpr std::int32_t kSplits[] = {1, 13, 65};

class Measurement {
 public:
  Measurement(Calls& calls, std::int32_t largest, std::int32_t history, std::vector<std::int32_t> beside)
      : calls_(calls), largest_(largest), history_(history), beside_(std::move(beside)) {
    calls_.history(0, history_);
    for (std::size_t j = 0; j < beside_.size(); ++j) calls_.history(static_cast<llama_seq_id>(j + 1), beside_[j]);
    for (const std::int32_t rows : kRows) {
      if (rows <= largest_) reference_[rows] = last_row(history_, rows, largest_);
    }
  }
  Measurement(const Measurement&) = delete;
  Measurement& operator=(const Measurement&) = delete;
  ~Measurement() {
    for (std::size_t j = 0; j <= beside_.size(); ++j) calls_.cut(static_cast<llama_seq_id>(j), 0);
  }

  // Whether every comparison is alike with calls padded by `padding`.
  bool alike(const CallPadding& padding) {
    const auto pad = [&](std::int32_t rows) { return padding.rows_for(rows); };
    for (const auto& [rows, reference] : reference_) {
      if (pad(rows) > largest_) continue;
      if (!same(last_row(history_, rows, pad(rows)), reference)) return false;
      for (const std::int32_t split : kSplits) {
        if (rows < 77 || split >= rows || pad(rows - split) > largest_) continue;
        calls_.add(0, history_, pad(rows - split));
        calls_.run();
        calls_.cut(0, history_ + rows - split);
        const bool ok = same(last_row(history_ + rows - split, split, pad(split)), reference);
        calls_.cut(0, history_);
        if (!ok) return false;
      }
    }
    // One row beside one and beside every other sequence, each padded alike in the same call.
    std::vector<std::size_t> counts;
    if (!beside_.empty()) counts = {1, beside_.size()};
    for (const std::size_t others : counts) {
      const std::int32_t rows = pad(1);
      if (rows * static_cast<std::int32_t>(others + 1) > largest_) break;
      calls_.add(0, history_, rows, 0);
      for (std::size_t j = 0; j < others; ++j) calls_.add(static_cast<llama_seq_id>(j + 1), beside_[j], rows);
      const std::vector<float> got = calls_.run();
      for (std::size_t j = 0; j <= others; ++j) calls_.cut(static_cast<llama_seq_id>(j), j == 0 ? history_ : beside_[j - 1]);
      if (!same(got, reference_.at(1))) return false;
    }
    return true;
  }

 private:
  // The logits of the last of `rows` rows from `from`, in a call of `total` rows.
  std::vector<float> last_row(std::int32_t from, std::int32_t rows, std::int32_t total) {
    calls_.add(0, from, std::max(rows, total), rows - 1);
    std::vector<float> out = calls_.run();
    calls_.cut(0, from);
    return out;
  }

  Calls& calls_;
  std::int32_t largest_;
  std::int32_t history_;
  std::vector<std::int32_t> beside_;
  std::map<std::int32_t, std::vector<float>> reference_;
};

}  // namespace

CallRows measure_call_rows(llama_context* ctx, std::int32_t n_vocab, std::int32_t n_batch, std::int32_t stream_cells,
                           std::int32_t sequences) {
  CallRows out;
  out.largest = std::min(n_batch, stream_cells / 2);
  if (out.largest < 2 || n_vocab < 1) return out;
  // Rules by the rows a lone decode token then takes, fewest first, then by the multiple.
  std::vector<CallPadding> rules;
  for (const std::int32_t multiple : {1, 8, 16, 32, 64}) {
    for (std::int32_t least = 1; least <= out.largest; least *= 2) {
      const CallPadding rule{.least = least, .multiple = multiple};
      if (rule.rows_for(1) <= out.largest && least >= multiple) rules.push_back(rule);
    }
  }
  std::ranges::stable_sort(rules, [](const CallPadding& a, const CallPadding& b) {
    return std::pair(a.rows_for(1), a.multiple) < std::pair(b.rows_for(1), b.multiple);
  });
  // A short history, and one past 512 cells (where attention kernels begin to split a row's cells)
  // when the stream has room; the other sequences' histories end after, before and near it.
  const std::int32_t room = stream_cells - out.largest;
  std::vector<std::int32_t> histories = {std::min(40, room)};
  if (std::min(1100, room) > histories.front()) histories.push_back(std::min(1100, room));
  Calls calls(ctx, n_vocab, n_batch);
  // One history at a time holds the sequences: each moves the rule on past those it refutes, until
  // a whole round moves it no more.
  std::size_t chosen = 0;
  for (bool settled = false; !settled && chosen < rules.size();) {
    settled = true;
    for (std::size_t h = 0; h < histories.size() && chosen < rules.size(); ++h) {
      const std::int32_t history = histories[h];
      std::vector<std::int32_t> beside;
      for (const std::int32_t other : {history + 97, history / 2 + 1, history + 13}) {
        if (static_cast<std::int32_t>(beside.size()) + 1 < std::min(sequences, 4)) beside.push_back(std::min(other, room));
      }
      Measurement measurement(calls, out.largest, history, beside);
      const std::size_t before = chosen;
      while (chosen < rules.size() && !measurement.alike(rules[chosen])) ++chosen;
      if (h > 0 && chosen != before) settled = false;
    }
  }
  for (std::size_t i = 0; i < std::min(chosen, rules.size()); ++i) {
    out.rejected += std::format("{}{}/{}", i == 0 ? "" : " ", rules[i].least, rules[i].multiple);
  }
  if (chosen < rules.size()) out.padding = rules[chosen];
  return out;
}

}  // namespace prefixd::engine::detail
