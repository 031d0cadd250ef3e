// GbnfBuilder's larger shapes: long repetitions in chunks, and alternations of many literals as a
// trie. Both keep what the grammar engine holds and walks per token small however large the
// schema's numbers or lists are.
#include <algorithm>
#include <format>
#include <map>
#include <stdexcept>

#include "api/structured/gbnf_builder.h"

namespace prefixd::api {
namespace {

std::string joined(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (!p.empty()) out += (out.empty() ? "" : " ") + p;
  }
  return out;
}

}  // namespace

std::string GbnfBuilder::repeat(const std::string& element, std::int64_t min, std::optional<std::int64_t> max) {
  if (min < 0 || (max && *max < min) || std::max(min, max.value_or(0)) > kMaxRepetition) {
    throw std::logic_error("GbnfBuilder::repeat: counts out of range");
  }
  // One repetition the engine accepts (every count at most kRepetitionChunk): about max rules.
  auto direct = [this](const std::string& x, std::int64_t lo, std::optional<std::int64_t> hi) -> std::string {
    if (!hi) {
      repetition_rules_ += 1;
      return lo == 0 ? x + "*" : lo == 1 ? x + "+" : std::format("{} {}*", std::format("{}{{{}}}", x, lo), x);
    }
    if (*hi == 0) return "";
    repetition_rules_ += *hi - lo;
    if (lo == *hi) return lo == 1 ? x : std::format("{}{{{}}}", x, lo);
    return lo == 0 && *hi == 1 ? x + "?" : std::format("{}{{{},{}}}", x, lo, *hi);
  };
  if (max.value_or(min) <= kRepetitionChunk) return direct(element, min, max);
  const std::string chunk = add("chunk-of-" + element, direct(element, kRepetitionChunk, kRepetitionChunk));
  const std::string at_least = joined({direct(chunk, min / kRepetitionChunk, min / kRepetitionChunk),
                                       direct(element, min % kRepetitionChunk, min % kRepetitionChunk)});
  if (!max) return joined({at_least, direct(element, 0, std::nullopt)});
  const std::int64_t spare = *max - min;
  if (spare <= kRepetitionChunk) return joined({at_least, direct(element, 0, spare)});
  // 0..spare as q whole chunks and a remainder: fewer than q chunks with any remainder below a
  // chunk, or exactly q chunks and at most spare % chunk more. The two never match the same length.
  const std::int64_t q = spare / kRepetitionChunk;
  const std::string fewer = joined({direct(chunk, 0, q - 1), direct(element, 0, kRepetitionChunk - 1)});
  const std::string all = joined({direct(chunk, q, q), direct(element, 0, spare % kRepetitionChunk)});
  return joined({at_least, "(" + fewer + " | " + all + ")"});
}

std::string GbnfBuilder::one_of_literals(std::string_view base, std::span<const std::string> texts) {
  if (texts.empty()) throw std::logic_error("GbnfBuilder::one_of_literals: no text");
  // The trie is walked over the sorted texts without being built: a node is a range of texts that
  // share their first `depth` bytes (a character boundary); the texts of a child share one more
  // character, and an edge runs on to where the first and the last text of its range part, which
  // in sorted order is where every text of the range parts. Memory stays that of the output.
  std::vector<std::string> sorted(texts.begin(), texts.end());
  std::ranges::sort(sorted);
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  struct Edge {
    std::string spelled;
    std::ptrdiff_t child = -1;  // index into nodes; -1: the edge ends its one text
  };
  struct Node {
    std::size_t lo, hi, depth;
    bool ends_text = false;
    std::vector<Edge> edges;
  };
  auto char_length = [](const std::string& t, std::size_t at) {
    std::size_t n = 1;
    while (at + n < t.size() && (static_cast<unsigned char>(t[at + n]) & 0xC0) == 0x80) ++n;
    return n;
  };
  std::vector<Node> nodes{Node{0, sorted.size(), 0}};
  std::vector<std::size_t> to_visit{0};
  while (!to_visit.empty()) {
    const std::size_t k = to_visit.back();
    to_visit.pop_back();
    const std::size_t depth = nodes[k].depth;
    std::size_t i = nodes[k].lo;
    const std::size_t hi = nodes[k].hi;
    nodes[k].ends_text = sorted[i].size() == depth;  // the shortest text sorts first
    if (nodes[k].ends_text) ++i;
    while (i < hi) {
      const std::string_view c = std::string_view(sorted[i]).substr(depth, char_length(sorted[i], depth));
      std::size_t j = i + 1;
      while (j < hi && std::string_view(sorted[j]).substr(depth, c.size()) == c) ++j;
      const std::string& first = sorted[i];
      const std::string& last = sorted[j - 1];
      std::size_t part = depth + c.size();
      while (part < first.size() && part < last.size() && first[part] == last[part]) ++part;
      while (part < first.size() && (static_cast<unsigned char>(first[part]) & 0xC0) == 0x80) --part;
      Edge edge{first.substr(depth, part - depth)};
      if (j - i > 1) {
        edge.child = static_cast<std::ptrdiff_t>(nodes.size());
        to_visit.push_back(nodes.size());
        nodes.push_back(Node{i, j, part});
      }
      nodes[k].edges.push_back(std::move(edge));
      i = j;
    }
  }
  // Children come after their parents: walking backwards names every rule before its use.
  std::vector<std::string> rule_of(nodes.size());
  for (std::size_t k = nodes.size(); k-- > 0;) {
    std::string body;
    for (const Edge& e : nodes[k].edges) {
      body += (body.empty() ? "" : " | ") + joined({gbnf_literal(e.spelled), e.child < 0 ? "" : rule_of[static_cast<std::size_t>(e.child)]});
    }
    if (body.empty()) {
      rule_of[k] = gbnf_literal("");
      continue;
    }
    if (nodes[k].ends_text) body = "(" + body + ")?";
    rule_of[k] = add(base, std::move(body));
  }
  return rule_of[0];
}

}  // namespace prefixd::api
