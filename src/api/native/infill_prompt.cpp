#include "api/native/infill_prompt.h"

#include <algorithm>
#include <string>

namespace prefixd::api {
namespace {

void append(std::vector<engine::Token>& out, std::span<const engine::Token> tokens) {
  out.insert(out.end(), tokens.begin(), tokens.end());
}

// What comes before the file being edited: the repository, then each extra file.
std::vector<engine::Token> repository_context(const engine::InfillTokens& markers, const PlainTokenizer& tokenize,
                                              std::span<const InfillFile> extra) {
  std::vector<engine::Token> out;
  if (markers.repository) {
    out.push_back(*markers.repository);
    append(out, tokenize("myproject\n"));
  }
  for (const auto& file : extra) {
    if (markers.file_separator) {
      out.push_back(*markers.file_separator);
      append(out, tokenize(std::string(file.filename) + "\n"));
    } else {
      append(out, tokenize("\n\n--- snippet ---\n\n"));
    }
    append(out, tokenize(file.text));
  }
  if (markers.file_separator) {
    out.push_back(*markers.file_separator);
    append(out, tokenize("filename\n"));
  }
  return out;
}

}  // namespace

std::vector<engine::Token> infill_prompt(const engine::InfillTokens& markers, const PlainTokenizer& tokenize,
                                         const InfillText& text, InfillBudget budget) {
  const std::vector<engine::Token> context = repository_context(markers, tokenize, text.extra);
  const std::vector<engine::Token> prefix = tokenize(text.prefix);
  const std::vector<engine::Token> suffix = tokenize(text.suffix);

  const auto prompt_size = static_cast<std::int64_t>(text.prompt.size());
  const std::int64_t prefix_take = std::min<std::int64_t>(static_cast<std::int64_t>(prefix.size()), 3 * (kInfillWindow / 4));
  const std::int64_t suffix_take = std::min<std::int64_t>(
      static_cast<std::int64_t>(suffix.size()), std::max<std::int64_t>(0, kInfillWindow / 4 - (2 + prompt_size)));
  // n_predict -1 counts as llama-server counts it: twice -1 leaves two more tokens for context.
  const std::int64_t context_take = std::min<std::int64_t>(
      std::max<std::int64_t>(0, std::int64_t{budget.context} - kInfillWindow - 2 * std::int64_t{budget.max_tokens}),
      static_cast<std::int64_t>(context.size()));

  std::vector<engine::Token> out;
  out.reserve(static_cast<std::size_t>(context_take + prefix_take + suffix_take + prompt_size + 4));
  append(out, std::span(context).last(static_cast<std::size_t>(context_take)));
  if (markers.begin) out.push_back(*markers.begin);
  out.push_back(markers.prefix);
  append(out, std::span(prefix).last(static_cast<std::size_t>(prefix_take)));
  append(out, text.prompt);
  out.push_back(markers.suffix);
  append(out, std::span(suffix).first(static_cast<std::size_t>(suffix_take)));
  out.push_back(markers.middle);
  return out;
}

}  // namespace prefixd::api
