// prefixd bench — a server under test: how to start it with settings equivalent to the other's,
// and which of its counters says how many prompt tokens it evaluated.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/server_process.h"

namespace prefixd::bench {

// What both servers get, equal: model, total context, slots, threads and host cache budget.
struct ServerSettings {
  std::string model_path;
  int ctx_size = 4096;
  int parallel = 1;
  int threads = 1;
  int cache_mib = 8192;  // prefixd --prompt-cache-capacity-bytes = llama-server --cache-ram (MiB)
  // > 0: this much of cache_mib goes to prefixd's checkpoints (--prompt-cache-snapshot-capacity-bytes)
  // and the rest to its host tier, so that prefixd's host memory in all equals llama-server's
  // --cache-ram, whose prompt cache holds its checkpoints too. 0: prefixd's own default, outside
  // cache_mib (models reused by trimming take no checkpoints).
  int snapshot_mib = 0;
  // Non-empty: prefixd's disk tier (--cache-disk-path). llama-server has no equivalent: its prompt
  // cache (--cache-ram) is memory, and it writes a slot to disk only when a client calls
  // /slots?action=save (--slot-save-path), so it gets nothing.
  std::string disk_path;
};

enum class TargetKind { prefixd, llama_server };

class Target {
 public:
  Target(TargetKind kind, std::string name, std::string binary, std::vector<std::string> extra_args);

  TargetKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const std::string& binary() const { return binary_; }
  const std::vector<std::string>& extra_args() const { return extra_args_; }
  // The command line arguments (after argv[0]) for these settings.
  std::vector<std::string> arguments(const ServerSettings& settings, int port) const;
  ServerLaunch launch(const ServerSettings& settings, int port, const std::string& log_path,
                             std::chrono::seconds startup_limit) const;
  // The Prometheus counter of prompt tokens the server ran through the model.
  const char* evaluated_counter() const;
  // The counter of tokens run through the model after replies, off the request path, that no
  // request's own count includes (prefixd's warm-up); nullptr when the server has none.
  const char* warmup_counter() const;
  // The counter of requests holding a sequence now (a warm-up holds one too); nullptr: none.
  const char* running_gauge() const;
  // Whether ServerSettings::disk_path gives this server a disk tier (prefixd).
  bool has_disk_tier() const { return kind_ == TargetKind::prefixd; }
  const char* kind_name() const { return kind_ == TargetKind::prefixd ? "prefixd" : "llama-server"; }
  // How the server uses --ctx-size/-c with several slots, for the report.
  const char* context_note() const;
  // `BINARY --version`, first line; empty when it does not answer.
  std::string version() const;

 private:
  TargetKind kind_;
  std::string name_;
  std::string binary_;
  std::vector<std::string> extra_args_;
};

// Where the servers come from and what is added to their command lines.
struct TargetSources {
  std::string prefixd_bin;                      // empty: the prefixd beside this program (prefixd_binary)
  std::string llama_server_bin = "llama-server";  // a path, or a name looked up on PATH
  std::string prefixd_args;                     // appended to every prefixd target's `serve`
  std::string llama_args;                       // appended to llama-server's arguments
  std::string baseline_args = "--no-cache-prompt";  // what makes prefixd-baseline differ from prefixd
  std::map<std::string, std::string> variants;  // more prefixd targets: name → what they add to prefixd_args
};

// The targets a run may name, in the order the help lists them: prefixd; llama-server;
// llama-server-kvu (llama-server --kv-unified: its slots share one KV buffer); prefixd-nocache (prefixd serve --no-cache-prompt); prefixd-baseline (prefixd plus the
// baseline arguments, e.g. another --prompt-cache-device-cells); and any name of sources.variants.
const std::vector<std::string>& target_names();
// Throws std::invalid_argument for an unknown name, std::runtime_error when the binary is missing.
Target make_target(const std::string& name, const TargetSources& sources);

// "NAME=ARGS" (a --variant option) split at its first '='; throws std::invalid_argument when the
// name is empty, has no '=' after it, or is one of target_names().
std::pair<std::string, std::string> parse_variant(const std::string& spec);

// `chosen` when it is not empty, else the `prefixd` in the folder of the running program
// (prefixd-bench is built and installed beside it), as a resolved path so that a recorded command
// line can be rerun by hand. Throws std::runtime_error, naming --prefixd-bin, when there is none.
std::string prefixd_binary(const std::string& chosen);

// `name` if it contains a '/', else the first match on PATH; empty when there is none.
std::string find_executable(const std::string& name);

// The value of a counter in Prometheus text (the sum over its label sets); -1 when absent.
double prometheus_value(const std::string& text, const std::string& metric);

}  // namespace prefixd::bench
