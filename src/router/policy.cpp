#include "router/policy.h"

#include <stdexcept>
#include <string>

namespace prefixd::router {

const char* reason_name(Reason reason) {
  switch (reason) {
    case Reason::session: return "session";
    case Reason::prefix: return "prefix";
    case Reason::load: return "load";
    case Reason::round_robin: return "round_robin";
  }
  return "load";
}

Policy parse_policy(std::string_view name) {
  if (name == "prefix") return Policy::prefix;
  if (name == "round_robin") return Policy::round_robin;
  throw std::invalid_argument("unknown routing policy '" + std::string(name) + "' (prefix or round_robin)");
}

const char* policy_name(Policy policy) { return policy == Policy::prefix ? "prefix" : "round_robin"; }

Choice choose_by_prefix(std::span<const Candidate> candidates, std::int32_t block_size, double load_weight,
                        std::size_t rotation) {
  const auto score = [&](const Candidate& c) {
    return static_cast<double>(c.matched_blocks * block_size) - load_weight * static_cast<double>(c.load);
  };
  const std::size_t n = candidates.size();
  // Visiting from `rotation` makes the first of equal candidates, the one kept, rotate.
  const Candidate* best = &candidates[rotation % n];
  for (std::size_t i = 1; i < n; ++i) {
    const Candidate& c = candidates[(rotation + i) % n];
    const double a = score(c), b = score(*best);
    if (a > b || (a == b && c.load < best->load)) best = &c;
  }
  const std::int64_t matched = best->matched_blocks * block_size;
  return Choice{.backend = best->backend, .reason = matched > 0 ? Reason::prefix : Reason::load, .matched_tokens = matched};
}

}  // namespace prefixd::router
