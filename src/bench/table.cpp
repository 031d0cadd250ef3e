#include "bench/table.h"

#include <algorithm>

namespace prefixd::bench {

std::size_t display_width(const std::string& text) {
  // Counts the bytes that start a UTF-8 sequence (everything but 10xxxxxx continuation bytes).
  return static_cast<std::size_t>(std::ranges::count_if(text, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<std::size_t> widths;
  for (const auto& h : headers_) widths.push_back(std::max<std::size_t>(3, display_width(h)));
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::size_t i = 0; i < cells.size(); ++i) {
      out += ' ' + cells[i] + std::string(widths[i] - display_width(cells[i]), ' ') + " |";
    }
    return out + "\n";
  };
  std::string out = line(headers_);
  out += "|";
  for (std::size_t w : widths) out += std::string(w + 2, '-') + "|";
  out += "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

}  // namespace prefixd::bench
