#include "metrics/registry.h"

#include <cmath>
#include <format>
#include <stdexcept>

namespace prefixd::metrics {
namespace {

const char* type_name(Type type) {
  switch (type) {
    case Type::counter: return "counter";
    case Type::gauge: return "gauge";
    case Type::histogram: return "histogram";
  }
  return "untyped";
}

// A metric or label name: [a-zA-Z_:][a-zA-Z0-9_:]* (labels without ':').
bool valid_name(std::string_view name, bool label) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Help text escapes backslash and newline; label values also escape the double quote.
std::string escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) return std::format("{}", static_cast<std::int64_t>(value));
  return std::format("{}", value);
}

Registry::Family& Registry::family(std::string_view name, Type type, std::string_view help) {
  if (const auto found = index_.find(name); found != index_.end()) {
    Family& existing = families_[found->second];
    if (existing.type != type || existing.help != help) {
      throw std::logic_error(std::format("metric family {} added with two types or helps", name));
    }
    return existing;
  }
  if (!valid_name(name, false)) throw std::logic_error(std::format("invalid metric name '{}'", name));
  index_.emplace(std::string(name), families_.size());
  families_.push_back(Family{std::string(name), type, std::string(help), {}});
  return families_.back();
}

void Registry::sample(Family& family, std::string_view suffix, const Labels& labels, double value) {
  std::string line = family.name;
  line += suffix;
  if (!labels.empty()) {
    line += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (!valid_name(labels[i].first, true)) throw std::logic_error(std::format("invalid label name '{}'", labels[i].first));
      if (i > 0) line += ',';
      line += std::format("{}=\"{}\"", labels[i].first, escape(labels[i].second, true));
    }
    line += '}';
  }
  line += ' ';
  line += format_value(value);
  family.samples.push_back(std::move(line));
}

void Registry::counter(std::string_view name, std::string_view help, double value, const Labels& labels) {
  sample(family(name, Type::counter, help), "", labels, value);
}

void Registry::gauge(std::string_view name, std::string_view help, double value, const Labels& labels) {
  sample(family(name, Type::gauge, help), "", labels, value);
}

void Registry::declare(std::string_view name, Type type, std::string_view help) { family(name, type, help); }

void Registry::histogram(std::string_view name, std::string_view help, const Histogram& histogram,
                         const Labels& labels) {
  if (histogram.bounds.size() != histogram.cumulative.size()) throw std::logic_error("histogram bounds and buckets differ");
  Family& f = family(name, Type::histogram, help);
  for (std::size_t i = 0; i < histogram.bounds.size(); ++i) {
    Labels with_le = labels;
    with_le.emplace_back("le", format_value(histogram.bounds[i]));
    sample(f, "_bucket", with_le, static_cast<double>(histogram.cumulative[i]));
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  sample(f, "_bucket", inf, static_cast<double>(histogram.count));
  sample(f, "_sum", labels, histogram.sum);
  sample(f, "_count", labels, static_cast<double>(histogram.count));
}

std::string Registry::text() const {
  std::string out;
  for (const Family& f : families_) {
    out += std::format("# HELP {} {}\n# TYPE {} {}\n", f.name, escape(f.help, false), f.name, type_name(f.type));
    for (const std::string& line : f.samples) {
      out += line;
      out += '\n';
    }
  }
  return out;
}

}  // namespace prefixd::metrics
