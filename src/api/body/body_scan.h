// prefixd api — how much prompt text a request body carries, read straight from the body's bytes.
//
// A body of several megabytes costs several copies of itself once it is parsed into a JSON tree,
// copied into a request, rendered and tokenized. These scans read the raw body once, allocate
// nothing per byte, and tell how long its prompt text is, so that a prompt which cannot fit is
// refused before any of that (prompt_limit.h). They are not parsers: a body they cannot follow
// yields nullopt and is left to request_parser.h, which says what is wrong with it. Duplicate keys
// count as the parser counts them: the last one wins.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::api {

// Decoded bytes of a JSON string (escapes resolved), and how many of them are not ASCII
// whitespace.
struct TextWeight {
  std::size_t bytes = 0;
  std::size_t non_space_bytes = 0;
};

struct MessageWeight {
  std::string role;     // as sent, cut to its first 64 bytes; empty when absent or not a string
  TextWeight content;   // a string, or the text parts of an array (joined as the parser joins them)
};

// The messages of a chat body ("messages" at the root), in order; nullopt when the body is not an
// object whose "messages" is an array of objects.
std::optional<std::vector<MessageWeight>> scan_chat_messages(std::string_view body);

// The text prompt of a completion body ("prompt": "..." or ["..."]); nullopt when the body has no
// such prompt (token ids, a missing prompt, a body the scan cannot follow).
std::optional<TextWeight> scan_completion_prompt(std::string_view body);

}  // namespace prefixd::api
