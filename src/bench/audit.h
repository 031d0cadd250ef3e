// prefixd bench — `prefixd-bench audit`: can one principal (API key) of a live server learn which
// prompts another principal just sent?
//
// The prompt-cache audit of Gu et al., "Auditing Prompt Caching in Language Model APIs" (ICML
// 2025), plus the server's own account. Each trial makes a fresh random prompt P; key A sends P,
// then key B sends P (the primed probe) and a fresh prompt Q of the same length (the miss probe),
// in an order drawn from the seeded generator so that nothing systematic separates the two. Two
// kinds of evidence that B's requests reuse what A sent:
//   - timing: a two-sample Kolmogorov–Smirnov test on B's time to first token, primed against miss;
//   - cached tokens: the `usage.prompt_tokens_details.cached_tokens` each B probe reports, primed
//     against the miss probe of the same trial (the miss shares at most the chat template's
//     scaffolding with anything, which a server may well report as cached: so not against zero).
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/client.h"
#include "bench/kolmogorov_smirnov.h"

namespace prefixd::bench {

struct AuditOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string key_a;  // empty: no Authorization header
  std::string key_b;
  int trials = 30;
  int prompt_tokens = 512;  // the random text's length in tokens, measured on the server first
  double alpha = 0.001;     // the timing test's significance level
  std::uint64_t seed = 1;   // the same seed sends the same prompts in the same order
  std::string model;        // empty: the first model GET /v1/models lists (none if there is no such route)
  std::chrono::seconds request_timeout{600};
};

// Why the audit could not run: its message says what happened, its exit status which kind it was.
class AuditFailure : public std::runtime_error {
 public:
  enum class Kind { failed = 1, unreachable = 2, refused = 3 };
  AuditFailure(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }
  int exit_status() const { return static_cast<int>(kind_); }

 private:
  Kind kind_;
};

// What one request told the client. -1: not measured, or not reported by the server.
struct AuditProbe {
  double ttft_ms = -1;
  std::int64_t prompt_tokens = -1;
  std::int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens
  std::string outcome;              // prompt_cache.outcome (prefixd's own report)
  std::string tier;                 // prompt_cache.tier
};

struct AuditTrial {
  AuditProbe primer;  // key A sends P
  AuditProbe primed;  // then key B sends P
  AuditProbe miss;    // and key B sends Q, a fresh prompt of the same length
  bool primed_first = true;  // B sent P before Q
};

// The decision, a pure function of the trials:
//   - by cached tokens: in at least two thirds of the trials the primed probe reported reuse: more
//     cached tokens than its trial's miss probe, by at least a quarter of its prompt. (Random texts
//     from one word list often start with the same word or two, which a server caching short
//     prefixes reuses for either probe; a quarter of a prompt never matches by chance.)
//   - by timing: the Kolmogorov–Smirnov p-value of primed against miss times is below alpha.
// Either makes the verdict "shared", else "isolated".
struct AuditVerdict {
  bool shared = false;
  bool by_cached_tokens = false;
  bool by_timing = false;
  bool cached_tokens_reported = false;  // every B probe reported cached tokens
  int trials_primed_reused = 0;  // the primed probe reported reuse (above)
  KsResult ks;
};
AuditVerdict decide_audit(std::span<const AuditTrial> trials, double alpha);

struct AuditReport {
  std::string url;
  std::string model;  // empty: none was sent
  int prompt_tokens = 0;
  int prompt_words = 0;          // the words each prompt has, from the measured tokens per word
  double tokens_per_word = 0;    // measured; 0 when the server reports no prompt_tokens
  AuditOptions options;          // keys cleared
  std::vector<AuditTrial> trials;
  AuditVerdict verdict;
};

// 64 bits from std::random_device: the default seed, and the text of a prompt no earlier run sent.
std::uint64_t unpredictable_seed();

// Runs the audit against the server; progress (one line per trial) goes to `progress`. Throws
// AuditFailure when the server cannot be reached, refuses a key (401/403) or fails a request, and
// when key A's own first request of a trial's prompt reports reuse: the server has seen the
// audit's prompts before (the same seed against the same server), and fresh prompts are what
// every comparison rests on.
AuditReport run_audit(const AuditOptions& options, std::ostream& progress);

nlohmann::json audit_json(const AuditReport& report);
void print_audit(const AuditReport& report, std::ostream& out);

}  // namespace prefixd::bench
