// prefixd api — special-token strings inside client text stay text.
//
// A chat template writes its own markers (<|im_start|>, <|im_end|>) as text, and the prompt is
// tokenized with special tokens parsed so that they become control tokens. The same strings inside
// a message would become control tokens too, and a user could close their turn and open a system
// one. SpecialTextGuard finds those strings in what the client sent, lets the template render the
// conversation with a placeholder in place of each, then puts them back and says where they
// landed, so the tokenizer reads those bytes as text (engine::Vocabulary::tokenize_with_literals).
// Requests whose strings hold no special-token string take none of this path: their prompt is
// rendered and tokenized exactly as before.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace prefixd::api {

// Rendered prompt text and the byte ranges of it that came from client text and spell a
// special-token string.
struct LiteralText {
  std::string text;
  std::vector<engine::TextRange> literal;  // sorted, non-overlapping
};

class SpecialTextGuard {
 public:
  // `control_texts`: the vocabulary's control-token strings (engine::Vocabulary::control_texts).
  // Placeholders carry a random per-process marker that no client can predict.
  explicit SpecialTextGuard(std::vector<std::string> control_texts);

  // False when the vocabulary has no control-token strings it can keep as text.
  bool active() const { return !texts_.empty(); }

  // Whether a string anywhere in `value` (object keys included) contains a control-token string.
  bool found_in(const nlohmann::ordered_json& value) const;

  // Replaces every control-token string in every string of `value` (keys included) with a
  // placeholder; the replaced strings are appended to `originals`, the placeholder's number being
  // the index there.
  void shield(nlohmann::ordered_json& value, std::vector<std::string>& originals) const;

  // `rendered` with each placeholder turned back into its original and the ranges where they now
  // stand. A placeholder the template copied twice yields two ranges; one it dropped, none.
  LiteralText restore(std::string_view rendered, std::span<const std::string> originals) const;

 private:
  // The length of the longest control-token string at `text[pos]`, 0 when none starts there.
  std::size_t match_at(std::string_view text, std::size_t pos) const;
  std::string shield_string(std::string_view text, std::vector<std::string>& originals) const;

  std::vector<std::string> texts_;    // longest first
  std::array<bool, 256> starts_{};    // bytes some control-token string starts with
  std::string marker_;                // placeholder i is marker_ + decimal(i) + 'Z'
};

}  // namespace prefixd::api
