// prefixd integration tests — the real `prefixd serve` binary as a child process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench/server_process.h"

namespace prefixd::testing {

struct ServerConfig {
  std::string model = PREFIXD_TINY_MODEL;  // empty: no --model (the test names the model otherwise)
  std::vector<std::string> extra_args;                       // appended after the standard flags
  std::vector<std::pair<std::string, std::string>> env;      // added to (or replacing in) the environment
  int parallel = 4;
  int ctx_size = 2048;
  int startup_seconds = 60;  // how long GET /health may take to answer
};

// Starts `PREFIXD_BINARY serve --model MODEL (default PREFIXD_TINY_MODEL) --host 127.0.0.1 --port P --ctx-size N
// --parallel N [extra args]` on a free loopback port through bench::ServerProcess, and waits until
// GET /health answers. The destructor stops it (SIGTERM, then SIGKILL after a grace period), reaps
// it and removes its log. Throws std::runtime_error, with the server's log, if it does not come up
// within `startup_seconds`.
class ServerProcess {
 public:
  explicit ServerProcess(ServerConfig config = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return process_->port(); }
  // A fresh client with generous timeouts; `api_key` adds the bearer header.
  std::unique_ptr<httplib::Client> client(const std::string& api_key = {}) const;
  // Everything the server wrote to stdout and stderr so far.
  std::string log() const;
  // The child's process id while it runs (-1 after it stopped): tests kill it with SIGKILL.
  pid_t pid() const { return process_->pid(); }
  // True while the child has not exited.
  bool running() { return process_->running(); }
  // Its exit status (128 + signal if killed) once running() has returned false; -1 before.
  int exit_status() const { return process_->exit_status(); }

 private:
  std::string log_path_;
  std::unique_ptr<bench::ServerProcess> process_;
};

using bench::pick_free_port;

// Posts JSON, returns {status, parsed body (discarded when not JSON)}.
struct JsonReply {
  int status = 0;
  nlohmann::json body;
  std::string raw;
};
JsonReply post_json(httplib::Client& client, const std::string& path, const nlohmann::json& body);
// The same with the body's keys in the order given (post_json's nlohmann::json sends them sorted):
// for requests whose key order is what the test is about.
JsonReply post_ordered_json(httplib::Client& client, const std::string& path, const nlohmann::ordered_json& body);
JsonReply get_json(httplib::Client& client, const std::string& path);

// The `data:` payloads of an SSE body, in order ("[DONE]" included as a string).
std::vector<std::string> sse_payloads(const std::string& body);
// The named events of an SSE body (`event:` then `data:`), in order: (name, parsed data).
std::vector<std::pair<std::string, nlohmann::json>> sse_events(const std::string& body);

// A metric's value from GET /metrics text; -1 when absent.
double metric_value(const std::string& metrics_text, const std::string& name);

// A shell command's exit status (-1 when it did not exit normally) and what it wrote to stdout
// (and to stderr where the command redirects it there).
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_shell(const std::string& command);

}  // namespace prefixd::testing
