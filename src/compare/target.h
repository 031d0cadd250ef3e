// prefixd compare — a server under test: how to start it with settings equivalent to the other's,
// and which of its counters says how many prompt tokens it evaluated.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bench/server_process.h"

namespace prefixd::compare {

// What both servers get, equal: model, total context, slots, threads and host cache budget.
struct ServerSettings {
  std::string model_path;
  int ctx_size = 4096;
  int parallel = 1;
  int threads = 1;
  int cache_mib = 8192;  // prefixd --prompt-cache-capacity-bytes = llama-server --cache-ram (MiB)
};

enum class TargetKind { prefixd, llama_server };

class Target {
 public:
  Target(TargetKind kind, std::string binary, std::vector<std::string> extra_args);

  TargetKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const std::string& binary() const { return binary_; }
  // The command line arguments (after argv[0]) for these settings.
  std::vector<std::string> arguments(const ServerSettings& settings, int port) const;
  bench::ServerLaunch launch(const ServerSettings& settings, int port, const std::string& log_path,
                             std::chrono::seconds startup_limit) const;
  // The Prometheus counter of prompt tokens the server ran through the model.
  const char* evaluated_counter() const;
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

// `name` if it contains a '/', else the first match on PATH; empty when there is none.
std::string find_executable(const std::string& name);

// The value of a counter in Prometheus text (the sum over its label sets); -1 when absent.
double prometheus_value(const std::string& text, const std::string& metric);

}  // namespace prefixd::compare
