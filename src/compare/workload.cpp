// The workload registry and what every generator shares.
#include "compare/workload.h"

#include <algorithm>
#include <stdexcept>

namespace prefixd::compare {

const Arm* Workload::arm(const std::string& arm_name) const {
  const auto it = std::ranges::find(arms, arm_name, &Arm::name);
  return it == arms.end() ? nullptr : &*it;
}

const std::vector<std::string>& workload_names() {
  static const std::vector<std::string> kNames = {"resend", "agent", "multisession", "shared", "edit", "restart"};
  return kNames;
}

Workload make_workload(const std::string& name, const WorkloadParams& params) {
  Workload w;
  if (name == "resend") {
    w = make_resend(params);
  } else if (name == "agent") {
    w = make_agent(params);
  } else if (name == "multisession") {
    w = make_multisession(params);
  } else if (name == "shared") {
    w = make_shared(params);
  } else if (name == "edit") {
    w = make_edit(params);
  } else if (name == "restart") {
    w = make_restart(params);
  } else {
    throw std::invalid_argument("unknown workload '" + name + "'");
  }
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

}  // namespace prefixd::compare
