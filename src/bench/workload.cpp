// The workload registry and what every generator shares.
#include "bench/workload.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace prefixd::bench {

const Arm* Workload::arm(const std::string& arm_name) const {
  const auto it = std::ranges::find(arms, arm_name, &Arm::name);
  return it == arms.end() ? nullptr : &*it;
}

const std::vector<std::string>& workload_names() {
  static const std::vector<std::string> kNames = {"resend", "agent", "multisession", "shared", "edit",
                                                  "restart", "grow", "thrash", "burst", "unique", "chat",
                                                  "prepared", "toolloop", "interleave"};
  return kNames;
}

const std::vector<std::string>& compare_workload_names() {
  static const std::vector<std::string> kNames = {"resend", "agent", "multisession", "shared", "edit", "restart", "toolloop",
                                                  "interleave"};
  return kNames;
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
      {"prepared", make_prepared}, {"toolloop", make_toolloop}, {"interleave", make_interleave}};
  const auto it = kGenerators.find(name);
  if (it == kGenerators.end()) throw std::invalid_argument("unknown workload '" + name + "'");
  Workload w = it->second(params);
  w.ctx_size = context_for_workload(w);
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
