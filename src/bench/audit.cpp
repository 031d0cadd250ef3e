#include "bench/audit.h"

#include <algorithm>
#include <cmath>
#include <format>
#include <random>

#include "bench/stats.h"
#include "bench/table.h"
#include "bench/text.h"

namespace prefixd::bench {
namespace {

using nlohmann::json;

constexpr const char* kChatPath = "/v1/chat/completions";
// Labels of derive_seed: trial t's prompts are (t, kPrimedPrompt) and (t, kMissPrompt); the other
// labels draw their own streams, so a longer audit sends the shorter one's prompts first.
constexpr std::uint64_t kPrimedPrompt = 1;
constexpr std::uint64_t kMissPrompt = 2;
constexpr std::uint64_t kCalibrationPrompt = 3;
constexpr std::uint64_t kWarmupPrompt = 4;
constexpr std::uint64_t kOrderStream = 5;
constexpr std::uint64_t kSetup = ~std::uint64_t{0};  // the trial index of prompts sent outside a trial
// Words per token of English-like text under common BPE vocabularies: used only when the server
// reports no prompt_tokens to measure its own.
constexpr double kFallbackTokensPerWord = 1.0 / 0.75;

// One principal: a key, the client that sends it, and a session of its own (`user`), so that a
// server isolating sessions (prefixd --cache-isolation session) sees two sessions too.
struct Principal {
  std::string name;  // "A" or "B"
  BenchClient client;
  std::string session;

  std::string who() const { return "key " + name; }
};

[[noreturn]] void fail(const Principal& p, const std::string& url, int status, const std::string& error) {
  using Kind = AuditFailure::Kind;
  if (status == 0) throw AuditFailure(Kind::unreachable, std::format("cannot reach {}: {}", url, error));
  if (status == 401 || status == 403) throw AuditFailure(Kind::refused, std::format("{} was refused: {}", p.who(), error));
  throw AuditFailure(Kind::failed, std::format("{}: {}", p.who(), error));
}

// GET /v1/models as `p`: checks that the server answers and takes the key; returns the first model
// listed, or "" when the server has no such route.
std::string check_key(const Principal& p, const std::string& url) {
  const HttpReply reply = p.client.get_raw("/v1/models");
  if (reply.status == 0) fail(p, url, 0, "GET /v1/models failed: " + reply.body);
  if (reply.status == 404) return "";
  if (reply.status != 200) {
    fail(p, url, reply.status, std::format("GET /v1/models answered {}: {}", reply.status, error_message(reply.body)));
  }
  const json body = json::parse(reply.body, nullptr, false);
  const json::json_pointer first_id("/data/0/id");
  if (body.is_object() && body.contains(first_id) && body.at(first_id).is_string()) return body.at(first_id).get<std::string>();
  return "";
}

AuditProbe send_probe(const Principal& p, const std::string& url, const std::string& model, const std::string& text) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", text}}})},
               {"max_tokens", 1},
               {"stream_options", {{"include_usage", true}}},
               {"user", p.session}};
  if (!model.empty()) body["model"] = model;
  const CompletionResult r = p.client.stream(kChatPath, body);
  if (!r.ok()) fail(p, url, r.status, r.error);
  // A stream whose only chunk was its end has no first-token time; with one token the whole
  // response is as good a measure.
  return AuditProbe{.ttft_ms = r.ttft_ms >= 0 ? r.ttft_ms : r.total_ms,
                    .prompt_tokens = r.prompt_tokens,
                    .cached_tokens = r.cached_tokens,
                    .outcome = r.outcome,
                    .tier = r.tier};
}

// Tokens per word of the random text under this server's tokenizer: two prompts of different
// lengths, so that the chat template's own tokens cancel out. 0 when the server reports no
// prompt_tokens.
double measure_tokens_per_word(const Principal& p, const std::string& url, const std::string& model,
                               const AuditOptions& o) {
  const int short_words = std::max(4, o.prompt_tokens / 16);
  const int long_words = std::max(short_words + 4, o.prompt_tokens / 4);
  const auto send = [&](int words, std::uint64_t label) {
    return send_probe(p, url, model, make_text(derive_seed(o.seed, kSetup, kCalibrationPrompt, label),
                                               static_cast<std::size_t>(words)));
  };
  const AuditProbe short_probe = send(short_words, 1);
  const AuditProbe long_probe = send(long_words, 2);
  if (short_probe.prompt_tokens < 0 || long_probe.prompt_tokens <= short_probe.prompt_tokens) return 0;
  return static_cast<double>(long_probe.prompt_tokens - short_probe.prompt_tokens) / (long_words - short_words);
}

std::string cached_text(const AuditProbe& probe) {
  if (probe.cached_tokens < 0) return "cached n/a";
  return probe.prompt_tokens >= 0 ? std::format("cached {} of {}", probe.cached_tokens, probe.prompt_tokens)
                                  : std::format("cached {}", probe.cached_tokens);
}

json probe_json(const AuditProbe& p) {
  return {{"ttft_ms", p.ttft_ms}, {"prompt_tokens", p.prompt_tokens}, {"cached_tokens", p.cached_tokens},
          {"outcome", p.outcome}, {"tier", p.tier}};
}

// The median of one field over the trials' probes of one kind; -1 when none reported it.
template <class Field>
double median_of(std::span<const AuditTrial> trials, AuditProbe AuditTrial::*probe, Field field) {
  std::vector<double> values;
  for (const AuditTrial& t : trials) {
    const double value = static_cast<double>((t.*probe).*field);
    if (value >= 0) values.push_back(value);
  }
  return values.empty() ? -1 : summarize(std::move(values)).median;
}

std::vector<double> ttfts(std::span<const AuditTrial> trials, AuditProbe AuditTrial::*probe) {
  std::vector<double> values;
  for (const AuditTrial& t : trials) {
    if ((t.*probe).ttft_ms >= 0) values.push_back((t.*probe).ttft_ms);
  }
  return values;
}

// `probe` reported reuse beyond what the same trial's fresh prompt got (decide_audit's rule).
bool reused(const AuditProbe& probe, const AuditProbe& fresh) {
  const std::int64_t quarter = std::max<std::int64_t>(1, probe.prompt_tokens / 4);
  return probe.cached_tokens >= 0 && fresh.cached_tokens >= 0 && probe.cached_tokens - fresh.cached_tokens >= quarter;
}

std::string count_text(double value) { return value < 0 ? "n/a" : std::format("{:.0f}", value); }

}  // namespace

std::uint64_t unpredictable_seed() {
  std::random_device device;
  return device() | (std::uint64_t{device()} << 32);
}

AuditVerdict decide_audit(std::span<const AuditTrial> trials, double alpha) {
  AuditVerdict v;
  v.cached_tokens_reported = !trials.empty();
  for (const AuditTrial& t : trials) {
    if (t.primed.cached_tokens < 0 || t.miss.cached_tokens < 0) {
      v.cached_tokens_reported = false;
      continue;
    }
    if (reused(t.primed, t.miss)) ++v.trials_primed_reused;
  }
  const std::vector<double> primed = ttfts(trials, &AuditTrial::primed);
  const std::vector<double> miss = ttfts(trials, &AuditTrial::miss);
  v.ks = two_sample_ks(primed, miss);
  v.by_timing = !primed.empty() && !miss.empty() && v.ks.p_value < alpha;
  v.by_cached_tokens = !trials.empty() && 3 * static_cast<std::size_t>(v.trials_primed_reused) >= 2 * trials.size();
  v.shared = v.by_cached_tokens || v.by_timing;
  return v;
}

AuditReport run_audit(const AuditOptions& options, std::ostream& progress) {
  AuditReport report;
  report.url = std::format("http://{}:{}", options.host, options.port);
  report.options = options;
  report.options.key_a.clear();
  report.options.key_b.clear();
  report.prompt_tokens = options.prompt_tokens;
  const auto principal = [&](const std::string& name, const std::string& key) {
    return Principal{name, BenchClient(ClientTarget{options.host, options.port, key}, options.request_timeout),
                     std::format("prefixd-audit-{}-{:016x}", name, options.seed)};
  };
  const Principal a = principal("A", options.key_a);
  const Principal b = principal("B", options.key_b);
  const std::string& url = report.url;

  const std::string listed = check_key(a, url);
  check_key(b, url);
  report.model = options.model.empty() ? listed : options.model;

  report.tokens_per_word = measure_tokens_per_word(a, url, report.model, options);
  const double tokens_per_word = report.tokens_per_word > 0 ? report.tokens_per_word : kFallbackTokensPerWord;
  report.prompt_words = std::max(1, static_cast<int>(std::lround(options.prompt_tokens / tokens_per_word)));
  const auto words = static_cast<std::size_t>(report.prompt_words);
  // Warm B's path through the server (and check that prompts of this length are served) before
  // anything is timed: the first requests after a start or an idle spell are slower for reasons
  // that have nothing to do with the cache.
  for (std::uint64_t i = 0; i < 2; ++i) {
    send_probe(b, url, report.model, make_text(derive_seed(options.seed, kSetup, kWarmupPrompt, i), words));
  }
  // What key A's request of a prompt nobody has sent reports cached (the template's opening, if
  // anything): a trial's first request must report no more. Unseeded on purpose: with a seed used
  // before against this server, everything seeded would be cached already.
  const AuditProbe unseen = send_probe(a, url, report.model, make_text(unpredictable_seed(), words));
  progress << std::format("auditing {}: {} trials, prompts of {} words (~{} tokens)\n", url, options.trials,
                          report.prompt_words, options.prompt_tokens);

  SeededRng order(derive_seed(options.seed, kSetup, kOrderStream));
  for (int t = 0; t < options.trials; ++t) {
    const auto trial_seed = [&](std::uint64_t label) { return derive_seed(options.seed, static_cast<std::uint64_t>(t), label); };
    const std::string primed_text = make_text(trial_seed(kPrimedPrompt), words);
    const std::string miss_text = make_text(trial_seed(kMissPrompt), words);
    AuditTrial trial;
    trial.primer = send_probe(a, url, report.model, primed_text);
    if (reused(trial.primer, unseen)) {
      throw AuditFailure(AuditFailure::Kind::failed,
                         std::format("trial {}: key A's first request of the trial's prompt already reported {}: the server has "
                                     "seen this audit's prompts before (seed {} against the same server?); run again "
                                     "with another --seed",
                                     t + 1, cached_text(trial.primer), options.seed));
    }
    trial.primed_first = (order.next() & 1) != 0;
    if (trial.primed_first) {
      trial.primed = send_probe(b, url, report.model, primed_text);
      trial.miss = send_probe(b, url, report.model, miss_text);
    } else {
      trial.miss = send_probe(b, url, report.model, miss_text);
      trial.primed = send_probe(b, url, report.model, primed_text);
    }
    progress << std::format("trial {}/{}: B after A {} ({}), B fresh {} ({})\n", t + 1, options.trials,
                            format_ms(trial.primed.ttft_ms), cached_text(trial.primed), format_ms(trial.miss.ttft_ms),
                            cached_text(trial.miss));
    report.trials.push_back(std::move(trial));
  }
  report.verdict = decide_audit(report.trials, options.alpha);
  return report;
}

json audit_json(const AuditReport& r) {
  const AuditVerdict& v = r.verdict;
  const std::span<const AuditTrial> trials(r.trials);
  json trial_list = json::array();
  for (const AuditTrial& t : r.trials) {
    trial_list.push_back({{"primed_first", t.primed_first},
                          {"primer", probe_json(t.primer)},
                          {"primed", probe_json(t.primed)},
                          {"miss", probe_json(t.miss)}});
  }
  const auto ttft = [&](AuditProbe AuditTrial::*probe) {
    const std::vector<double> values = ttfts(trials, probe);
    return summary_json(summarize(values), values);
  };
  return {{"url", r.url},
          {"model", r.model},
          {"trials", r.trials.size()},
          {"seed", r.options.seed},
          {"alpha", r.options.alpha},
          {"prompt_tokens", r.prompt_tokens},
          {"prompt_words", r.prompt_words},
          {"tokens_per_word", r.tokens_per_word},
          {"verdict", v.shared ? "shared" : "isolated"},
          {"by_cached_tokens", v.by_cached_tokens},
          {"by_timing", v.by_timing},
          {"ks", {{"d", v.ks.d}, {"p_value", v.ks.p_value}, {"n", v.ks.n}, {"m", v.ks.m}}},
          {"ttft_ms", {{"primed", ttft(&AuditTrial::primed)}, {"miss", ttft(&AuditTrial::miss)}}},
          {"cached_tokens",
           {{"reported", v.cached_tokens_reported},
            {"primed_median", median_of(trials, &AuditTrial::primed, &AuditProbe::cached_tokens)},
            {"miss_median", median_of(trials, &AuditTrial::miss, &AuditProbe::cached_tokens)},
            {"trials_primed_reused", v.trials_primed_reused}}},
          {"trial_list", std::move(trial_list)}};
}

void print_audit(const AuditReport& r, std::ostream& out) {
  const AuditVerdict& v = r.verdict;
  const std::span<const AuditTrial> trials(r.trials);
  const std::size_t n = r.trials.size();
  out << std::format("prefixd-bench audit of {}{}\n", r.url, r.model.empty() ? "" : ", model " + r.model);
  out << std::format("{} trials, seed {}: prompts of ~{} tokens ({} words{})\n\n", n, r.options.seed, r.prompt_tokens,
                     r.prompt_words,
                     r.tokens_per_word > 0 ? std::format(" at {:.2f} tokens per word", r.tokens_per_word)
                                           : ", assuming 0.75 words per token: the server reports no prompt_tokens");
  Table table({"key B's probe", "TTFT median", "TTFT range", "cached tokens (median)", "prompt tokens (median)"});
  const auto row = [&](const std::string& label, AuditProbe AuditTrial::*probe) {
    const Summary s = summarize(ttfts(trials, probe));
    table.add_row({label, format_ms(s.n > 0 ? s.median : -1),
                   s.n > 0 ? std::format("{}–{} ms", format_number(s.min), format_number(s.max)) : "n/a",
                   count_text(median_of(trials, probe, &AuditProbe::cached_tokens)),
                   count_text(median_of(trials, probe, &AuditProbe::prompt_tokens))});
  };
  row("primed: the prompt key A just sent", &AuditTrial::primed);
  row("miss: a fresh prompt", &AuditTrial::miss);
  out << table.render() << "\n";
  out << std::format("timing: Kolmogorov–Smirnov D = {:.3f}, p = {:.3g} (alpha {:g}): {}\n", v.ks.d, v.ks.p_value,
                     r.options.alpha, v.by_timing ? "the two samples differ" : "no difference shown");
  if (v.cached_tokens_reported) {
    out << std::format("cached tokens: the primed probe reported reuse (a quarter of its prompt or more beyond its trial's "
                       "miss probe) in {} of {} trials\n",
                       v.trials_primed_reused, n);
  } else {
    out << "cached tokens: not reported by the server (the verdict rests on timing)\n";
  }
  out << "\nverdict: " << (v.shared ? "shared" : "isolated") << "\n";
  if (v.by_cached_tokens) {
    out << std::format("  the server reported reusing key A's prompt for key B in {} of {} trials\n",
                       v.trials_primed_reused, n);
  }
  if (v.by_timing) {
    out << std::format("  key B's time to first token tells the prompts key A sent from fresh ones (p = {:.3g} < {:g})\n",
                       v.ks.p_value, r.options.alpha);
  }
  if (!v.shared) {
    out << "  key B could not tell which prompts key A had sent: "
        << (v.cached_tokens_reported ? "no clear majority of trials reported reuse, and the " : "the ")
        << "time to first token does not separate them\n";
  }
}

}  // namespace prefixd::bench
