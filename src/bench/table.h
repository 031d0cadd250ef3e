// prefixd bench — Markdown tables whose columns line up in a terminal too.
#pragma once

#include <string>
#include <vector>

namespace prefixd::bench {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // Missing cells are left empty, extra ones dropped.
  void add_row(std::vector<std::string> cells);
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width: code points, not bytes, so "×" and "–" do not push columns out of line.
std::size_t display_width(const std::string& text);

}  // namespace prefixd::bench
