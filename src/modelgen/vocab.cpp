// Byte-level BPE: training merges on the embedded corpus and laying out the full vocabulary.
#include "modelgen/vocab.h"

#include <algorithm>
#include <format>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "modelgen/rng.h"

namespace prefixd::modelgen {

namespace {

// Merges learned for every preset. The corpus supports a few thousand before every word is a
// single token; capping the count keeps regular token ids identical across presets.
constexpr std::size_t kMaxMerges = 3000;

// Fixed stream for filler words: the vocabulary must not depend on the weight seed.
constexpr std::uint64_t kFillerSeed = 0xF111E7F111E7ull;

std::string utf8(std::uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

bool is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_newline(unsigned char c) { return c == '\n' || c == '\r'; }
bool is_punct(unsigned char c) { return !is_letter(c) && !is_digit(c) && !is_space(c); }

// Length of an English contraction suffix ('s 't 're 've 'm 'll 'd) starting at text[i], or 0.
std::size_t contraction_length(std::string_view text, std::size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) {
    return 0;
  }
  const auto lower = [&](std::size_t k) {
    return k < text.size() ? static_cast<char>(text[k] | 0x20) : '\0';
  };
  const char a = lower(i + 1);
  const char b = lower(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
    return 3;
  }
  return (a == 's' || a == 't' || a == 'm' || a == 'd') ? 2 : 0;
}

// One word of the training set: its current symbols (token ids) and how often it occurs.
struct Word {
  std::vector<std::int32_t> symbols;
  std::int64_t count;
};

constexpr std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// Pair frequencies, kept up to date incrementally: merging touches only the words that hold the
// merged pair, so training is linear in the corpus per merge rather than in the pair table.
class PairCounts {
 public:
  void add_word(const Word& w, std::int64_t sign) {
    for (std::size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      const auto it = counts_.try_emplace(pair_key(w.symbols[i], w.symbols[i + 1]), 0).first;
      it->second += sign * w.count;
      if (it->second == 0) {
        counts_.erase(it);  // keeps best() scanning only live pairs
      }
    }
  }
  // The most frequent pair; ties go to the smallest (left, right) ids so training is
  // deterministic regardless of hash-table order. Returns false when no pair is left.
  bool best(std::uint64_t& key) const {
    std::int64_t best_count = 0;
    for (const auto& [k, c] : counts_) {
      if (c > best_count || (c == best_count && c > 0 && k < key)) {
        best_count = c;
        key = k;
      }
    }
    return best_count > 0;
  }

 private:
  std::unordered_map<std::uint64_t, std::int64_t> counts_;
};

struct Trained {
  std::vector<std::string> tokens;  // byte symbols then merge results, all distinct
  std::vector<std::string> merges;
};

Trained train_bpe(std::string_view corpus, std::size_t max_merges) {
  Trained out;
  std::unordered_map<std::string, std::int32_t> ids;
  for (int b = 0; b < 256; ++b) {
    out.tokens.push_back(byte_symbol(static_cast<unsigned char>(b)));
    ids.emplace(out.tokens.back(), b);
  }

  std::map<std::string, std::int64_t> word_counts;  // ordered: deterministic word order
  for (auto& piece : pre_tokenize(corpus)) {
    ++word_counts[std::move(piece)];
  }
  std::vector<Word> words;
  for (const auto& [text, count] : word_counts) {
    Word w{{}, count};
    for (const char c : text) {
      w.symbols.push_back(static_cast<unsigned char>(c));
    }
    words.push_back(std::move(w));
  }

  PairCounts pairs;
  for (const auto& w : words) {
    pairs.add_word(w, +1);
  }

  while (out.merges.size() < max_merges) {
    std::uint64_t key = ~0ull;
    if (!pairs.best(key)) {
      break;  // every word is a single token
    }
    const auto left = static_cast<std::int32_t>(key >> 32);
    const auto right = static_cast<std::int32_t>(key & 0xFFFFFFFFu);
    const std::string merged = out.tokens[left] + out.tokens[right];
    // Two different merges can spell the same string ("a"+"bc", "ab"+"c"); reuse the token so
    // every token text stays unique, as llama.cpp requires.
    const auto [it, inserted] = ids.emplace(merged, static_cast<std::int32_t>(out.tokens.size()));
    if (inserted) {
      out.tokens.push_back(merged);
    }
    const std::int32_t merged_id = it->second;
    out.merges.push_back(out.tokens[left] + " " + out.tokens[right]);

    for (auto& w : words) {
      auto& s = w.symbols;
      bool holds = false;
      for (std::size_t i = 0; i + 1 < s.size() && !holds; ++i) {
        holds = s[i] == left && s[i + 1] == right;
      }
      if (!holds) {
        continue;
      }
      pairs.add_word(w, -1);
      std::vector<std::int32_t> next;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          next.push_back(merged_id);
          ++i;
        } else {
          next.push_back(s[i]);
        }
      }
      s = std::move(next);
      pairs.add_word(w, +1);
    }
  }
  return out;
}

}  // namespace

std::string byte_symbol(unsigned char b) {
  // Printable Latin-1 bytes stand for themselves; the rest (controls, space, DEL, NBSP, soft
  // hyphen) are shifted to U+0100 onwards in byte order, so every byte has a visible symbol.
  const auto self = [](unsigned c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174; };
  if (self(b)) {
    return utf8(b);
  }
  std::uint32_t shifted = 0;
  for (unsigned c = 0; c < b; ++c) {
    shifted += self(c) ? 0 : 1;
  }
  return utf8(256 + shifted);
}

std::vector<std::string> pre_tokenize(std::string_view text) {
  std::vector<std::string> out;
  const auto at = [&](std::size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : '\0'; };
  const auto run = [&](std::size_t k, auto pred) {
    while (k < text.size() && pred(at(k))) {
      ++k;
    }
    return k;
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = at(i);
    std::size_t end = i + 1;
    if (const std::size_t n = contraction_length(text, i); n > 0) {
      end = i + n;
    } else if (is_letter(c)) {
      end = run(i, is_letter);
    } else if (!is_newline(c) && !is_digit(c) && is_letter(at(i + 1))) {
      end = run(i + 1, is_letter);  // a word with its leading space or punctuation mark
    } else if (is_digit(c)) {
      end = i + 1;  // digits are split one by one
    } else if (is_punct(c) || (c == ' ' && is_punct(at(i + 1)) && at(i + 1) != '\0')) {
      end = run(c == ' ' ? i + 1 : i, is_punct);
      end = run(end, is_newline);
    } else {
      end = run(i, is_space);
      const std::string_view ws = text.substr(i, end - i);
      if (const auto nl = ws.find_last_of("\r\n"); nl != std::string_view::npos) {
        end = i + nl + 1;  // whitespace up to and including the last line break
      } else if (end - i > 1 && end < text.size()) {
        --end;  // leave one space to lead the next word
      }
    }
    out.emplace_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

Vocabulary build_vocabulary(const VocabLayout& layout) {
  if (layout.kind == TokenizerKind::wordpiece) {
    return build_wordpiece_vocabulary(layout);
  }
  // Qwen2.5-Coder's order: the ChatML markers, the tool-call tags, then fill-in-the-middle.
  static constexpr std::string_view kSpecials[] = {"<|endoftext|>",  "<|im_start|>",    "<|im_end|>",    "<tool_call>",
                                                   "</tool_call>",   "<|fim_prefix|>",  "<|fim_middle|>", "<|fim_suffix|>",
                                                   "<|fim_pad|>",    "<|repo_name|>",   "<|file_sep|>"};
  constexpr std::size_t n_specials = std::size(kSpecials);
  if (layout.n_regular < 512 || layout.size < layout.n_regular + n_specials) {
    throw std::runtime_error(std::format("bad vocabulary layout: {} regular tokens of {} in all", layout.n_regular,
                                         layout.size));
  }

  Trained trained = train_bpe(training_corpus(), std::min<std::size_t>(kMaxMerges, layout.n_regular - 256));
  Vocabulary v;
  v.merges = std::move(trained.merges);
  v.tokens = std::move(trained.tokens);
  v.token_types.assign(v.tokens.size(), kTokenNormal);

  // Filler words: concatenations of two learned tokens ("Ġcache" + "ing"), unique and never
  // produced by the merges, so they only ever appear when the model samples them.
  const std::size_t n_learned = v.tokens.size();
  if (n_learned < 256 + 64) {
    throw std::runtime_error("training corpus too small to build filler tokens");
  }
  std::unordered_set<std::string> taken(v.tokens.begin(), v.tokens.end());
  Rng rng(kFillerSeed);
  while (v.tokens.size() < layout.n_regular) {
    std::string word = v.tokens[256 + rng.below(n_learned - 256)] + v.tokens[256 + rng.below(n_learned - 256)];
    if (taken.insert(word).second) {
      v.tokens.push_back(std::move(word));
      v.token_types.push_back(kTokenNormal);
    }
  }

  for (const auto special : kSpecials) {
    const bool is_tool_tag = special.front() == '<' && special[1] != '|';
    v.tokens.emplace_back(special);
    // Tool-call tags are user-defined, like Qwen's: they print as text in the output, where a
    // tool-call parser can find them; the ChatML markers are control tokens.
    v.token_types.push_back(is_tool_tag ? kTokenUserDefined : kTokenControl);
  }
  v.bos_id = static_cast<std::int32_t>(layout.n_regular);  // <|endoftext|>
  v.pad_id = v.bos_id;
  v.eos_id = v.bos_id + 2;  // <|im_end|>
  v.fim = {.prefix = v.bos_id + 5, .middle = v.bos_id + 6, .suffix = v.bos_id + 7, .pad = v.bos_id + 8,
           .repository = v.bos_id + 9, .file_separator = v.bos_id + 10};
  for (std::size_t n = 0; v.tokens.size() < layout.size; ++n) {
    v.tokens.push_back(std::format("<|extra_{}|>", n));
    v.token_types.push_back(kTokenControl);
  }
  v.chat_template = chat_template();
  return v;
}

}  // namespace prefixd::modelgen
