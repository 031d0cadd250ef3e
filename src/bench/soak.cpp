#include "bench/soak.h"

#include <filesystem>
#include <format>
#include <fstream>
#include <mutex>
#include <thread>

#include "bench/client.h"
#include "bench/plots.h"
#include "bench/server_process.h"
#include "bench/soak_traffic.h"
#include "bench/target.h"

namespace prefixd::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point origin) { return std::chrono::duration<double>(Clock::now() - origin).count(); }

// The events of every client, appended as requests finish.
class EventLog {
 public:
  void add(SoakEvent event) {
    const std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  std::vector<SoakEvent> take() {
    const std::lock_guard lock(mutex_);
    return std::move(events_);
  }

 private:
  std::mutex mutex_;
  std::vector<SoakEvent> events_;
};

// Sends one request of the traffic and reports how it ended.
CompletionResult send(const BenchClient& client, const SoakRequest& request) {
  switch (request.kind) {
    case SoakKind::chat_stream:
    case SoakKind::chat_cancel:
      return client.stream(request.path, nlohmann::json::parse(request.body), request.cancel_after_reads);
    case SoakKind::invalid: {
      const HttpReply reply = client.post_raw(request.path, request.body, request.content_type);
      CompletionResult result;
      result.status = reply.status;
      result.text = reply.body;
      return result;
    }
    default:
      return client.complete(request.path, nlohmann::json::parse(request.body));
  }
}

// One client: requests back to back until `stop_at`, or until asked to stop (the server died).
void client_loop(std::stop_token stop, int id, const SoakOptions& options, int port, Clock::time_point origin,
                 Clock::time_point stop_at, EventLog& log) {
  SoakShape shape;
  shape.ctx_size = options.ctx_size;
  SoakTraffic traffic(options.seed, id, shape);
  const BenchClient client(port, options.request_timeout);
  while (!stop.stop_requested() && Clock::now() < stop_at) {
    const SoakRequest request = traffic.next();
    const CompletionResult result = send(client, request);
    SoakEvent event{.end_s = seconds_since(origin), .kind = request.kind};
    event.outcome = classify(request, result, event.detail);
    traffic.answered(request, result);
    log.add(std::move(event));
    // No answer at all: the server is gone or overwhelmed; retrying in a tight loop would only
    // pile up failures (and sockets) until the main thread notices.
    if (result.status == 0 && !result.cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Requests running or queued, from /metrics; -1 when the server does not answer.
double requests_in_server(int port) {
  const HttpReply reply = BenchClient(port, std::chrono::seconds(30)).get_raw("/metrics");
  if (reply.status != 200) return -1;
  const double running = prometheus_value(reply.body, "prefixd_requests_running");
  const double queued = prometheus_value(reply.body, "prefixd_requests_queued");
  return running < 0 || queued < 0 ? -1 : running + queued;
}

// Waits until the server runs no request (a cancelled stream's request is ended by the server
// at its next step), at most `limit`.
bool wait_idle(int port, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (requests_in_server(port) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

std::uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<std::uint64_t>(n);
}

}  // namespace

int run_soak(const SoakOptions& options, std::ostream& out, std::ostream& progress) {
  fs::create_directories(options.out_dir);
  const std::string log_path = options.server_log.empty() ? (fs::path(options.out_dir) / "server.log").string() : options.server_log;
  fs::remove(log_path);
  TargetSources sources;
  sources.prefixd_bin = options.prefixd_bin;
  sources.prefixd_args = options.prefixd_args;
  const Target target = make_target("prefixd", sources);
  const ServerSettings settings{.model_path = options.model_path,
                                .ctx_size = options.ctx_size,
                                .parallel = options.parallel,
                                .threads = options.threads,
                                .cache_mib = options.cache_mib,
                                .snapshot_mib = options.snapshot_mib};
  const int port = pick_free_port();
  progress << "soak: starting " << options.model_path << " (log " << log_path << ")\n";
  const auto origin = Clock::now();
  ServerProcess server(target.launch(settings, port, log_path, options.startup_timeout), port);

  SoakRun run;
  std::mutex rss_lock;
  {
    const RssSampler sampler(server.pid(), origin, run.rss, rss_lock, std::chrono::seconds(1));
    const BenchClient control(port, std::chrono::seconds(60));
    const auto stats = control.cache_stats();
    const auto kv_per_token = stats ? stats->value("kv_bytes_per_token", std::uint64_t{0}) : 0;
    run.budget = SoakBudget{.cache_bytes = static_cast<std::uint64_t>(options.cache_mib) << 20,
                            .kv_context_bytes = kv_per_token * static_cast<std::uint64_t>(options.ctx_size),
                            .model_bytes = file_bytes(options.model_path),
                            .margin_bytes = static_cast<std::uint64_t>(options.margin_mib) << 20};
    progress << std::format("soak: {} clients for {} s; RSS limit {:.0f} MiB\n", options.clients, options.duration.count(),
                            static_cast<double>(run.budget.limit()) / (1 << 20));

    EventLog log;
    const auto stop_at = Clock::now() + options.duration;
    {
      std::vector<std::jthread> clients;
      for (int i = 0; i < options.clients; ++i) {
        clients.emplace_back(client_loop, i, std::cref(options), port, origin, stop_at, std::ref(log));  // jthread passes its stop_token first
      }
      // Cache resets come from here, between the clients' requests, and a line of progress a minute.
      auto next_reset = options.reset_every.count() > 0 ? Clock::now() + options.reset_every : Clock::time_point::max();
      auto next_report = Clock::now() + std::chrono::minutes(1);
      while (Clock::now() < stop_at && server.running()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (Clock::now() >= next_reset) {
          next_reset += options.reset_every;
          SoakEvent event{.kind = SoakKind::reset};
          try {
            control.post_json("/v1/cache/reset", nlohmann::json::object());
          } catch (const std::exception& e) {
            event.outcome = SoakOutcome::unexpected;
            event.detail = std::string("cache reset: ") + e.what();
          }
          event.end_s = seconds_since(origin);
          log.add(std::move(event));
        }
        if (Clock::now() >= next_report) {
          next_report += std::chrono::minutes(1);
          const ProcMemory m = read_proc_memory(server.pid());
          progress << std::format("soak: {:.0f} s, RSS {:.0f} MiB\n", seconds_since(origin),
                                  static_cast<double>(m.rss_kb) / 1024.0);
        }
      }
      if (!server.running()) {
        for (auto& client : clients) client.request_stop();
      }
    }  // the clients finish their last requests and join
    run.seconds = seconds_since(origin);
    run.events = log.take();
    run.server_alive = server.running();
    if (run.server_alive) {
      run.idle_after = wait_idle(port, std::chrono::seconds(60));
      run.hwm_kb = read_proc_memory(server.pid()).hwm_kb;
      try {
        run.cache_stats = control.get_json("/v1/cache/stats");
      } catch (const std::exception&) {
      }
    }
  }

  const nlohmann::json results = soak_results(run, options);
  std::ofstream(fs::path(options.out_dir) / "soak.json") << results.dump(1) << "\n";
  const fs::path data_dir = fs::absolute(options.out_dir) / "soak-plots";
  fs::create_directories(data_dir);
  const fs::path png = fs::absolute(options.out_dir) / "soak.png";
  const SoakPlot plot = soak_plot(run, data_dir.string(), png.string());
  std::ofstream(data_dir / "rss.dat") << plot.rss_data;
  std::ofstream(data_dir / "requests.dat") << plot.requests_data;
  std::ofstream(data_dir / "soak.gp") << plot.script;
  std::string why;
  const bool plotted = run_gnuplot(data_dir / "soak.gp", why);

  std::string summary = soak_summary(run, options);
  summary += plotted ? std::format("plot: {}\n", png.string()) : std::format("no plot: {}\n", why);
  if (!run.server_alive) summary += "server log (end):\n" + server.log_tail() + "\n";
  std::ofstream(fs::path(options.out_dir) / "soak.md") << summary;
  out << summary;
  return soak_failures(run).empty() ? 0 : 1;
}

}  // namespace prefixd::bench
