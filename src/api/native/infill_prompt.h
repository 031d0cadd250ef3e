// prefixd api — the fill-in-the-middle prompt of POST /infill, laid out as llama-server lays it so
// that an editor plugin's requests meet the same tokens (and the same cache) on either server:
//
//   [repository]myproject\n                       when the model has a repository marker
//   [file_separator]{filename}\n{text}            each extra chunk (without a file separator:
//   ...                                           "\n\n--- snippet ---\n\n" before its text)
//   [file_separator]filename\n                    the file being edited
//   [begin][prefix]{input_prefix}{prompt}[suffix]{input_suffix}[middle]
//
// The window the text around the cursor must fit (kInfillWindow, llama-server's default logical
// batch) takes at most three quarters of it from the end of the prefix and the rest, less the
// prompt, from the start of the suffix; the extra chunks fill what the context leaves after the
// window and twice the server's reply limit, keeping their end (the most recent chunks).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace prefixd::api {

inline constexpr std::int32_t kInfillWindow = 2048;

struct InfillFile {
  std::string_view filename;
  std::string_view text;
};

struct InfillText {
  std::string_view prefix;
  std::string_view suffix;
  std::span<const engine::Token> prompt;  // already tokenized
  std::span<const InfillFile> extra;
};

struct InfillBudget {
  std::int32_t context = 0;    // the longest prompt a request may have
  std::int32_t max_tokens = -1;  // the server's reply limit (-1: none), as llama-server's -n counts it
};

// Tokenizes text as plain text: no special tokens parsed, none added.
using PlainTokenizer = std::function<std::vector<engine::Token>(std::string_view)>;

std::vector<engine::Token> infill_prompt(const engine::InfillTokens& markers, const PlainTokenizer& tokenize,
                                         const InfillText& text, InfillBudget budget);

}  // namespace prefixd::api
