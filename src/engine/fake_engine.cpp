#include "engine/fake_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

namespace prefixd::engine {
namespace {

constexpr std::uint32_t kStateMagic = 0x4b414646;  // "FFAK"

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class ByteVocabulary final : public Vocabulary {
 public:
  explicit ByteVocabulary(std::int32_t n_vocab) : n_vocab_(n_vocab) {}
  std::vector<Token> tokenize(std::string_view text, bool, bool) const override {
    std::vector<Token> out;
    out.reserve(text.size());
    for (unsigned char c : text) out.push_back(static_cast<Token>(c));
    return out;
  }
  std::string piece(Token token, bool) const override {
    // Printable ASCII only, so generated text is always valid UTF-8 and easy to compare.
    if (token >= 0 && token < 256) return std::string(1, static_cast<char>(32 + token % 95));
    return {};
  }
  bool is_end_of_generation(Token token) const override { return token == 256; }
  std::int32_t size() const override { return n_vocab_; }

 private:
  std::int32_t n_vocab_;
};

class FakeSampler final : public Sampler {
 public:
  FakeSampler(const FakeEngine& engine, SamplingParams params)
      : engine_(engine), params_(params), rng_(params.seed) {}
  Token sample(std::int32_t row) override {
    const std::span<const float> logits = engine_.logits(row);
    if (logits.empty()) return 0;
    if (params_.temperature <= 0.0f) {
      return static_cast<Token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    std::vector<double> weights(logits.begin(), logits.end());
    for (double& w : weights) w = std::exp(w / params_.temperature);
    std::discrete_distribution<Token> pick(weights.begin(), weights.end());
    return pick(rng_);
  }

 private:
  const FakeEngine& engine_;
  SamplingParams params_;
  std::mt19937 rng_;
};

}  // namespace

FakeEngine::FakeEngine(FakeEngineOptions options)
    : options_(options), vocab_(std::make_unique<ByteVocabulary>(options.n_vocab)),
      cells_(static_cast<size_t>(options.n_ctx)) {
  info_.id = "fake";
  info_.architecture = "fake";
  info_.description = "fake engine";
  info_.family = options.trimmable ? ModelFamily::dense : ModelFamily::recurrent;
  info_.n_ctx_train = options.n_ctx;
  info_.n_vocab = options.n_vocab;
  info_.n_layer = 1;
  info_.kv_bytes_per_token = 2 * sizeof(std::int32_t);
  info_.fingerprint = "fake";
  info_.chat_template = "";
}

std::vector<float> FakeEngine::logits_for_history(std::span<const Token> history) const {
  std::uint64_t h = 0x1234567;
  for (Token t : history) h = mix64(h ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(t)));
  std::vector<float> out(static_cast<size_t>(options_.n_vocab));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(mix64(h + i) >> 40) / static_cast<float>(1 << 24) * 8.0f;
  }
  return out;
}

std::vector<Token> FakeEngine::sequence_tokens(SeqId seq) const {
  std::map<Pos, Token> ordered;
  for (const Cell& cell : cells_) {
    if (cell.seqs.contains(seq)) ordered[cell.pos] = cell.token;
  }
  std::vector<Token> out;
  out.reserve(ordered.size());
  for (const auto& [pos, token] : ordered) out.push_back(token);
  return out;
}

DecodeStatus FakeEngine::decode(std::span<const BatchToken> batch) {
  if (static_cast<std::int32_t>(batch.size()) > options_.n_batch) return DecodeStatus::error;
  std::vector<size_t> taken;
  for (const BatchToken& entry : batch) {
    if (!valid_seq(entry.seq) || entry.pos < 0) return DecodeStatus::error;
    auto free_cell = std::find_if(cells_.begin(), cells_.end(), [](const Cell& c) { return c.seqs.empty(); });
    if (free_cell == cells_.end()) {
      for (size_t index : taken) cells_[index] = Cell{};  // no partial result survives a failure
      return DecodeStatus::no_kv_space;
    }
    *free_cell = Cell{entry.pos, entry.token, {entry.seq}};
    taken.push_back(static_cast<size_t>(free_cell - cells_.begin()));
  }
  logits_.assign(batch.size(), {});
  for (size_t row = 0; row < batch.size(); ++row) {
    if (!batch[row].logits) continue;
    std::vector<Token> history;
    std::map<Pos, Token> ordered;
    for (const Cell& cell : cells_) {
      if (cell.seqs.contains(batch[row].seq) && cell.pos <= batch[row].pos) ordered[cell.pos] = cell.token;
    }
    for (const auto& [pos, token] : ordered) history.push_back(token);
    logits_[row] = logits_for_history(history);
  }
  tokens_decoded_ += static_cast<std::int64_t>(batch.size());
  batches_.emplace_back(batch.begin(), batch.end());
  return DecodeStatus::ok;
}

std::span<const float> FakeEngine::logits(std::int32_t row) const {
  if (row < 0 || static_cast<size_t>(row) >= logits_.size()) return {};
  return logits_[static_cast<size_t>(row)];
}

std::unique_ptr<Sampler> FakeEngine::make_sampler(const SamplingParams& params) {
  return std::make_unique<FakeSampler>(*this, params);
}

void FakeEngine::copy_sequence(SeqId src, SeqId dst, Pos p0, Pos p1) {
  if (!valid_seq(src) || !valid_seq(dst) || src == dst) return;
  for (Cell& cell : cells_) {
    if (cell.seqs.contains(src) && cell.pos >= std::max(p0, 0) && (p1 < 0 || cell.pos < p1)) cell.seqs.insert(dst);
  }
}

bool FakeEngine::remove_sequence(SeqId seq, Pos p0, Pos p1) {
  const bool whole = p0 <= 0 && p1 < 0;
  if (!options_.trimmable && !whole) return false;
  for (Cell& cell : cells_) {
    if ((seq < 0 || cell.seqs.contains(seq)) && cell.pos >= std::max(p0, 0) && (p1 < 0 || cell.pos < p1)) {
      if (seq < 0) cell.seqs.clear(); else cell.seqs.erase(seq);
    }
  }
  return true;
}

PosRange FakeEngine::sequence_positions(SeqId seq) const {
  PosRange range;
  for (const Cell& cell : cells_) {
    if (!cell.seqs.contains(seq)) continue;
    range.min = range.min < 0 ? cell.pos : std::min(range.min, cell.pos);
    range.max = std::max(range.max, cell.pos);
  }
  return range;
}

void FakeEngine::clear() {
  for (Cell& cell : cells_) cell = Cell{};
}

std::int32_t FakeEngine::used_cells() const {
  return static_cast<std::int32_t>(std::count_if(cells_.begin(), cells_.end(), [](const Cell& c) { return !c.seqs.empty(); }));
}

std::int32_t FakeEngine::count_cells(const std::function<bool(const std::set<SeqId>&)>& owners) const {
  return static_cast<std::int32_t>(
      std::count_if(cells_.begin(), cells_.end(), [&](const Cell& c) { return !c.seqs.empty() && owners(c.seqs); }));
}

Bytes FakeEngine::save_sequence(SeqId seq) const {
  std::vector<std::int32_t> words{static_cast<std::int32_t>(kStateMagic), 0};
  for (const Cell& cell : cells_) {
    if (!cell.seqs.contains(seq)) continue;
    words.push_back(cell.pos);
    words.push_back(cell.token);
    ++words[1];
  }
  Bytes out(words.size() * sizeof(std::int32_t));
  std::memcpy(out.data(), words.data(), out.size());
  return out;
}

bool FakeEngine::restore_sequence(std::span<const std::uint8_t> state, SeqId dst) {
  if (!valid_seq(dst) || state.size() < 8 || state.size() % 4 != 0) return false;
  std::vector<std::int32_t> words(state.size() / 4);
  std::memcpy(words.data(), state.data(), state.size());
  if (static_cast<std::uint32_t>(words[0]) != kStateMagic) return false;
  const std::int32_t count = words[1];
  if (count < 0 || static_cast<size_t>(count) * 2 + 2 != words.size()) return false;
  remove_sequence(dst, 0, -1);
  const auto free_cells = std::count_if(cells_.begin(), cells_.end(), [](const Cell& c) { return c.seqs.empty(); });
  if (free_cells < count) return false;
  auto next_free = cells_.begin();
  for (std::int32_t i = 0; i < count; ++i) {
    next_free = std::find_if(next_free, cells_.end(), [](const Cell& c) { return c.seqs.empty(); });
    *next_free = Cell{words[2 + 2 * static_cast<size_t>(i)], words[3 + 2 * static_cast<size_t>(i)], {dst}};
  }
  return true;
}

}  // namespace prefixd::engine
