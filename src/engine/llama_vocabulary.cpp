#include "engine/llama_vocabulary.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

namespace prefixd::engine::detail {
namespace {

// The whitespace a strip attribute swallows (libllama tests isspace in the C locale).
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// Tokenizers that spell every byte of their input with exactly one token and whose special-token
// handling is the partition below: byte-level BPE, SentencePiece BPE, RWKV. WordPiece and Unigram
// normalize the text first (case, accents, whitespace runs), so neither their token counts nor
// their partition follow from the text's bytes.
bool spells_every_byte(enum llama_vocab_type type) {
  return type == LLAMA_VOCAB_TYPE_SPM || type == LLAMA_VOCAB_TYPE_BPE || type == LLAMA_VOCAB_TYPE_RWKV;
}

bool overlaps(std::span<const TextRange> ranges, std::size_t begin, std::size_t end) {
  const auto it = std::ranges::upper_bound(ranges, begin, {}, &TextRange::end);
  return it != ranges.end() && it->begin < end;
}

}  // namespace

LlamaVocabulary::LlamaVocabulary(const llama_vocab* vocab, std::string rerank_template)
    : vocab_(vocab), rerank_template_(std::move(rerank_template)) {
  const enum llama_vocab_type type = llama_vocab_type(vocab_);
  std::size_t longest = 0;
  bool strips = false;
  for (Token t = 0; t < size(); ++t) {
    longest = std::max(longest, piece(t, /*render_special=*/true).size());
    const auto attr = static_cast<unsigned>(llama_vocab_get_attr(vocab_, t));
    if ((attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED | LLAMA_TOKEN_ATTR_UNKNOWN)) == 0) continue;
    const char* text = llama_vocab_get_text(vocab_, t);
    if (text == nullptr || *text == '\0') continue;
    Special special{.text = text,
                    .token = t,
                    .control = (attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN)) != 0,
                    .lstrip = (attr & LLAMA_TOKEN_ATTR_LSTRIP) != 0,
                    .rstrip = (attr & LLAMA_TOKEN_ATTR_RSTRIP) != 0};
    strips = strips || special.lstrip || special.rstrip;
    specials_.push_back(std::move(special));
  }
  std::ranges::stable_sort(specials_, std::ranges::greater{}, [](const Special& s) { return s.text.size(); });
  if (!spells_every_byte(type)) {
    spdlog::warn("tokenizer type {} normalizes text: prompt lengths are known only once tokenized, and special-token "
                 "strings in message content cannot be kept as text",
                 static_cast<int>(type));
    return;
  }
  for (const Special& s : specials_) {
    if (s.control) control_texts_.push_back(s.text);
  }
  // Whatever the type promises, check that detokenizing gives back at least the input's bytes
  // before trusting the byte bound.
  constexpr std::string_view probe = "Hello,  world!\n\n\tIt's 2024 - naive caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac  end ";
  std::size_t spelled = 0;
  for (const Token t : tokenize(probe, /*add_special=*/false, /*parse_special=*/false)) spelled += piece(t, true).size();
  if (longest > 0 && spelled >= probe.size()) {
    span_ = TokenSpan{.max_bytes = longest, .strips_whitespace = strips};
  } else {
    spdlog::warn("the tokenizer does not spell its input byte for byte: prompt lengths are known only once tokenized");
  }
}

std::vector<Token> LlamaVocabulary::rerank_tokens(std::string_view query, std::string_view document) const {
  if (!rerank_template_.empty()) {
    // Each placeholder filled once, left to right, so that a query holding "{document}" stays text.
    std::string prompt;
    std::string_view rest = rerank_template_;
    while (!rest.empty()) {
      const std::size_t q = rest.find("{query}");
      const std::size_t d = rest.find("{document}");
      const std::size_t at = std::min(q, d);
      if (at == std::string_view::npos) break;
      prompt += rest.substr(0, at);
      prompt += at == q ? query : document;
      rest.remove_prefix(at + (at == q ? std::string_view("{query}").size() : std::string_view("{document}").size()));
    }
    prompt += rest;
    return tokenize(prompt, false, true);
  }
  std::vector<Token> tokens;
  const auto append = [&tokens](const std::vector<Token>& more) { tokens.insert(tokens.end(), more.begin(), more.end()); };
  Token end = llama_vocab_eos(vocab_);
  if (end == LLAMA_TOKEN_NULL) end = llama_vocab_sep(vocab_);
  if (llama_vocab_get_add_bos(vocab_)) tokens.push_back(llama_vocab_bos(vocab_));
  append(tokenize(query, false, false));
  if (llama_vocab_get_add_eos(vocab_)) tokens.push_back(end);
  if (llama_vocab_get_add_sep(vocab_)) tokens.push_back(llama_vocab_sep(vocab_));
  append(tokenize(document, false, false));
  if (llama_vocab_get_add_eos(vocab_)) tokens.push_back(end);
  return tokens;
}

std::vector<Token> LlamaVocabulary::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<Token> tokens(text.size() + 8);
  int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                             static_cast<int32_t>(tokens.size()), add_special, parse_special);
  if (n < 0) {
    tokens.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), add_special, parse_special);
  }
  if (n < 0) throw std::runtime_error("tokenization failed");
  tokens.resize(static_cast<size_t>(n));
  return tokens;
}

std::vector<LlamaVocabulary::Fragment> LlamaVocabulary::partition(std::string_view text,
                                                                  std::span<const TextRange> literal) const {
  std::vector<Fragment> fragments{{.begin = 0, .end = text.size()}};
  for (const Special& special : specials_) {
    std::vector<Fragment> next;
    next.reserve(fragments.size());
    for (const Fragment& fragment : fragments) {
      if (fragment.special) {
        next.push_back(fragment);
        continue;
      }
      const std::string_view within = text.substr(0, fragment.end);
      std::size_t rest = fragment.begin;  // raw text not yet emitted starts here
      std::size_t from = fragment.begin;  // the next search starts here
      for (std::size_t match; (match = within.find(special.text, from)) != std::string_view::npos;) {
        const std::size_t match_end = match + special.text.size();
        if (special.control && overlaps(literal, match, match_end)) {
          from = match + 1;
          continue;
        }
        std::size_t left_end = match;
        if (special.lstrip) {
          while (left_end > rest && is_ascii_space(text[left_end - 1])) --left_end;
        }
        if (left_end > rest) next.push_back({.begin = rest, .end = left_end});
        next.push_back({.begin = match, .end = match_end, .special = special.token});
        rest = match_end;
        if (special.rstrip) {
          while (rest < fragment.end && is_ascii_space(text[rest])) ++rest;
        }
        from = rest;
      }
      if (rest < fragment.end) next.push_back({.begin = rest, .end = fragment.end});
    }
    fragments = std::move(next);
  }
  return fragments;
}

std::vector<Token> LlamaVocabulary::tokenize_with_literals(std::string_view text, bool add_special,
                                                           std::span<const TextRange> literal) const {
  if (literal.empty()) return tokenize(text, add_special, /*parse_special=*/true);
  if (control_texts_.empty()) throw std::logic_error("this tokenizer cannot keep special-token strings as text");
  // libllama tokenizes each raw fragment on its own, exactly as here: a SentencePiece space prefix
  // goes before every fragment that follows a special token or starts the text, which each call
  // below reproduces. RWKV adds no BOS or EOS.
  const bool framed = add_special && llama_vocab_type(vocab_) != LLAMA_VOCAB_TYPE_RWKV;
  std::vector<Token> out;
  if (framed && llama_vocab_get_add_bos(vocab_)) out.push_back(llama_vocab_bos(vocab_));
  for (const Fragment& fragment : partition(text, literal)) {
    if (fragment.special) {
      out.push_back(*fragment.special);
      continue;
    }
    const auto raw = tokenize(text.substr(fragment.begin, fragment.end - fragment.begin), false, /*parse_special=*/false);
    out.insert(out.end(), raw.begin(), raw.end());
  }
  if (framed && llama_vocab_get_add_eos(vocab_)) out.push_back(llama_vocab_eos(vocab_));
  return out;
}

std::optional<InfillTokens> LlamaVocabulary::infill_tokens() const {
  auto present = [](llama_token t) { return t == LLAMA_TOKEN_NULL ? std::nullopt : std::optional<Token>(t); };
  const auto prefix = present(llama_vocab_fim_pre(vocab_));
  const auto suffix = present(llama_vocab_fim_suf(vocab_));
  const auto middle = present(llama_vocab_fim_mid(vocab_));
  if (!prefix || !suffix || !middle) return std::nullopt;
  return InfillTokens{.prefix = *prefix,
                      .suffix = *suffix,
                      .middle = *middle,
                      .repository = present(llama_vocab_fim_rep(vocab_)),
                      .file_separator = present(llama_vocab_fim_sep(vocab_)),
                      .begin = llama_vocab_get_add_bos(vocab_) ? present(llama_vocab_bos(vocab_)) : std::nullopt};
}

std::string LlamaVocabulary::piece(Token token, bool render_special) const {
  char small[64];
  int32_t n = llama_token_to_piece(vocab_, token, small, sizeof small, 0, render_special);
  if (n >= 0) return std::string(small, static_cast<size_t>(n));
  std::string large(static_cast<size_t>(-n), '\0');
  n = llama_token_to_piece(vocab_, token, large.data(), static_cast<int32_t>(large.size()), 0, render_special);
  large.resize(static_cast<size_t>(std::max(n, 0)));
  return large;
}

}  // namespace prefixd::engine::detail
