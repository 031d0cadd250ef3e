// The soak test's verdict, summary, results file and plot (bench/soak.h).
#include <algorithm>
#include <array>
#include <format>

#include "bench/soak.h"

namespace prefixd::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / kMiB; }
double mib_of_kb(long kb) { return static_cast<double>(kb) / 1024.0; }

struct RssFigures {
  long min_kb = -1;
  long max_kb = -1;
  long final_kb = -1;
  long second_half_start_kb = -1;  // the first sample of the run's second half
};

RssFigures rss_figures(const RssSeries& rss) {
  RssFigures f;
  if (rss.empty()) return f;
  f.min_kb = std::ranges::min(rss, {}, [](const auto& s) { return s.second; }).second;
  f.max_kb = std::ranges::max(rss, {}, [](const auto& s) { return s.second; }).second;
  f.final_kb = rss.back().second;
  const double half = rss.back().first / 2;
  const auto it = std::ranges::find_if(rss, [half](const auto& s) { return s.first >= half; });
  f.second_half_start_kb = it->second;
  return f;
}

// The highest resident set the run saw: the samples, and VmHWM for what fell between them.
std::uint64_t peak_bytes(const SoakRun& run) {
  const long kb = std::max(rss_figures(run.rss).max_kb, run.hwm_kb);
  return kb < 0 ? 0 : static_cast<std::uint64_t>(kb) * 1024;
}

using Counts = std::array<std::array<int, kSoakOutcomes>, kSoakKinds>;

Counts count(const SoakRun& run) {
  Counts c{};
  for (const SoakEvent& e : run.events) c[static_cast<std::size_t>(e.kind)][static_cast<std::size_t>(e.outcome)] += 1;
  return c;
}

int total_of(const Counts& c, SoakOutcome outcome) {
  int n = 0;
  for (std::size_t k = 0; k < c.size(); ++k) {
    if (k != static_cast<std::size_t>(SoakKind::reset)) n += c[k][static_cast<std::size_t>(outcome)];
  }
  return n;
}

// What the gnuplot string literal needs escaped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

const char* soak_outcome_name(SoakOutcome outcome) {
  switch (outcome) {
    case SoakOutcome::completed: return "completed";
    case SoakOutcome::cancelled: return "cancelled";
    case SoakOutcome::rejected: return "rejected";
    case SoakOutcome::unexpected: return "unexpected";
  }
  return "?";
}

const char* soak_kind_name(SoakKind kind) {
  switch (kind) {
    case SoakKind::chat: return "chat";
    case SoakKind::chat_stream: return "chat, streamed";
    case SoakKind::chat_cancel: return "chat, hung up mid-stream";
    case SoakKind::completion: return "text completion";
    case SoakKind::invalid: return "bad request";
    case SoakKind::reset: return "cache reset";
    case SoakKind::constrained: return "chat, JSON schema";
  }
  return "?";
}

std::vector<std::string> soak_failures(const SoakRun& run) {
  std::vector<std::string> out;
  if (!run.server_alive) out.push_back("the server died during the run");
  if (!run.idle_after) out.push_back("requests were still running or queued 60 s after the clients stopped");
  if (run.rss.empty()) out.push_back("no RSS sample was taken");
  const std::uint64_t peak = peak_bytes(run);
  if (peak > run.budget.limit()) {
    out.push_back(std::format("RSS peaked at {:.0f} MiB, over the limit of {:.0f} MiB", mib(peak), mib(run.budget.limit())));
  }
  const Counts c = count(run);
  if (total_of(c, SoakOutcome::completed) == 0) out.push_back("no request completed");
  int shown = 0;
  int unexpected = 0;
  for (const SoakEvent& e : run.events) {
    if (e.outcome != SoakOutcome::unexpected) continue;
    ++unexpected;
    if (shown++ < 5) out.push_back(std::format("unexpected at {:.1f} s ({}): {}", e.end_s, soak_kind_name(e.kind), e.detail));
  }
  if (unexpected > shown) out.push_back(std::format("… {} unexpected in all", unexpected));
  return out;
}

std::string soak_summary(const SoakRun& run, const SoakOptions& o) {
  const Counts c = count(run);
  const RssFigures r = rss_figures(run.rss);
  const int requests = total_of(c, SoakOutcome::completed) + total_of(c, SoakOutcome::cancelled) +
                       total_of(c, SoakOutcome::rejected) + total_of(c, SoakOutcome::unexpected);
  std::string s = std::format("# prefixd-bench soak\n\n{} clients for {} s against `prefixd serve --model {}` "
                              "(--parallel {} --ctx-size {} --threads {}{}), seed {}; run {:.0f} s.\n\n",
                              o.clients, o.duration.count(), o.model_path, o.parallel, o.ctx_size, o.threads,
                              o.prefixd_args.empty() ? "" : " " + o.prefixd_args, o.seed, run.seconds);
  s += std::format("Requests: {} ({:.2f}/s): {} completed, {} cancelled by the client, {} rejected as they "
                   "should be, {} unexpected; {} cache resets.\n\n",
                   requests, run.seconds > 0 ? requests / run.seconds : 0.0, total_of(c, SoakOutcome::completed),
                   total_of(c, SoakOutcome::cancelled), total_of(c, SoakOutcome::rejected),
                   total_of(c, SoakOutcome::unexpected),
                   c[static_cast<std::size_t>(SoakKind::reset)][0] + c[static_cast<std::size_t>(SoakKind::reset)][3]);
  s += "| kind | completed | cancelled | rejected | unexpected |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (int k = 0; k < kSoakKinds; ++k) {
    const auto& row = c[static_cast<std::size_t>(k)];
    s += std::format("| {} | {} | {} | {} | {} |\n", soak_kind_name(static_cast<SoakKind>(k)), row[0], row[1], row[2], row[3]);
  }
  const SoakBudget& b = run.budget;
  s += std::format("\nRSS (sampled every second): min {:.0f} MiB, max {:.0f} MiB, final {:.0f} MiB; VmHWM {:.0f} MiB; "
                   "second half of the run: {:+.0f} MiB.\n",
                   mib_of_kb(r.min_kb), mib_of_kb(r.max_kb), mib_of_kb(r.final_kb), mib_of_kb(run.hwm_kb),
                   mib_of_kb(r.final_kb - r.second_half_start_kb));
  s += std::format("Limit: {:.0f} MiB = host cache budgets {:.0f} MiB (host tier {} MiB + checkpoints {} MiB) + KV "
                   "context {:.0f} MiB + model file {:.0f} MiB + margin {:.0f} MiB.\n",
                   mib(b.limit()), mib(b.cache_bytes), o.cache_mib - o.snapshot_mib, o.snapshot_mib, mib(b.kv_context_bytes),
                   mib(b.model_bytes), mib(b.margin_bytes));
  if (run.cache_stats.is_object()) {
    const auto& st = run.cache_stats;
    const nlohmann::json::json_pointer host_bytes("/tiers/host/bytes");
    s += std::format("Cache at the end: {} hits, {} misses, {} tokens reused, host tier {:.1f} MiB.\n", st.value("hits", 0),
                     st.value("misses", 0), st.value("tokens_reused", 0),
                     st.contains(host_bytes) ? mib(st.at(host_bytes).get<std::uint64_t>()) : 0.0);
  }
  const auto failures = soak_failures(run);
  s += failures.empty() ? "\nPASS\n" : "\nFAIL\n";
  for (const auto& f : failures) s += "- " + f + "\n";
  return s;
}

nlohmann::json soak_results(const SoakRun& run, const SoakOptions& o) {
  nlohmann::json j;
  j["options"] = {{"model", o.model_path}, {"seconds", o.duration.count()}, {"clients", o.clients}, {"seed", o.seed},
                  {"parallel", o.parallel}, {"ctx_size", o.ctx_size}, {"threads", o.threads}, {"cache_mib", o.cache_mib},
                  {"snapshot_mib", o.snapshot_mib}, {"margin_mib", o.margin_mib},
                  {"reset_every_s", o.reset_every.count()}, {"prefixd_args", o.prefixd_args}};
  j["budget"] = {{"cache_bytes", run.budget.cache_bytes}, {"kv_context_bytes", run.budget.kv_context_bytes},
                 {"model_bytes", run.budget.model_bytes}, {"margin_bytes", run.budget.margin_bytes},
                 {"limit_bytes", run.budget.limit()}};
  const Counts c = count(run);
  nlohmann::json by_kind = nlohmann::json::object();
  for (int k = 0; k < kSoakKinds; ++k) {
    nlohmann::json row = nlohmann::json::object();
    for (int x = 0; x < kSoakOutcomes; ++x) row[soak_outcome_name(static_cast<SoakOutcome>(x))] = c[static_cast<std::size_t>(k)][static_cast<std::size_t>(x)];
    by_kind[soak_kind_name(static_cast<SoakKind>(k))] = row;
  }
  j["requests"] = by_kind;
  const RssFigures r = rss_figures(run.rss);
  j["rss_kb"] = {{"min", r.min_kb}, {"max", r.max_kb}, {"final", r.final_kb}, {"hwm", run.hwm_kb}};
  j["rss"] = run.rss;
  nlohmann::json events = nlohmann::json::array();
  for (const SoakEvent& e : run.events) {
    nlohmann::json event = {e.end_s, soak_kind_name(e.kind), soak_outcome_name(e.outcome)};
    if (!e.detail.empty()) event.push_back(e.detail);
    events.push_back(std::move(event));
  }
  j["events"] = std::move(events);
  j["seconds"] = run.seconds;
  j["server_alive"] = run.server_alive;
  j["idle_after"] = run.idle_after;
  j["cache_stats"] = run.cache_stats;
  j["failures"] = soak_failures(run);
  j["pass"] = soak_failures(run).empty();
  return j;
}

SoakPlot soak_plot(const SoakRun& run, const std::string& data_dir, const std::string& png_path) {
  SoakPlot p;
  p.rss_data = "# seconds rss_mib\n";
  for (const auto& [t, kb] : run.rss) p.rss_data += std::format("{:.1f} {:.1f}\n", t, mib_of_kb(kb));
  std::vector<const SoakEvent*> events;
  for (const SoakEvent& e : run.events) events.push_back(&e);
  std::ranges::sort(events, {}, [](const SoakEvent* e) { return e->end_s; });
  p.requests_data = "# seconds completed cancelled rejected unexpected (cumulative)\n0 0 0 0 0\n";
  std::array<int, kSoakOutcomes> cumulative{};
  std::string resets;
  for (const SoakEvent* e : events) {
    if (e->kind == SoakKind::reset) {
      resets += std::format("set arrow from {:.1f}, graph 0 to {:.1f}, graph 1 nohead dt 2 lw 1.5 lc rgb \"#d04040\" front\n", e->end_s, e->end_s);
      continue;
    }
    cumulative[static_cast<std::size_t>(e->outcome)] += 1;
    p.requests_data += std::format("{:.2f} {} {} {} {}\n", e->end_s, cumulative[0], cumulative[1], cumulative[2], cumulative[3]);
  }
  const std::string rss = quoted(data_dir + "/rss.dat");
  const std::string requests = quoted(data_dir + "/requests.dat");
  const SoakBudget& b = run.budget;
  p.script = std::format(
      "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {{\n  set terminal pngcairo size 1100,800 noenhanced font \"sans,10\"\n"
      "}} else {{\n  set terminal png size 1100,800 noenhanced\n}}\n"
      "set output {}\nset multiplot layout 2,1 title \"prefixd-bench soak: resident memory and requests (dashed red lines: cache resets)\"\n"
      "set grid\nset key top left opaque\nset xlabel \"seconds\"\nset xrange [0:*]\n{}"
      "set ylabel \"RSS (MiB)\"\nset yrange [0:{:.0f}]\n"
      "plot {} using 1:2 with lines lw 2 title \"RSS\", {:.1f} with lines dt 2 lw 2 title \"limit ({:.0f} MiB)\", "
      "{:.1f} with lines dt 4 title \"model + KV context + host cache budgets\"\n"
      "set ylabel \"requests (cumulative)\"\nset yrange [0:*]\n"
      "plot {} using 1:2 with lines lw 2 title \"completed\", '' using 1:3 with lines lw 2 title \"cancelled by the client\", "
      "'' using 1:4 with lines lw 2 title \"rejected (bad requests)\", '' using 1:5 with lines lw 2 title \"unexpected\"\n"
      "unset multiplot\n",
      quoted(png_path), resets, mib(b.limit()) * 1.35, rss, mib(b.limit()), mib(b.limit()),
      mib(b.cache_bytes + b.kv_context_bytes + b.model_bytes), requests);
  return p;
}

}  // namespace prefixd::bench
