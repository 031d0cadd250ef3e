#include "support/fake_engine.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace prefixd::engine {
namespace {

class ByteVocabulary final : public Vocabulary {
 public:
  ByteVocabulary(std::int32_t n_vocab, bool newline) : n_vocab_(n_vocab), newline_(newline) {}
  std::vector<Token> tokenize(std::string_view text, bool, bool) const override {
    std::vector<Token> out;
    out.reserve(text.size());
    for (unsigned char c : text) out.push_back(static_cast<Token>(c));
    return out;
  }
  // One token per byte, no special tokens: literal ranges change nothing.
  std::vector<Token> tokenize_with_literals(std::string_view text, bool add_special,
                                            std::span<const TextRange>) const override {
    return tokenize(text, add_special, true);
  }
  const std::vector<std::string>& control_texts() const override { return no_control_texts_; }
  std::optional<TokenSpan> token_span() const override { return TokenSpan{.max_bytes = 1}; }
  std::string piece(Token token, bool) const override {
    // Printable ASCII only, so generated text is always valid UTF-8 and easy to compare; '\n' too
    // when the options ask for it.
    if (newline_ && token == '\n') return "\n";
    if (token >= 0 && token < 256) return std::string(1, static_cast<char>(32 + token % 95));
    return {};
  }
  bool is_end_of_generation(Token token) const override { return token == 256; }
  std::int32_t size() const override { return n_vocab_; }

 private:
  std::int32_t n_vocab_;
  bool newline_;
  std::vector<std::string> no_control_texts_;
};

class FakeSampler final : public Sampler {
 public:
  FakeSampler(const FakeEngine& engine, SamplingParams params)
      : engine_(engine), params_(params), rng_(params.seed) {}
  Token sample(std::int32_t row) override { return draw(engine_.logits(row)); }

  std::optional<Token> sample_quick(std::int32_t row) override {
    if (params_.grammar && engine_.options().defer_grammar_draws) return std::nullopt;
    return sample(row);
  }

  Token sample_masked(std::span<const float> logits) override {
    if (engine_.options().before_masked_sample) engine_.options().before_masked_sample();
    return draw(logits);
  }

 private:
  Token draw(std::span<const float> raw) {
    if (raw.empty()) return 0;
    std::vector<float> logits(raw.begin(), raw.end());
    if (params_.ignore_eos) {
      for (std::size_t id = 0; id < logits.size(); ++id) {
        if (engine_.vocab().is_end_of_generation(static_cast<Token>(id))) logits[id] = -INFINITY;
      }
    }
    if (params_.temperature <= 0.0f) {
      return static_cast<Token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    std::vector<double> weights(logits.begin(), logits.end());
    for (double& w : weights) w = std::exp(w / params_.temperature);
    std::discrete_distribution<Token> pick(weights.begin(), weights.end());
    return pick(rng_);
  }

  const FakeEngine& engine_;
  SamplingParams params_;
  std::mt19937 rng_;
};

FakeEngineOptions checked(FakeEngineOptions options) {
  if (options.family == ModelFamily::sliding_window && options.sliding_window <= 0) {
    throw std::invalid_argument("FakeEngine: the sliding_window family needs sliding_window > 0");
  }
  return options;
}

ModelInfo describe(const FakeEngineOptions& options) {
  ModelInfo info;
  info.id = "fake";
  info.architecture = "fake";
  info.description = std::string("fake engine (") + family_name(options.family) + ")";
  info.family = options.family;
  info.n_ctx_train = options.n_ctx;
  info.n_vocab = options.n_vocab;
  // One layer of each kind the family has: dense and recurrent one, sliding window a global and a
  // window layer, hybrid an attention and a recurrent layer. Each attention layer stores K and V.
  const bool windowed = options.family == ModelFamily::sliding_window;
  info.n_layer = options.family == ModelFamily::dense || options.family == ModelFamily::recurrent ? 1 : 2;
  info.sliding_window = windowed ? options.sliding_window : 0;
  info.n_swa_layers = windowed ? 1 : 0;
  info.swa_full = windowed && options.swa_full;
  const std::size_t attention_layers = options.family == ModelFamily::recurrent ? 0 : windowed ? 2 : 1;
  info.kv_bytes_per_token = attention_layers * 2 * sizeof(std::int32_t);
  info.fingerprint = std::string("fake-") + family_name(options.family);
  // Fixed: the fake's memory holds token ids, whose meaning no setting changes.
  info.runtime_signature = "fake;kv=int32";
  info.chat_template = "";
  return info;
}

}  // namespace

FakeEngine::FakeEngine(FakeEngineOptions options)
    : options_(checked(options)), info_(describe(options_)), vocab_(std::make_unique<ByteVocabulary>(options.n_vocab, options.newline_token)),
      memory_(options.family, options.n_ctx, options.n_seq, options.sliding_window, options.swa_full) {}

std::vector<float> FakeEngine::logits_for_digest(std::uint64_t digest) const {
  std::vector<float> out(static_cast<size_t>(options_.n_vocab));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(fake_mix64(digest + i) >> 40) / static_cast<float>(1 << 24) * 8.0f;
  }
  return out;
}

std::vector<float> FakeEngine::logits_for_history(std::span<const Token> history) const {
  return logits_for_digest(memory_.cold_digest(history));
}

std::vector<Token> FakeEngine::sequence_tokens(SeqId seq) const {
  std::vector<Token> out;
  for (const auto& [pos, token] : memory_.attention().held(seq)) out.push_back(token);
  return out;
}

DecodeStatus FakeEngine::decode(std::span<const BatchToken> batch) {
  if (options_.before_decode) options_.before_decode();
  if (static_cast<std::int32_t>(batch.size()) > options_.n_batch) return DecodeStatus::error;
  for (const BatchToken& entry : batch) {
    if (!valid_seq(entry.seq) || entry.pos < 0) return DecodeStatus::error;
  }
  std::vector<std::optional<std::uint64_t>> digests;
  const DecodeStatus status = memory_.decode(batch, digests);
  if (status != DecodeStatus::ok) return status;
  logits_.assign(batch.size(), {});
  for (size_t row = 0; row < batch.size(); ++row) {
    if (digests[row]) logits_[row] = logits_for_digest(*digests[row]);
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
  if (params.grammar) {
    if (auto why = check_grammar(*params.grammar)) throw std::invalid_argument(*why);
    std::lock_guard lock(grammars_mutex_);
    grammars_requested_.push_back(*params.grammar);
  }
  return std::make_unique<FakeSampler>(*this, params);
}

std::optional<std::string> FakeEngine::check_grammar(const Grammar& grammar) const {
  if (grammar.text.find_first_not_of(" \t\r\n") == std::string::npos) return "invalid grammar: the grammar is empty";
  // A rule definition starts a line: "<root> ::=" with any blanks around the name.
  size_t line = 0;
  while (line < grammar.text.size()) {
    const size_t end = std::min(grammar.text.find('\n', line), grammar.text.size());
    const std::string_view text = std::string_view(grammar.text).substr(line, end - line);
    const size_t name = text.find_first_not_of(" \t");
    if (name != std::string_view::npos && text.substr(name).starts_with(grammar.root)) {
      const std::string_view rest = text.substr(name + grammar.root.size());
      const size_t op = rest.find_first_not_of(" \t");
      if (op != std::string_view::npos && rest.substr(op).starts_with("::=")) return std::nullopt;
    }
    line = end + 1;
  }
  return "invalid grammar: no rule defines the root '" + grammar.root + "'";
}

void FakeEngine::copy_sequence(SeqId src, SeqId dst, Pos p0, Pos p1) { memory_.copy(src, dst, p0, p1); }

bool FakeEngine::remove_sequence(SeqId seq, Pos p0, Pos p1) { return memory_.remove(seq, p0, p1); }

PosRange FakeEngine::sequence_positions(SeqId seq) const { return memory_.positions(seq); }

void FakeEngine::clear() { memory_.clear(); }

Bytes FakeEngine::save_sequence(SeqId seq) const { return memory_.save(seq); }

bool FakeEngine::restore_sequence(std::span<const std::uint8_t> state, SeqId dst) {
  return memory_.restore(state, dst);
}

Bytes FakeEngine::save_checkpoint(SeqId seq) const { return memory_.save_checkpoint(seq); }

bool FakeEngine::restore_checkpoint(std::span<const std::uint8_t> state, SeqId dst) {
  return memory_.restore_checkpoint(state, dst);
}

}  // namespace prefixd::engine
