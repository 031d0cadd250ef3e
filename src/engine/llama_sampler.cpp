#include "engine/llama_sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

#include "engine/llama_handles.h"

namespace prefixd::engine::detail {
namespace {

// The grammar sampler, or null when libllama refuses the grammar (its messages go to `capture`).
SamplerPtr init_grammar(const llama_vocab* vocab, const Grammar& grammar) {
  // An empty text gives libllama's "empty grammar", which constrains nothing: refuse it instead,
  // a request that asked for a constraint must get one.
  if (grammar.text.find_first_not_of(" \t\r\n") == std::string::npos) return nullptr;
  return SamplerPtr(llama_sampler_init_grammar(vocab, grammar.text.c_str(), grammar.root.c_str()));
}

SamplerPtr init_chain(const llama_vocab* vocab, const SamplingParams& params) {
  llama_sampler_chain_params chain_params = llama_sampler_chain_default_params();
  chain_params.no_perf = true;
  SamplerPtr chain(llama_sampler_chain_init(chain_params));
  if (params.ignore_eos) {
    std::vector<llama_logit_bias> masked;
    const std::int32_t n_vocab = llama_vocab_n_tokens(vocab);
    for (Token id = 0; id < n_vocab; ++id) {
      if (llama_vocab_is_eog(vocab, id)) masked.push_back({id, -INFINITY});
    }
    llama_sampler_chain_add(chain.get(), llama_sampler_init_logit_bias(n_vocab, static_cast<std::int32_t>(masked.size()), masked.data()));
  }
  if (params.temperature <= 0.0f) {
    llama_sampler_chain_add(chain.get(), llama_sampler_init_greedy());
  } else {
    if (params.top_k > 0) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_k(params.top_k));
    if (params.top_p < 1.0f) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_p(params.top_p, 1));
    if (params.min_p > 0.0f) llama_sampler_chain_add(chain.get(), llama_sampler_init_min_p(params.min_p, 1));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_temp(params.temperature));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_dist(params.seed));
  }
  return chain;
}

// The tokens a greedy draw skips: with ignore_eos every end-of-generation token (the chain masks
// them with a logit bias of -inf), else none. Sorted.
std::vector<Token> greedy_skips(const llama_vocab* vocab, const SamplingParams& params) {
  std::vector<Token> skips;
  if (!params.ignore_eos) return skips;
  for (Token id = 0; id < llama_vocab_n_tokens(vocab); ++id) {
    if (llama_vocab_is_eog(vocab, id)) skips.push_back(id);
  }
  return skips;
}

class LlamaSampler final : public Sampler {
 public:
  // `greedy`: the chain is greedy (with the logit bias of `skips` before it), so an unconstrained
  // draw is the first largest logit of the ids not in `skips`, which the draw computes itself.
  LlamaSampler(llama_context* ctx, const llama_vocab* vocab, const RowLogits& logits, SamplerPtr chain,
               SamplerPtr grammar, bool greedy, std::vector<Token> skips)
      : ctx_(ctx),
        vocab_(vocab),
        logits_(logits),
        chain_(std::move(chain)),
        grammar_(std::move(grammar)),
        greedy_(greedy),
        greedy_skips_(std::move(skips)) {
    if (!grammar_) return;
    // libllama's grammar reads a control token as its text ("<|im_start|>"), which the reply does
    // not show: under a grammar only end-of-generation control tokens may be drawn.
    for (Token id = 0; id < llama_vocab_n_tokens(vocab_); ++id) {
      if (llama_vocab_is_control(vocab_, id) && !llama_vocab_is_eog(vocab_, id)) hidden_.push_back(id);
    }
  }

  Token sample(std::int32_t row) override {
    if (std::optional<Token> quick = sample_quick(row)) return *quick;
    return sample_masked(std::span<const float>(logits_.row(row), static_cast<size_t>(llama_vocab_n_tokens(vocab_))));
  }

  // Masking the whole vocabulary costs a grammar walk per token, so first draw as if
  // unconstrained and keep the token when the grammar allows it; only otherwise draw again from
  // the masked distribution (the token then always satisfies the grammar).
  std::optional<Token> sample_quick(std::int32_t row) override {
    if (!grammar_ && greedy_) return accept_greedy(row);
    if (!grammar_) return draw_from_chain(row);
    load_candidates(logits_.row(row));
    const Token token = draw();
    if (!grammar_allows(token)) return std::nullopt;
    return accept(token);
  }

  Token sample_masked(std::span<const float> logits) override {
    if (!grammar_) throw std::logic_error("sample_masked: the sampler has no grammar");
    load_candidates(logits.data());
    for (Token id : hidden_) storage_[static_cast<size_t>(id)].logit = -INFINITY;
    llama_sampler_apply(grammar_.get(), &candidates_);
    if (!any_allowed()) return give_up();
    return accept(draw());
  }

  bool grammar_stuck() const override { return stuck_; }

 private:
  void load_candidates(const float* logits) {
    const std::int32_t n_vocab = llama_vocab_n_tokens(vocab_);
    storage_.resize(static_cast<size_t>(n_vocab));
    for (std::int32_t id = 0; id < n_vocab; ++id) storage_[static_cast<size_t>(id)] = {id, logits[id], 0.0f};
    candidates_ = {storage_.data(), storage_.size(), -1, false};
  }

  // libllama's llama_sampler_sample fills a candidate for every id of the vocabulary (151,936 on
  // the default model) before its greedy sampler takes the first one with the largest logit; the
  // bias masks the skipped ids with -inf, which never wins while another id is finite. Measured on
  // the default model, that draw took 0.45 ms, 2% of a decode step and 5% of a step of four rows.
  // Finding the largest value first and then its first id among those not skipped picks the same
  // token in a fraction of that.
  Token accept_greedy(std::int32_t row) {
    const float* logits = logits_.row(row);
    const Token best = first_largest(std::span<const float>(logits, static_cast<size_t>(llama_vocab_n_tokens(vocab_))));
    if (best < 0) return draw_from_chain(row);  // every id skipped, or a NaN first
    llama_sampler_accept(chain_.get(), best);
    return best;
  }

  // The first id of the largest logit among the ids not skipped, as libllama's greedy sampler
  // finds it after the bias; -1 where this does not decide it alike: every id skipped, the largest
  // logit only at skipped ids, or a NaN where libllama's scan would start from it.
  Token first_largest(std::span<const float> logits) const {
    // Eight running maxima, so that the comparisons do not wait for each other; a NaN never wins.
    std::array<float, 8> lanes;
    lanes.fill(-INFINITY);
    size_t i = 0;
    for (; i + lanes.size() <= logits.size(); i += lanes.size()) {
      for (size_t lane = 0; lane < lanes.size(); ++lane) {
        lanes[lane] = logits[i + lane] > lanes[lane] ? logits[i + lane] : lanes[lane];
      }
    }
    for (; i < logits.size(); ++i) lanes[0] = logits[i] > lanes[0] ? logits[i] : lanes[0];
    float largest = -INFINITY;
    for (const float lane : lanes) largest = lane > largest ? lane : largest;
    const auto skipped = [this](Token id) { return std::ranges::binary_search(greedy_skips_, id); };
    Token first = 0;
    while (first < static_cast<Token>(logits.size()) && skipped(first)) ++first;
    if (first == static_cast<Token>(logits.size()) || std::isnan(logits[static_cast<size_t>(first)])) return -1;
    for (Token id = first; id < static_cast<Token>(logits.size()); ++id) {
      if (logits[static_cast<size_t>(id)] == largest && !skipped(id)) return id;
    }
    return -1;
  }

  Token accept(Token token) {
    try {
      llama_sampler_accept(grammar_.get(), token);
    } catch (const std::exception&) {
      return give_up();  // the grammar's state no longer matches the output: stop rather than go on
    }
    llama_sampler_accept(chain_.get(), token);
    return token;
  }

  // The chain's draw from every id of the row, as libllama's llama_sampler_sample makes it (which
  // reads the context's logits, so only while they are the row's).
  Token draw_from_chain(std::int32_t row) {
    if (!logits_.copied()) return llama_sampler_sample(chain_.get(), ctx_, row);
    load_candidates(logits_.row(row));
    const Token token = draw();
    llama_sampler_accept(chain_.get(), token);
    return token;
  }

  Token draw() {
    llama_sampler_apply(chain_.get(), &candidates_);
    return candidates_.data[candidates_.selected].id;
  }

  bool grammar_allows(Token token) {
    if (std::binary_search(hidden_.begin(), hidden_.end(), token)) return false;
    llama_token_data one{token, 0.0f, 0.0f};
    llama_token_data_array single{&one, 1, -1, false};
    llama_sampler_apply(grammar_.get(), &single);
    return std::isfinite(one.logit);
  }

  bool any_allowed() const {
    for (size_t i = 0; i < candidates_.size; ++i) {
      if (std::isfinite(candidates_.data[i].logit)) return true;
    }
    return false;
  }

  Token give_up() {
    stuck_ = true;
    const Token eot = llama_vocab_eot(vocab_);
    return eot != LLAMA_TOKEN_NULL ? eot : llama_vocab_eos(vocab_);
  }

  llama_context* ctx_;       // not owned; the engine outlives its samplers
  const llama_vocab* vocab_;  // not owned
  const RowLogits& logits_;   // the engine's
  SamplerPtr chain_;
  SamplerPtr grammar_;  // null: unconstrained
  bool greedy_ = false;
  std::vector<Token> greedy_skips_;  // sorted
  std::vector<llama_token_data> storage_;
  llama_token_data_array candidates_{};
  std::vector<Token> hidden_;  // sorted: control tokens that do not end generation
  bool stuck_ = false;
};

}  // namespace

std::optional<std::string> check_llama_grammar(const llama_vocab* vocab, const Grammar& grammar) {
  LlamaErrorCapture capture;
  if (init_grammar(vocab, grammar)) return std::nullopt;
  std::string why = capture.text();
  if (grammar.text.find_first_not_of(" \t\r\n") == std::string::npos) why = "the grammar is empty";
  if (why.empty()) why = "libllama could not parse the grammar";
  return "invalid grammar: " + why;
}

std::unique_ptr<Sampler> make_llama_sampler(llama_context* ctx, const llama_vocab* vocab, const RowLogits& logits,
                                            const SamplingParams& params) {
  SamplerPtr grammar;
  if (params.grammar) {
    LlamaErrorCapture capture;  // keeps the parser's messages out of the log; check_grammar reports them
    grammar = init_grammar(vocab, *params.grammar);
    if (!grammar) throw std::invalid_argument("invalid grammar: " + capture.text());
  }
  return std::make_unique<LlamaSampler>(ctx, vocab, logits, init_chain(vocab, params), std::move(grammar),
                                        params.temperature <= 0.0f, greedy_skips(vocab, params));
}

}  // namespace prefixd::engine::detail
