#include "api/body/body_scan.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

namespace prefixd::api {
namespace {

// Thrown inside this file when the body is not JSON the scan can follow; the entry points turn
// it into nullopt.
struct Malformed {};

constexpr std::size_t kKeepBytes = 64;  // enough for any key or role the scans compare

bool is_text_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  throw Malformed{};
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::size_t utf8_length(std::uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// A read position in the body with the few JSON steps the scans need.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}

  char peek() {
    while (pos_ < text_.size() && is_json_space(text_[pos_])) ++pos_;
    if (pos_ >= text_.size()) throw Malformed{};
    return text_[pos_];
  }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) throw Malformed{};
  }
  void expect_end() {
    while (pos_ < text_.size() && is_json_space(text_[pos_])) ++pos_;
    if (pos_ != text_.size()) throw Malformed{};
  }

  // A string at the cursor: its decoded weight; its first kKeepBytes decoded bytes go to `head`.
  TextWeight string(std::string* head = nullptr) {
    expect('"');
    TextWeight weight;
    auto keep = [&](std::uint32_t cp) {
      if (head && head->size() < kKeepBytes) append_utf8(*head, cp);
    };
    while (true) {
      // Plain bytes up to the next quote, escape or (invalid) control byte: the only whitespace a
      // JSON string holds unescaped is the space.
      const std::size_t start = pos_;
      std::size_t spaces = skip_plain_words();
      while (pos_ < text_.size()) {
        const auto c = static_cast<unsigned char>(text_[pos_]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        spaces += c == ' ' ? 1 : 0;
        ++pos_;
      }
      weight.bytes += pos_ - start;
      weight.non_space_bytes += pos_ - start - spaces;
      if (head && head->size() < kKeepBytes) head->append(text_.substr(start, std::min(pos_ - start, kKeepBytes)));
      if (pos_ >= text_.size()) throw Malformed{};
      const auto c = static_cast<unsigned char>(text_[pos_++]);
      if (c == '"') return weight;
      if (c < 0x20) throw Malformed{};
      if (pos_ >= text_.size()) throw Malformed{};
      std::uint32_t cp = 0;
      switch (text_[pos_++]) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': cp = code_point(); break;
        default: throw Malformed{};
      }
      weight.bytes += utf8_length(cp);
      weight.non_space_bytes += cp < 0x80 && is_text_space(static_cast<unsigned char>(cp)) ? 0 : utf8_length(cp);
      keep(cp);
    }
  }

  // Skips the value at the cursor (objects and arrays without recursion, so depth costs nothing).
  void skip_value() {
    const char first = peek();
    if (first == '"') {
      string();
      return;
    }
    if (first != '{' && first != '[') {
      const std::size_t start = pos_;
      while (pos_ < text_.size() && !is_json_space(text_[pos_]) && text_[pos_] != ',' && text_[pos_] != '}' &&
             text_[pos_] != ']') {
        ++pos_;
      }
      if (pos_ == start) throw Malformed{};
      return;
    }
    std::size_t depth = 0;
    do {
      const char c = peek();
      if (c == '"') {
        string();
        continue;
      }
      ++pos_;
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') --depth;
    } while (depth > 0);
  }

  // Calls on_member(key) at each member's value, which it must consume.
  template <class OnMember>
  void object(OnMember&& on_member) {
    expect('{');
    if (consume('}')) return;
    do {
      if (peek() != '"') throw Malformed{};
      std::string key;
      string(&key);
      expect(':');
      on_member(key);
    } while (consume(','));
    expect('}');
  }

  // Calls on_item() at each item, which it must consume.
  template <class OnItem>
  void array(OnItem&& on_item) {
    expect('[');
    if (consume(']')) return;
    do {
      on_item();
    } while (consume(','));
    expect(']');
  }

 private:
  // The code point of \uXXXX (after "\u"), joining a surrogate pair.
  std::uint32_t code_point() {
    auto four_hex = [&] {
      if (pos_ + 4 > text_.size()) throw Malformed{};
      std::uint32_t v = 0;
      for (int i = 0; i < 4; ++i) v = v * 16 + static_cast<std::uint32_t>(hex_digit(text_[pos_++]));
      return v;
    };
    const std::uint32_t high = four_hex();
    if (high < 0xD800 || high > 0xDBFF) return high;
    if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u') throw Malformed{};
    pos_ += 2;
    const std::uint32_t low = four_hex();
    if (low < 0xDC00 || low > 0xDFFF) throw Malformed{};
    return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
  }

  // Skips whole 8-byte words of plain string bytes (no quote, backslash or control byte) and
  // returns how many spaces they held: a prompt of megabytes is read a word at a time, about a
  // third of the instructions of a byte loop, which matters when a burst of them arrives at once.
  std::size_t skip_plain_words() {
    constexpr std::uint64_t kOnes = 0x0101010101010101ull;
    constexpr std::uint64_t kHighs = 0x8080808080808080ull;
    constexpr std::uint64_t kLows = 0x7F7F7F7F7F7F7F7Full;
    // Non-zero exactly when some byte of v is below n (for n <= 128).
    auto has_byte_below = [](std::uint64_t v, std::uint64_t n) { return (v - kOnes * n) & ~v & kHighs; };
    std::size_t spaces = 0;
    while (pos_ + 8 <= text_.size()) {
      std::uint64_t word = 0;
      std::memcpy(&word, text_.data() + pos_, 8);
      // A byte equal to c is a zero byte of word ^ (c in every byte): one below 1.
      if (has_byte_below(word ^ (kOnes * '"'), 1) | has_byte_below(word ^ (kOnes * '\\'), 1) |
          has_byte_below(word, 0x20)) {
        break;
      }
      // Here exactly the zero bytes of word ^ (spaces) get their high bit set.
      const std::uint64_t diff = word ^ (kOnes * ' ');
      spaces += static_cast<std::size_t>(std::popcount(~(((diff & kLows) + kLows) | diff | kLows)));
      pos_ += 8;
    }
    return spaces;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// A message's content: a string, or the text parts of an array joined by newlines.
TextWeight content_weight(Cursor& in) {
  const char first = in.peek();
  if (first == '"') return in.string();
  if (first != '[') {
    in.skip_value();
    return {};
  }
  TextWeight joined;
  std::size_t parts = 0;
  in.array([&] {
    if (in.peek() != '{') return in.skip_value();
    std::string type;
    std::optional<TextWeight> text;
    in.object([&](const std::string& key) {
      if (key == "type" && in.peek() == '"') {
        type.clear();
        in.string(&type);
      } else if (key == "text" && in.peek() == '"') {
        text = in.string();
      } else {
        if (key == "type") type.clear();
        if (key == "text") text.reset();
        in.skip_value();
      }
    });
    if (type != "text" || !text) return;
    joined.bytes += text->bytes + (parts > 0 ? 1 : 0);
    joined.non_space_bytes += text->non_space_bytes;
    ++parts;
  });
  return joined;
}

MessageWeight message_weight(Cursor& in) {
  if (in.peek() != '{') throw Malformed{};
  MessageWeight message;
  in.object([&](const std::string& key) {
    if (key == "role") {
      message.role.clear();
      if (in.peek() == '"') {
        in.string(&message.role);
      } else {
        in.skip_value();
      }
    } else if (key == "content") {
      message.content = content_weight(in);
    } else {
      in.skip_value();
    }
  });
  return message;
}

}  // namespace

std::optional<std::vector<MessageWeight>> scan_chat_messages(std::string_view body) {
  try {
    Cursor in(body);
    std::optional<std::vector<MessageWeight>> messages;
    in.object([&](const std::string& key) {
      if (key != "messages") return in.skip_value();
      if (in.peek() != '[') throw Malformed{};
      std::vector<MessageWeight> list;
      in.array([&] { list.push_back(message_weight(in)); });
      messages = std::move(list);
    });
    in.expect_end();
    return messages;
  } catch (const Malformed&) {
    return std::nullopt;
  }
}

std::optional<TextWeight> scan_completion_prompt(std::string_view body) {
  try {
    Cursor in(body);
    std::optional<TextWeight> prompt;
    in.object([&](const std::string& key) {
      if (key != "prompt") return in.skip_value();
      prompt.reset();
      if (in.peek() == '"') {
        prompt = in.string();
        return;
      }
      if (in.peek() != '[') return in.skip_value();
      // ["text"] is a text prompt; token ids or several prompts are not.
      std::size_t items = 0;
      std::optional<TextWeight> first;
      in.array([&] {
        if (items++ == 0 && in.peek() == '"') {
          first = in.string();
        } else {
          in.skip_value();
        }
      });
      if (items == 1) prompt = first;
    });
    in.expect_end();
    return prompt;
  } catch (const Malformed&) {
    return std::nullopt;
  }
}

}  // namespace prefixd::api
