#include "bench/target.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "bench/prompts.h"

namespace prefixd::bench {

Target::Target(TargetKind kind, std::string name, std::string binary, std::vector<std::string> extra_args)
    : kind_(kind),
      name_(std::move(name)),
      binary_(std::move(binary)),
      extra_args_(std::move(extra_args)) {}

std::vector<std::string> Target::arguments(const ServerSettings& s, int port) const {
  std::vector<std::string> args;
  if (kind_ == TargetKind::prefixd) {
    constexpr long long kMiB = 1024 * 1024;
    const long long budget = static_cast<long long>(s.cache_mib - std::max(0, s.snapshot_mib)) * kMiB;
    args = {"serve",
            "--model", s.model_path,
            "--host", "127.0.0.1",
            "--port", std::to_string(port),
            "--ctx-size", std::to_string(s.ctx_size),
            "--parallel", std::to_string(s.parallel),
            "--threads", std::to_string(s.threads),
            "--prompt-cache-capacity-bytes", std::to_string(budget),
            "--metrics"};
    if (s.snapshot_mib > 0) {
      args.insert(args.end(), {"--prompt-cache-snapshot-capacity-bytes", std::to_string(s.snapshot_mib * kMiB)});
    }
    if (!s.disk_path.empty()) {
      args.insert(args.end(), {"--cache-disk-path", s.disk_path});
    } else if (std::ranges::none_of(extra_args_, [](const std::string& a) { return a.starts_with("--cache-disk"); })) {
      // A workload without a disk directory keeps no disk tier: the default one, in the user's
      // cache directory, would carry one run's prefixes into the next.
      args.push_back("--no-cache-disk");
    }
  } else {
    // Flash attention is each server's default (llama-server's auto turns it on for the CPU, as
    // prefixd's default does), so both run the same attention kernels as a new user gets them.
    // --fit off: nothing is resized behind our back. The web UI is irrelevant to a benchmark.
    args = {"-m", s.model_path,
            "--host", "127.0.0.1",
            "--port", std::to_string(port),
            "-c", std::to_string(s.ctx_size),
            "-np", std::to_string(s.parallel),
            "-t", std::to_string(s.threads),
            "--cache-ram", std::to_string(s.cache_mib),
            "--fit", "off",
            "--no-webui",
            "--metrics"};
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  return args;
}

ServerLaunch Target::launch(const ServerSettings& settings, int port, const std::string& log_path,
                                   std::chrono::seconds startup_limit) const {
  ServerLaunch launch;
  launch.binary = binary_;
  launch.args = arguments(settings, port);
  launch.log_path = log_path;
  launch.startup_limit = startup_limit;
  // Either server's environment variables would silently change what is measured.
  launch.strip_env_prefixes = {"PREFIXD_", "LLAMA_ARG_", "LLAMA_API_KEY", "LLAMA_CACHE"};
  return launch;
}

const char* Target::evaluated_counter() const {
  return kind_ == TargetKind::prefixd ? "prefixd_prompt_tokens_fed_total" : "llamacpp:prompt_tokens_total";
}

const char* Target::warmup_counter() const {
  return kind_ == TargetKind::prefixd ? "prefixd_warmup_tokens_total" : nullptr;
}

const char* Target::running_gauge() const {
  return kind_ == TargetKind::prefixd ? "prefixd_requests_running" : nullptr;
}

const char* Target::context_note() const {
  if (kind_ == TargetKind::prefixd) {
    const auto has = [&](std::string_view flag) { return std::ranges::find(extra_args_, flag) != extra_args_.end(); };
    if (has("--no-kv-unified") || (has("--deterministic") && !has("--kv-unified"))) {
      return "a KV stream of ctx cells per sequence (requests and device-tier holders) on a dense model "
             "(--no-kv-unified, or --deterministic), else one unified pool";
    }
    return "one unified KV pool: running requests and the device-tier cache share all ctx cells";
  }
  return std::ranges::find(extra_args_, "--kv-unified") != extra_args_.end()
             ? "one unified KV buffer (--kv-unified): every slot may use any of the ctx cells"
             : "split evenly among the slots (-c / -np cells each; no --kv-unified when -np is given)";
}

std::string Target::version() const {
  // popen runs a shell; the binary path comes from our own command line, quoted for the shell.
  std::string quoted = "'";
  for (char c : binary_) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string command = quoted + " --version 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return "";
  std::string output;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), static_cast<int>(buffer.size()), pipe.get()) != nullptr) output += buffer.data();
  // llama-server prints its version after a few lines of backend loading notes.
  std::istringstream lines(output);
  std::string line;
  std::string first;
  while (std::getline(lines, line)) {
    if (line.starts_with("version:") || line.starts_with("prefixd ")) return line;
    if (first.empty()) first = line;
  }
  return first;
}

const std::vector<std::string>& target_names() {
  static const std::vector<std::string> kNames = {"prefixd", "llama-server", "llama-server-kvu", "prefixd-nocache",
                                                  "prefixd-baseline"};
  return kNames;
}

Target make_target(const std::string& name, const TargetSources& sources) {
  if (name == "llama-server" || name == "llama-server-kvu") {
    const std::string bin = find_executable(sources.llama_server_bin);
    if (bin.empty()) {
      throw std::runtime_error("llama-server not found ('" + sources.llama_server_bin +
                               "'); install llama.cpp-tools or pass --llama-server PATH");
    }
    std::vector<std::string> args = split_args(sources.llama_args);
    // With -np given, llama-server splits the context among the slots unless told to share it.
    if (name == "llama-server-kvu") args.emplace_back("--kv-unified");
    return Target(TargetKind::llama_server, name, bin, std::move(args));
  }
  std::vector<std::string> args = split_args(sources.prefixd_args);
  if (const auto variant = sources.variants.find(name); variant != sources.variants.end()) {
    const auto extra = split_args(variant->second);
    args.insert(args.end(), extra.begin(), extra.end());
  } else if (name == "prefixd-nocache") {
    args.emplace_back("--no-cache-prompt");
  } else if (name == "prefixd-baseline") {
    const auto extra = split_args(sources.baseline_args);
    args.insert(args.end(), extra.begin(), extra.end());
  } else if (name != "prefixd") {
    throw std::invalid_argument("unknown target '" + name +
                                "' (prefixd, llama-server, llama-server-kvu, prefixd-nocache, prefixd-baseline, or a --variant name)");
  }
  return Target(TargetKind::prefixd, name, prefixd_binary(sources.prefixd_bin), std::move(args));
}

std::string prefixd_binary(const std::string& chosen) {
  if (!chosen.empty()) return chosen;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    throw std::runtime_error("cannot tell where this program is (/proc/self/exe: " + error.message() +
                             ") to start the prefixd beside it; pass --prefixd-bin PATH");
  }
  const std::filesystem::path beside = self.parent_path() / "prefixd";
  if (::access(beside.c_str(), X_OK) != 0) {
    throw std::runtime_error("no prefixd beside this program (" + beside.string() + "); pass --prefixd-bin PATH");
  }
  return beside.string();
}

std::pair<std::string, std::string> parse_variant(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) throw std::invalid_argument("--variant wants NAME=ARGS, got '" + spec + "'");
  std::string name = spec.substr(0, eq);
  // A variant named like a built-in target would silently change what that name means.
  if (std::ranges::find(target_names(), name) != target_names().end()) {
    throw std::invalid_argument("--variant " + name + ": that name is a built-in target");
  }
  return {std::move(name), spec.substr(eq + 1)};
}

std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

double prometheus_value(const std::string& text, const std::string& metric) {
  std::istringstream lines(text);
  std::string line;
  double total = 0;
  bool found = false;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() == '#' || !line.starts_with(metric)) continue;
    const char next = line.size() > metric.size() ? line[metric.size()] : '\0';
    if (next != ' ' && next != '{') continue;  // a longer metric name with this one as its prefix
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      total += std::stod(line.substr(space + 1));
      found = true;
    } catch (const std::exception&) {
      // Not a number: skip the line rather than fail the run over a metrics quirk.
    }
  }
  return found ? total : -1;
}

}  // namespace prefixd::bench
