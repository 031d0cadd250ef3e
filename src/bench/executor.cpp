#include "bench/executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <format>
#include <functional>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "bench/client.h"
#include "bench/disk_tier.h"
#include "bench/prompts.h"
#include "bench/gates.h"
#include "bench/live_server.h"
#include "bench/llama_log.h"
#include "bench/next_turn.h"
#include "bench/request.h"

namespace prefixd::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Clock::duration after_seconds(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Hands out steps in order to `concurrency` workers; a step waits for its `after` step (and its
// delay after that one's end), a barrier step for every earlier one, a step with an arrival time
// for that time, and a step `started` after another for that one's sending plus its delay.
class Dispatcher {
 public:
  explicit Dispatcher(const Workload& w)
      : w_(w), done_(w.steps.size(), false), sent_(w.steps.size()), finished_(w.steps.size()), origin_(Clock::now()) {}

  // The next step index once it may be sent, or -1 when none is left.
  int next() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (next_ >= static_cast<int>(w_.steps.size())) return -1;
    const int i = next_++;
    ready_.wait(lock, [&] { return may_start(i); });
    const Step& s = w_.steps[static_cast<std::size_t>(i)];
    std::optional<Clock::time_point> at;
    if (s.arrival_s >= 0) at = origin_ + after_seconds(s.arrival_s);
    if (s.started >= 0) {
      const Clock::time_point then = *sent_[static_cast<std::size_t>(s.started)] + after_seconds(s.start_delay_s);
      at = at ? std::max(*at, then) : then;
    }
    if (s.after >= 0 && s.after_delay_s > 0) {
      const Clock::time_point then = *finished_[static_cast<std::size_t>(s.after)] + after_seconds(s.after_delay_s);
      at = at ? std::max(*at, then) : then;
    }
    lock.unlock();
    // Other workers take the next steps meanwhile: an open-loop arrival never waits for a worker
    // as long as the workload has as many workers as requests can be in flight.
    if (at) std::this_thread::sleep_until(*at);
    {
      const std::lock_guard<std::mutex> relock(mutex_);
      sent_[static_cast<std::size_t>(i)] = Clock::now();
    }
    ready_.notify_all();
    return i;
  }
  void finish(int i) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_[static_cast<std::size_t>(i)] = true;
      finished_[static_cast<std::size_t>(i)] = Clock::now();
    }
    ready_.notify_all();
  }

 private:
  bool may_start(int i) const {
    const Step& s = w_.steps[static_cast<std::size_t>(i)];
    if (s.after >= 0 && !done_[static_cast<std::size_t>(s.after)]) return false;
    if (s.started >= 0 && !sent_[static_cast<std::size_t>(s.started)]) return false;
    if (s.barrier || s.restart_before) {
      for (int j = 0; j < i; ++j) {
        if (!done_[static_cast<std::size_t>(j)]) return false;
      }
    }
    return true;
  }

  const Workload& w_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<bool> done_;
  std::vector<std::optional<Clock::time_point>> sent_;
  std::vector<std::optional<Clock::time_point>> finished_;
  Clock::time_point origin_;
  int next_ = 0;
};

// What a perfectly deduplicating cache would hold after this workload (the distinct tokens of
// its prompts, as the server tokenizes them), next to what the server says it holds.
nlohmann::json sharing_facts(const BenchClient& client, const Workload& w) {
  std::vector<TokenIds> prompts;
  for (const auto& step : w.steps) {
    prompts.push_back(step.prompt.empty() ? client.chat_prompt_tokens(step.messages) : client.tokenize(step.prompt, true));
  }
  std::int64_t all = 0;
  for (const auto& p : prompts) all += static_cast<std::int64_t>(p.size());
  nlohmann::json facts = {{"prompt_trie_tokens", unique_prefix_tokens(prompts)}, {"prompt_tokens_total", all}};
  if (const auto stats = client.cache_stats()) facts["cache_stats"] = *stats;
  return facts;
}

// The bytes of the server log from `offset` on: what this run of this server wrote.
std::string log_from(const std::string& path, std::uintmax_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string text;
  text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return text;
}

std::uintmax_t log_size(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  return error ? 0 : size;
}

// What a server did for the workload besides answering, read before the gates send requests of
// their own: prefixd's warm-up tokens and checkpoints, llama-server's checkpoints from its log.
void record_state(nlohmann::json& out, const Target& target, LiveServer& server, const BenchClient& client,
                  const std::string& log_path, std::uintmax_t log_start,
                  const std::function<void(const std::string&)>& note) {
  constexpr auto kIdleLimit = std::chrono::seconds(30);
  if (!server.wait_idle(kIdleLimit) && server.running()) {
    note("still busy 30 s after the last reply; the warm-up count may be short");
  }
  if (const double warmup = server.warmup_counter(); warmup >= 0) {
    out["warmup"] = {{"metric", target.warmup_counter()}, {"tokens", warmup}};
  }
  if (const auto stats = client.cache_stats(); stats && stats->contains("snapshots")) {
    out["snapshots"] = stats->at("snapshots");
    out["snapshots"]["reuse"] = stats->value("reuse", "");
  }
  if (target.kind() == TargetKind::llama_server) {
    out["checkpoint_log"] = parse_llama_checkpoint_log(log_from(log_path, log_start)).to_json();
  }
}

// The disk tier of one target's run of a workload that asks for one: its scratch directory (the
// server's --cache-disk-path, kept over restarts, removed at the end) and what is measured around
// each step.
class DiskTierRun {
 public:
  using Note = std::function<void(const std::string&)>;

  explicit DiskTierRun(const std::string& parent) : dir_(parent) {}
  std::string path() const { return dir_.tier().string(); }

  // Before a step: the server idle and its write-behind done, so no request's time includes
  // another's writes and no restart cuts a queued write short.
  WriteBehind settle(LiveServer& server, const BenchClient& client, const Note& note) const {
    constexpr auto kIdleLimit = std::chrono::seconds(60);
    server.wait_idle(kIdleLimit);
    const WriteBehind w = wait_write_behind([&] { return client.cache_stats(); });
    if (!w.settled) note(std::format("disk tier: write-behind still busy after {:.0f} s; going on", w.seconds));
    return w;
  }

  // After a restart, before its request: the tier's files out of the page cache, as a reboot
  // leaves them, and the counters that request's reads are measured from.
  PageCacheDrop cool(const BenchClient& client) {
    const PageCacheDrop drop = drop_page_cache(dir_.tier());
    before_ = counters(client);
    return drop;
  }

  // After that request: what it read from disk, and the yardstick, the same number of bytes read
  // sequentially from one cold file on the same filesystem (once the request's own writes are done).
  nlohmann::json measure(LiveServer& server, const BenchClient& client, const Note& note) const {
    const DiskReads reads = reads_between(before_, counters(client));
    nlohmann::json out = {{"restore", reads.to_json()}};
    out["write_behind_after"] = settle(server, client, note).to_json();
    std::string line = std::format("disk tier: {} file(s), {:.1f} MiB restored in {:.3f} s ({:.0f} MiB/s)", reads.reads,
                                   static_cast<double>(reads.bytes) / kMiB, reads.seconds, reads.bytes_per_second() / kMiB);
    if (reads.bytes > 0) {
      try {
        const SequentialRead seq = sequential_read(dir_.probe_file(), reads.bytes);
        out["sequential_read"] = seq.to_json();
        line += std::format("; the same bytes read sequentially: {:.0f} MiB/s", seq.bytes_per_second() / kMiB);
      } catch (const std::exception& e) {
        out["sequential_read_error"] = e.what();
        line += std::string("; sequential read failed: ") + e.what();
      }
    }
    note(line);
    return out;
  }

  nlohmann::json to_json(const BenchClient& client) const {
    return {{"path", dir_.tier().string()}, {"counters", counters(client).to_json()}};
  }

 private:
  static constexpr double kMiB = 1024.0 * 1024.0;
  static DiskCounters counters(const BenchClient& client) {
    const auto stats = client.cache_stats();
    return stats ? disk_counters(*stats).value_or(DiskCounters{}) : DiskCounters{};
  }

  ScratchDir dir_;
  DiskCounters before_;
};

// A control step's answer: its status, how long it took, and its JSON body (or the raw text of
// one that is not JSON).
nlohmann::json control_record(const BenchClient& client, int i, const Step& step, double start_s) {
  const auto t0 = Clock::now();
  const HttpReply reply = client.post_raw(step.control, step.control_body.dump(), "application/json");
  nlohmann::json record = {{"step", i},
                           {"arm", step.arm},
                           {"control", step.control},
                           {"start_s", start_s},
                           {"ms", seconds_since(t0) * 1000.0},
                           {"status", reply.status}};
  auto body = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    record["reply_text"] = reply.body;
  } else {
    record["reply"] = std::move(body);
  }
  if (reply.status != 200) record["error"] = std::format("HTTP {}: {}", reply.status, error_message(reply.body));
  return record;
}

ServerSettings settings_for(const Target& target, const Workload& w, const RunConfig& config) {
  ServerSettings s = config.base;
  s.ctx_size = w.llama_ctx_size > 0 && target.kind() == TargetKind::llama_server ? w.llama_ctx_size : w.ctx_size;
  s.parallel = w.parallel;
  return s;
}

}  // namespace

nlohmann::json run_workload(const Target& target, const Workload& w, const RunConfig& config, std::ostream& progress) {
  for (const auto& s : w.steps) {
    if (s.continues >= 0 && s.after != s.continues) throw std::invalid_argument(w.name + ": a continued turn must wait for it");
    if (s.started >= 0 && (s.started >= static_cast<int>(&s - w.steps.data()) || w.concurrency < 2)) {
      throw std::invalid_argument(w.name + ": a step sent while another runs needs an earlier step and a second worker");
    }
  }
  if (w.concurrency > 1) {
    if (w.disk_tier) throw std::invalid_argument(w.name + ": a disk tier is measured on a sequential workload");
    for (const auto& s : w.steps) {
      if (s.restart_before) throw std::invalid_argument(w.name + ": restarts need a sequential workload");
    }
  }
  const std::string tag = std::format("[{} / {}]", w.name, target.name());
  nlohmann::json out = {{"target", target.name()}};
  const auto origin = Clock::now();
  std::mutex progress_lock;
  auto note = [&](const std::string& line) {
    const std::lock_guard<std::mutex> guard(progress_lock);
    progress << tag << " " << line << std::endl;  // std::endl: a long run should show it is alive
  };

  // Steps finished and what is left, estimated from the pace so far: a long run says when it ends.
  std::atomic<std::size_t> finished{0};
  auto left = [&] {
    const std::size_t done = ++finished;
    const double elapsed = seconds_since(origin);
    const double remaining = elapsed / static_cast<double>(done) * static_cast<double>(w.steps.size() - done);
    return done == w.steps.size() ? std::string(" [done]")
                                  : std::format(" [about {}m{:02}s left]", static_cast<int>(remaining) / 60,
                                                static_cast<int>(remaining) % 60);
  };

  std::vector<nlohmann::json> records(w.steps.size());
  // Per step, the messages it sent and the reply, for a later step that continues it. A step
  // that continues another also waits for it (Step::after), so the dispatcher's lock orders the
  // write before the read.
  std::vector<nlohmann::json> sent(w.steps.size());
  std::vector<CompletionResult> replies(w.steps.size());
  // Declared before the server, so its directory outlives every lifetime of the server.
  std::optional<DiskTierRun> disk;
  std::optional<LiveServer> server;
  const std::uintmax_t log_start = log_size(config.log_path);
  try {
    ServerSettings settings = settings_for(target, w, config);
    if (w.disk_tier && target.has_disk_tier()) {
      disk.emplace(config.disk_parent);
      settings.disk_path = disk->path();
    }
    server.emplace(target, settings, config.log_path, config.startup_limit, origin);
    out["command"] = server->command_line();
    note("started: " + server->command_line());

    Dispatcher dispatcher(w);
    std::mutex server_lock;  // restarts replace the server; sequential workloads only
    auto worker = [&] {
      for (int i = dispatcher.next(); i >= 0; i = dispatcher.next()) {
        const Step& step = w.steps[static_cast<std::size_t>(i)];
        int port = 0;
        nlohmann::json disk_facts;  // a restart's, on a target with a disk tier
        try {
          const std::lock_guard<std::mutex> guard(server_lock);
          if (disk) {
            const WriteBehind written = disk->settle(*server, BenchClient(server->port(), config.request_timeout), note);
            if (step.restart_before) disk_facts["write_behind"] = written.to_json();
          }
          if (step.restart_before) {
            note("restarting");
            server->restart();
          }
          port = server->port();
          if (disk && step.restart_before) {
            disk_facts["page_cache"] = disk->cool(BenchClient(port, config.request_timeout)).to_json();
          }
        } catch (const std::exception& e) {
          // A server that does not come back fails this step; the run goes on and reports it.
          records[static_cast<std::size_t>(i)] = {{"step", i}, {"arm", step.arm}, {"error", e.what()}};
          note(std::string("ERROR: ") + e.what());
          dispatcher.finish(i);
          continue;
        }
        const BenchClient client(port, config.request_timeout);
        const double start_s = seconds_since(origin);
        if (!step.control.empty()) {
          records[static_cast<std::size_t>(i)] = control_record(client, i, step, start_s);
          note(std::format("{}/{} {} {}: HTTP {}{}", i + 1, w.steps.size(), step.arm, step.control,
                           records[static_cast<std::size_t>(i)].value("status", 0), left()));
          dispatcher.finish(i);
          continue;
        }
        Step turn = step;
        std::int64_t history = -1;  // tokens of the conversation through the reply it continues
        if (step.continues >= 0) {
          const auto c = static_cast<std::size_t>(step.continues);
          if (!replies[c].ok() || !sent[c].is_array()) {
            records[static_cast<std::size_t>(i)] = {{"step", i}, {"arm", step.arm}, {"error", "the turn it continues failed"}};
            dispatcher.finish(i);
            continue;
          }
          turn.messages = next_turn_messages(sent[c], replies[c].tool_calls, replies[c].text, step.tool_result);
          history = conversation_tokens(client, through_reply(sent[c], replies[c].tool_calls, replies[c].text), step.tools);
        }
        const double sent_s = step.continues >= 0 ? seconds_since(origin) : start_s;
        const auto r = client.stream(step_path(turn), step_body(turn, {.max_tokens = step.max_tokens, .session = step.session}),
                                     0, std::chrono::milliseconds(static_cast<std::int64_t>(step.cancel_after_s * 1000)));
        sent[static_cast<std::size_t>(i)] = turn.messages;
        replies[static_cast<std::size_t>(i)] = r;
        records[static_cast<std::size_t>(i)] = request_record(i, step.arm, sent_s, r);
        if (step.continues >= 0) records[static_cast<std::size_t>(i)]["history_tokens"] = history;
        note(std::format("{}/{} {}: prompt {}, evaluated {}, cached {}{}, TTFT {:.0f} ms{}{}", i + 1, w.steps.size(),
                         step.arm, r.prompt_tokens, evaluated_tokens(r), cached_tokens(r),
                         r.tier.empty() ? "" : " (" + r.tier + ")", r.ttft_ms, r.ok() ? "" : " ERROR " + r.error, left()));
        if (!disk_facts.is_null()) {
          try {
            disk_facts.update(disk->measure(*server, client, note));
          } catch (const std::exception& e) {
            disk_facts["error"] = e.what();
            note(std::string("disk tier: ERROR ") + e.what());
          }
          records[static_cast<std::size_t>(i)]["disk"] = std::move(disk_facts);
        }
        dispatcher.finish(i);
      }
    };
    {
      std::vector<std::jthread> workers;
      for (int k = 0; k < std::max(1, w.concurrency); ++k) workers.emplace_back(worker);
    }  // joined here
    if (!server->running()) throw std::runtime_error("the server exited during the run; its log ends with:\n" + server->log_tail());

    const BenchClient client(server->port(), config.request_timeout);
    record_state(out, target, *server, client, config.log_path, log_start, note);
    if (disk) out["disk_tier"] = disk->to_json(client);
    if (w.measure_sharing) out["sharing"] = sharing_facts(client, w);
    const Step& gate_step = w.steps[static_cast<std::size_t>(w.gate_index())];
    // The gates replay a chat request; a raw-prompt workload has none to replay.
    if (config.gates && !gate_step.messages.empty()) {
      const int g = w.gate_index();
      const Step& step = gate_step;
      const auto& observed = records[static_cast<std::size_t>(g)];
      out["gates"] = run_gates(client, step.messages, step.session,
                               observed.value("first_piece", std::string()), step.tools);
      out["gates"]["step"] = g;
      // A run that forced a tool call (body_fields) took a first token the replays cannot: n/a.
      if (!step.body_fields.is_null()) out["gates"]["first_token"]["workload_equal"] = nullptr;
      note(std::format("gates: {}", gates_passed(out["gates"]) ? "pass" : "FAIL"));
    }
  } catch (const std::exception& e) {
    out["error"] = e.what();
    note(std::string("ERROR: ") + e.what());
  }
  nlohmann::json requests = nlohmann::json::array();
  nlohmann::json control = nlohmann::json::array();
  for (auto& r : records) {
    if (r.is_null()) continue;
    (r.contains("control") ? control : requests).push_back(std::move(r));
  }
  out["requests"] = std::move(requests);
  if (!control.empty()) out["control"] = std::move(control);
  if (server) {
    nlohmann::json rss = nlohmann::json::array();
    for (const auto& [t, kb] : server->rss()) rss.push_back({t, kb});
    out["rss"] = std::move(rss);
    out["peak_rss_kb"] = server->peak_kb();
    out["counter"] = {{"metric", target.evaluated_counter()}, {"evaluated", server->evaluated_counter()}};
    out["restarts"] = server->restarts();
    server.reset();
  }
  out["seconds"] = seconds_since(origin);
  return out;
}

void merge_repetition(nlohmann::json& into, nlohmann::json record, int rep) {
  for (auto& r : record["requests"]) r["rep"] = rep;
  if (record.contains("control")) {
    for (auto& r : record["control"]) r["rep"] = rep;
  }
  if (into.is_null()) {
    into = std::move(record);
    return;
  }
  const double offset = into.value("seconds", 0.0);
  for (auto& r : record["requests"]) into["requests"].push_back(std::move(r));
  if (record.contains("control")) {
    for (auto& r : record["control"]) into["control"].push_back(std::move(r));
  }
  for (const auto& sample : record.value("rss", nlohmann::json::array())) {
    into["rss"].push_back({sample[0].get<double>() + offset, sample[1]});
  }
  into["peak_rss_kb"] = std::max(into.value("peak_rss_kb", -1L), record.value("peak_rss_kb", -1L));
  const nlohmann::json::json_pointer evaluated("/counter/evaluated");
  if (into.contains(evaluated) && record.contains(evaluated)) {
    const double a = into.at(evaluated).get<double>();
    const double b = record.at(evaluated).get<double>();
    into[evaluated] = a < 0 || b < 0 ? -1.0 : a + b;
  }
  into["restarts"] = into.value("restarts", 0) + record.value("restarts", 0);
  into["seconds"] = offset + record.value("seconds", 0.0);
  if (!into.contains("gates") && record.contains("gates")) into["gates"] = record["gates"];
  if (!into.contains("sharing") && record.contains("sharing")) into["sharing"] = record["sharing"];
  // Warm-up tokens add up over repetitions like the requests' own counts; the checkpoint facts
  // are the state after one run, kept from the first.
  if (into.contains("warmup") && record.contains("warmup")) {
    into["warmup"]["tokens"] = into["warmup"].value("tokens", 0.0) + record["warmup"].value("tokens", 0.0);
  }
  for (const char* key : {"warmup", "snapshots", "checkpoint_log"}) {
    if (!into.contains(key) && record.contains(key)) into[key] = record[key];
  }
  if (record.contains("error") && !into.contains("error")) into["error"] = record["error"];
}

double measure_words_per_token(const Target& target, const RunConfig& config, std::ostream& progress) {
  ServerSettings settings = config.base;
  settings.ctx_size = 4096;
  settings.parallel = 1;
  LiveServer server(target, settings, config.log_path, config.startup_limit, Clock::now());
  const BenchClient client(server.port(), config.request_timeout);
  constexpr std::size_t kWords = 2000;
  const std::string text = make_text(0xca1b'0001, kWords);
  const auto reply = client.post_json("/tokenize", {{"content", text}, {"add_special", false}});
  const auto tokens = reply.at("tokens").size();
  if (tokens == 0) throw std::runtime_error("/tokenize returned no tokens");
  const double wpt = static_cast<double>(kWords) / static_cast<double>(tokens);
  progress << std::format("[calibrate / {}] {} words are {} tokens: {:.3f} words per token", target.name(), kWords, tokens, wpt)
           << std::endl;
  return wpt;
}

}  // namespace prefixd::bench
