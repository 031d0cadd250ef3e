#include "bench/route_bench.h"

#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <format>
#include <functional>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <httplib.h>

#include "bench/client.h"
#include "bench/prompts.h"
#include "bench/request.h"
#include "bench/server_process.h"
#include "bench/stats.h"
#include "bench/target.h"
#include "bench/workload.h"

namespace prefixd::bench {

namespace {

using nlohmann::json;

// The routers compared: the prefix policy reading the backends' blocks from their KV events, the
// same policy reading them from polled summaries, and round-robin. Without KV events, the first is
// left out.
struct Variant {
  const char* name;
  const char* policy;
  bool kv_events;
};
constexpr Variant kVariants[] = {{"prefix_events", "prefix", true}, {"prefix", "prefix", false},
                                 {"round_robin", "round_robin", false}};

std::string metrics_of(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(30));
  const auto res = client.Get("/metrics");
  if (!res || res->status != 200) throw std::runtime_error(std::format("GET /metrics on port {} failed", port));
  return res->body;
}

// Sums a counter over the backends.
double total(const std::vector<std::unique_ptr<ServerProcess>>& servers, const std::string& metric) {
  double sum = 0;
  for (const auto& s : servers) sum += std::max(0.0, prometheus_value(metrics_of(s->port()), metric));
  return sum;
}

// The workload's steps through one port: at most `concurrency` in flight, a step only after the
// one it follows (`after`) has finished, otherwise in order.
// `on_finished` (if any) is called with the number of steps finished so far after each one.
std::vector<CompletionResult> send_steps(const Workload& w, int port, const std::string& session_suffix,
                                         std::chrono::seconds timeout,
                                         const std::function<void(std::size_t)>& on_finished = {}) {
  const std::size_t n = w.steps.size();
  std::vector<CompletionResult> results(n);
  std::vector<char> sent(n, 0), finished(n, 0);
  std::mutex mutex;
  std::condition_variable changed;
  const auto worker = [&] {
    const BenchClient client(port, timeout);
    for (;;) {
      std::size_t pick = n;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] {
          pick = n;
          bool left = false;
          for (std::size_t i = 0; i < n; ++i) {
            if (sent[i]) continue;
            left = true;
            const int after = w.steps[i].after;
            if (after < 0 || finished[static_cast<std::size_t>(after)]) {
              pick = i;
              break;
            }
          }
          return pick < n || !left;
        });
        if (pick == n) return;
        sent[pick] = 1;
      }
      const Step& step = w.steps[pick];
      RequestOptions options{.max_tokens = step.max_tokens, .session = step.session + session_suffix};
      CompletionResult r = client.stream(step_path(step), step_body(step, options));
      std::size_t done = 0;
      {
        std::lock_guard lock(mutex);
        results[pick] = std::move(r);
        finished[pick] = 1;
        done = static_cast<std::size_t>(std::ranges::count(finished, 1));
      }
      changed.notify_all();
      if (on_finished) on_finished(done);
    }
  };
  std::vector<std::jthread> workers;
  for (int i = 0; i < std::max(1, w.concurrency); ++i) workers.emplace_back(worker);
  workers.clear();
  for (std::size_t i = 0; i < n; ++i) {
    if (!results[i].error.empty()) throw std::runtime_error(std::format("step {} failed: {}", i, results[i].error));
  }
  return results;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::ranges::sort(v);
  const auto at = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

}  // namespace

json run_route_bench(const RouteBenchOptions& options, std::ostream& progress) {
  const std::string bin = prefixd_binary(options.prefixd_bin);
  const Workload w = make_workload("multisession", WorkloadParams{.seed = options.seed, .scale = options.scale});

  std::vector<std::unique_ptr<ServerProcess>> backends;
  std::vector<std::string> backend_flags;
  for (int b = 0; b < options.backends; ++b) {
    ServerLaunch launch{.binary = bin, .log_path = std::format("{}/route-bench-backend-{}.log", options.log_dir, b),
                        .startup_limit = options.startup_limit};
    const int port = pick_free_port();
    launch.args = {"serve", "--model", options.model_path, "--host", "127.0.0.1", "--port", std::to_string(port),
                   "--ctx-size", std::to_string(w.ctx_size), "--parallel", std::to_string(w.parallel),
                   "--threads", std::to_string(options.threads), "--no-cache-disk"};
    if (options.kv_events) {
      launch.args.insert(launch.args.end(), {"--kv-events-endpoint", std::format("tcp://*:{}", pick_free_port()),
                                             "--kv-events-replay-endpoint", std::format("tcp://*:{}", pick_free_port())});
    }
    for (std::string& a : split_args(options.backend_args)) launch.args.push_back(std::move(a));
    progress << "starting backend " << b << " on port " << port << "\n";
    backends.push_back(std::make_unique<ServerProcess>(std::move(launch), port));
    backend_flags.insert(backend_flags.end(), {"--backend", std::format("http://127.0.0.1:{}", port)});
  }
  std::vector<Variant> variants;
  for (const Variant& v : kVariants) {
    if (options.kv_events || !v.kv_events) variants.push_back(v);
  }
  const std::size_t n_variants = variants.size();
  std::vector<std::unique_ptr<ServerProcess>> routers;
  for (const Variant& v : variants) {
    ServerLaunch launch{.binary = bin, .log_path = std::format("{}/route-bench-router-{}.log", options.log_dir, v.name),
                        .startup_limit = std::chrono::seconds(60)};
    const int port = pick_free_port();
    launch.args = {"route", "--host", "127.0.0.1", "--port", std::to_string(port), "--policy", v.policy,
                   "--summary-interval-ms", "200", "--health-interval-ms", "500", "--load-weight",
                   std::format("{}", options.load_weight), v.kv_events ? "--kv-events" : "--no-kv-events"};
    launch.args.insert(launch.args.end(), backend_flags.begin(), backend_flags.end());
    routers.push_back(std::make_unique<ServerProcess>(std::move(launch), port));
  }

  struct Totals {
    double fed = 0, warmup = 0, prompt = 0, cached = 0;
    std::vector<double> ttft;
    int runs = 0;
  };
  std::vector<Totals> totals(n_variants);
  json runs = json::array();
  for (int pair = 0; pair < options.pairs; ++pair) {
    for (std::size_t k = 0; k < n_variants; ++k) {
      const std::size_t p = pair % 2 == 0 ? k : n_variants - 1 - k;  // A B C, then C B A
      for (const auto& b : backends) {
        httplib::Client client("127.0.0.1", b->port());
        const auto res = client.Post("/v1/cache/reset", "{}", "application/json");
        if (!res || res->status != 200) throw std::runtime_error("POST /v1/cache/reset failed on a backend");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the router's next summary poll sees it
      const double fed0 = total(backends, "prefixd_prompt_tokens_fed_total");
      const double warm0 = total(backends, "prefixd_warmup_tokens_total");
      progress << std::format("run {}: {} ({} requests)\n", runs.size() + 1, variants[p].name, w.steps.size()) << std::flush;
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<CompletionResult> results =
          send_steps(w, routers[p]->port(), std::format("-run{}", runs.size()), options.request_timeout);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      Totals run;
      run.fed = total(backends, "prefixd_prompt_tokens_fed_total") - fed0;
      run.warmup = total(backends, "prefixd_warmup_tokens_total") - warm0;
      for (const CompletionResult& r : results) {
        run.prompt += static_cast<double>(std::max<std::int64_t>(0, r.prompt_tokens));
        run.cached += static_cast<double>(std::max<std::int64_t>(0, cached_tokens(r)));
        run.ttft.push_back(r.ttft_ms);
      }
      runs.push_back({{"policy", variants[p].name}, {"fed_tokens", run.fed}, {"warmup_tokens", run.warmup},
                      {"prompt_tokens", run.prompt}, {"cached_tokens", run.cached},
                      {"ttft_median_ms", percentile(run.ttft, 0.5)}, {"ttft_p90_ms", percentile(run.ttft, 0.9)},
                      {"seconds", seconds}});
      progress << "  " << runs.back().dump() << "\n";
      Totals& t = totals[p];
      t.fed += run.fed;
      t.warmup += run.warmup;
      t.prompt += run.prompt;
      t.cached += run.cached;
      t.ttft.insert(t.ttft.end(), run.ttft.begin(), run.ttft.end());
      ++t.runs;
    }
  }
  json out = {{"workload", "multisession"}, {"backends", options.backends}, {"parallel", w.parallel},
              {"concurrency", w.concurrency}, {"requests_per_run", w.steps.size()}, {"runs", runs}};
  if (options.kill_after > 0) {
    // Failover: the prefix router loses backend 0 mid-run. send_steps throws on any failed request.
    for (const auto& b : backends) {
      httplib::Client client("127.0.0.1", b->port());
      client.Post("/v1/cache/reset", "{}", "application/json");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    const double retries0 = prometheus_value(metrics_of(routers[0]->port()), "prefixd_router_retries_total");
    const auto kill_at = static_cast<std::size_t>(options.kill_after);
    const pid_t victim = backends[0]->pid();
    std::once_flag killed;
    progress << std::format("failover run: prefix, backend 0 killed after {} of {} requests\n", kill_at, w.steps.size())
             << std::flush;
    const std::vector<CompletionResult> results =
        send_steps(w, routers[0]->port(), "-failover", options.request_timeout, [&](std::size_t done) {
          if (done >= kill_at) std::call_once(killed, [&] { ::kill(victim, SIGKILL); });
        });
    double prompt = 0, cached = 0;
    for (const CompletionResult& r : results) {
      prompt += static_cast<double>(std::max<std::int64_t>(0, r.prompt_tokens));
      cached += static_cast<double>(std::max<std::int64_t>(0, cached_tokens(r)));
    }
    const double retries = prometheus_value(metrics_of(routers[0]->port()), "prefixd_router_retries_total") - retries0;
    out["failover"] = {{"requests", results.size()}, {"failed", 0}, {"killed_after", kill_at},
                       {"router_retries", retries}, {"hit_ratio", prompt > 0 ? cached / prompt : 0}};
    progress << "  " << out["failover"].dump() << "\n";
  }
  progress << "\n| policy | runs | prompt tokens fed by all backends (per run) | warm-up tokens (per run) | hit ratio "
              "(cached / prompt) | TTFT median | TTFT p90 |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  for (std::size_t p = 0; p < n_variants; ++p) {
    const Totals& t = totals[p];
    const double per = std::max(1, t.runs);
    const double hit = t.prompt > 0 ? t.cached / t.prompt : 0;
    out["policies"][variants[p].name] = {{"runs", t.runs}, {"fed_tokens_per_run", t.fed / per},
                                     {"warmup_tokens_per_run", t.warmup / per}, {"hit_ratio", hit},
                                     {"ttft_median_ms", percentile(t.ttft, 0.5)}, {"ttft_p90_ms", percentile(t.ttft, 0.9)}};
    progress << std::format("| {} | {} | {:.0f} | {:.0f} | {:.3f} | {} | {} |\n", variants[p].name, t.runs, t.fed / per,
                            t.warmup / per, hit, format_ms(percentile(t.ttft, 0.5)), format_ms(percentile(t.ttft, 0.9)));
  }
  if (!options.out_path.empty()) std::ofstream(options.out_path) << out.dump(2) << "\n";
  return out;
}

}  // namespace prefixd::bench
