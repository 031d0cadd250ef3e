#include "http/message.h"

#include <algorithm>
#include <cctype>

#include "util/hex.h"

namespace prefixd::http {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::ranges::equal(a, b, [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (std::uint8_t byte = 0; text[i] == '%' && i + 2 < text.size() &&
                                      util::from_hex(text.substr(i + 1, 2), std::span(&byte, 1))) {
      out += static_cast<char>(byte);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string_view Request::header(std::string_view name) const {
  const auto it = std::ranges::find_if(headers, [&](const Header& h) { return iequals(h.name, name); });
  return it == headers.end() ? std::string_view() : std::string_view(it->value);
}

bool Request::has_header(std::string_view name) const {
  return std::ranges::any_of(headers, [&](const Header& h) { return iequals(h.name, name); });
}

std::string Request::query_param(std::string_view name) const {
  std::string_view rest = query;
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const auto eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq)) != name) continue;
    return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
  }
  return {};
}

}  // namespace prefixd::http
