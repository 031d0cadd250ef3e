// BERT-style uncased WordPiece vocabulary for the encoder presets, built from the embedded corpus.
//
// No training loop: WordPiece tokenizes greedily, longest piece first from the start of a word, so
// a vocabulary that holds every single character never yields [UNK] for lowercase ASCII text, and
// each longer piece only shortens the output. Pieces are therefore ranked by how many symbols
// they save on the corpus, which is deterministic and keeps the ids stable.
#include <algorithm>
#include <format>
#include <map>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "modelgen/vocab.h"

namespace prefixd::modelgen {

namespace {

// U+2581: llama.cpp's WPM tokenizer looks every word up with this "phantom space" in front, and
// its converter writes it before every word-start piece of BERT's vocab.txt (and strips "##" from
// the continuation pieces).
constexpr std::string_view kWordStart = "\xE2\x96\x81";

// Ids 0-4, in this order. (bert-base-uncased has them at 0 and 100-103, with [unusedN] between;
// any ids work, as the GGUF names them.)
constexpr std::string_view kSpecials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_alnum(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
// Printable ASCII that is neither a letter nor a digit: BERT splits each into a word of its own.
bool is_punct(unsigned char c) { return c > ' ' && c < 0x7F && !is_alnum(c); }

struct Ranked {
  std::string text;
  std::int64_t score;
};

// Highest score first; ties in byte order, so the ranking never depends on map iteration order.
std::vector<Ranked> ranked(const std::map<std::string, std::int64_t>& scores) {
  std::vector<Ranked> out;
  for (const auto& [text, score] : scores) out.push_back({text, score});
  std::ranges::stable_sort(out, [](const Ranked& a, const Ranked& b) { return a.score > b.score; });
  return out;
}

}  // namespace

std::vector<std::string> bert_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  const auto finish = [&] {
    if (!word.empty()) words.push_back(std::exchange(word, {}));
  };
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_space(c)) {
      finish();
    } else if (is_punct(c)) {
      finish();
      words.emplace_back(1, ch);
    } else if (c >= 0x20) {  // control characters are dropped, as BERT's cleaner drops them
      word += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : ch;
    }
  }
  finish();
  return words;
}

Vocabulary build_wordpiece_vocabulary(const VocabLayout& layout) {
  Vocabulary v;
  v.model = "bert";
  v.pre = "default";
  std::unordered_set<std::string> taken;
  const auto add = [&](std::string text, std::int32_t type) {
    if (v.tokens.size() < layout.size && taken.insert(text).second) {
      v.tokens.push_back(std::move(text));
      v.token_types.push_back(type);
    }
  };
  const auto word_start = [](std::string_view piece) { return std::string(kWordStart) + std::string(piece); };

  for (const auto special : kSpecials) add(std::string(special), kTokenControl);
  // Every printable character as a word of its own; letters and digits also continue a word.
  for (unsigned char c = '!'; c <= '~'; ++c) {
    if (c < 'A' || c > 'Z') add(word_start(std::string(1, static_cast<char>(c))), kTokenNormal);
  }
  for (unsigned char c = '!'; c <= '~'; ++c) {
    if (is_alnum(c) && (c < 'A' || c > 'Z')) add(std::string(1, static_cast<char>(c)), kTokenNormal);
  }
  const std::size_t n_base = v.tokens.size();
  if (layout.size < n_base) {
    throw std::runtime_error(std::format("bad WordPiece layout: {} tokens, the alphabet alone takes {}", layout.size,
                                         n_base));
  }

  std::map<std::string, std::int64_t> counts;
  for (auto& word : bert_words(training_corpus())) ++counts[std::move(word)];

  // The corpus's words, most frequent first.
  for (const auto& [word, count] : ranked(counts)) add(word_start(word), kTokenNormal);

  // Then pieces of them: a word-start piece of k characters saves k - 1 symbols each time a word
  // begins with it, a continuation piece of k characters saves k - 1 each time a word ends in it.
  std::map<std::string, std::int64_t> saving;
  for (const auto& [word, count] : counts) {
    const auto n = static_cast<std::int64_t>(word.size());
    if (n < 3 || !is_alnum(static_cast<unsigned char>(word.front()))) continue;
    for (std::int64_t k = 2; k < n; ++k) {
      saving[word_start(word.substr(0, static_cast<std::size_t>(k)))] += count * (k - 1);
      saving[word.substr(static_cast<std::size_t>(n - k))] += count * (k - 1);
    }
  }
  for (const auto& [piece, score] : ranked(saving)) add(piece, kTokenNormal);

  for (std::size_t n = 0; v.tokens.size() < layout.size; ++n) add(std::format("[unused{}]", n), kTokenControl);

  v.pad_id = 0;
  v.unk_id = 1;
  v.cls_id = 2;
  v.sep_id = 3;
  v.mask_id = 4;
  // What convert_hf_to_gguf.py derives from a BERT tokenizer: no BOS/EOS of its own, so [CLS] and
  // [SEP] stand in for them, and the "[CLS] $A [SEP]" post-processor adds both around each input;
  // its pair template "[CLS] $A [SEP] $B [SEP]" has one separator between the texts, no extra one.
  v.bos_id = v.cls_id;
  v.eos_id = v.sep_id;
  v.add_bos = true;
  v.add_eos = true;
  v.add_sep = false;
  v.token_type_count = kBertTokenTypeCount;
  v.lowercase = true;
  return v;
}

}  // namespace prefixd::modelgen
