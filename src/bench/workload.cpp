// The workload registry and what every generator shares.
#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <format>
#include <map>
#include <stdexcept>

#include "bench/text.h"

namespace prefixd::bench {

const Arm* Workload::arm(const std::string& arm_name) const {
  const auto it = std::ranges::find(arms, arm_name, &Arm::name);
  return it == arms.end() ? nullptr : &*it;
}

const std::vector<std::string>& workload_names() {
  static const std::vector<std::string> kNames = {"resend", "agent", "multisession", "shared", "edit",
                                                  "restart", "grow", "thrash", "burst", "unique", "chat",
                                                  "prepared", "toolloop", "interleave", "gsp", "mqa", "multiturn",
                                                  "preempt", "codeagent", "mooncake", "codecomplete", "sweep-1", "sweep-2", "sweep-4", "sweep-8", "sweep-16", "sweep-32"};
  return kNames;
}

const std::vector<std::string>& compare_workload_names() {
  static const std::vector<std::string> kNames = {"resend", "agent", "multisession", "shared", "edit", "restart", "toolloop",
                                                  "interleave", "gsp", "mqa", "multiturn", "preempt", "sweep"};
  return kNames;
}

const std::vector<int>& sweep_client_counts() {
  static const std::vector<int> kCounts = {1, 2, 4, 8, 16, 32};
  return kCounts;
}

std::string sweep_workload_name(int clients) { return std::format("sweep-{}", clients); }

std::vector<std::string> expand_workload_names(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& name : names) {
    if (name != "sweep") {
      out.push_back(name);
      continue;
    }
    for (const int clients : sweep_client_counts()) out.push_back(sweep_workload_name(clients));
  }
  return out;
}

std::vector<double> poisson_arrivals(std::uint64_t seed, int n, double rate) {
  if (!(rate > 0)) throw std::invalid_argument("a Poisson arrival rate must be positive");
  SeededRng rng(seed);
  std::vector<double> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    out.push_back(t);
    // Inverse transform: -ln(U) / rate is exponential with mean 1 / rate; 1 - U keeps U in (0, 1].
    t += -std::log(1.0 - uniform01(rng)) / rate;
  }
  return out;
}

const std::vector<std::string>& family_workload_names() {
  static const std::vector<std::string> kNames = {"chat", "agent", "edit", "multisession"};
  return kNames;
}

const std::vector<std::string>& bench_workload_names() {
  static const std::vector<std::string> kNames = {"resend", "grow", "shared", "thrash", "burst", "prepared"};
  return kNames;
}

Workload make_workload(const std::string& name, const WorkloadParams& params) {
  using Generator = Workload (*)(const WorkloadParams&);
  static const std::map<std::string, Generator> kGenerators = {
      {"resend", make_resend}, {"agent", make_agent}, {"multisession", make_multisession}, {"shared", make_shared},
      {"edit", make_edit},     {"restart", make_restart}, {"grow", make_grow},            {"thrash", make_thrash},
      {"burst", make_burst},   {"unique", make_unique},   {"chat", make_chat},
      {"prepared", make_prepared}, {"toolloop", make_toolloop}, {"interleave", make_interleave},
      {"gsp", make_gsp},       {"mqa", make_mqa},         {"multiturn", make_multiturn},
      {"preempt", make_preempt}, {"codeagent", make_codeagent},
      {"mooncake", make_mooncake}, {"codecomplete", make_codecomplete}};
  Workload w;
  if (const auto it = kGenerators.find(name); it != kGenerators.end()) {
    w = it->second(params);
  } else if (const auto sweep = std::ranges::find_if(sweep_client_counts(),
                                                      [&](int clients) { return sweep_workload_name(clients) == name; });
             sweep != sweep_client_counts().end()) {
    w = make_sweep(params, *sweep);
  } else {
    throw std::invalid_argument("unknown workload '" + name + "'");
  }
  if (w.own_context) {
    w.llama_ctx_size = context_for_workload(w);
  } else {
    w.ctx_size = context_for_workload(w);
  }
  return w;
}

int context_for_workload(const Workload& workload) {
  int longest = 0;
  for (const auto& step : workload.steps) longest = std::max(longest, step.planned_tokens + step.max_tokens);
  // 10% for the words-per-token estimate being off, and a few cells of slack.
  const int per_slot = longest + longest / 10 + 64;
  // At least two prompts' worth even with one slot: llama-server's one slot can then use all of
  // it, and prefixd (whose device tier keeps half the context by default) can keep one idle copy.
  const long total = static_cast<long>(std::max(workload.parallel, 2)) * per_slot;
  const long rounded = (std::max(total, 4096L) + 255) / 256 * 256;
  return static_cast<int>(rounded);
}

}  // namespace prefixd::bench
