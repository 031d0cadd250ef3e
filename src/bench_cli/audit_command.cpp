// `prefixd-bench audit`: options in, bench::run_audit (bench/audit.h) out, the report on stdout.
#include <iostream>
#include <memory>

#include "bench/audit.h"
#include "bench_cli/commands.h"
#include "router/backend.h"

namespace prefixd::bench_cli {

std::function<int()> add_audit_command(CLI::App& app) {
  struct Parsed {
    bench::AuditOptions audit;
    std::string url;
    int timeout_s = 600;
    bool json = false;
  };
  auto p = std::make_shared<Parsed>();
  bench::AuditOptions& o = p->audit;
  CLI::App* cmd = app.add_subcommand(
      "audit", "Audit a running server's cache isolation: can key B tell which prompts key A just sent, from "
               "its time to first token or the cached tokens it is told? (docs/operator-guide.md, \"Auditing isolation\")");
  cmd->add_option("--url", p->url, "The server, http://HOST:PORT")->required();
  cmd->add_option("--key-a", o.key_a, "API key of the principal that sends each prompt first (empty: no key)")
      ->envname("PREFIXD_AUDIT_KEY_A");
  cmd->add_option("--key-b", o.key_b, "API key of the principal that probes for it (empty: no key)")
      ->envname("PREFIXD_AUDIT_KEY_B");
  cmd->add_option("--trials", o.trials, "Trials: one prompt key A sends, then key B's two probes")
      ->capture_default_str()->check(CLI::Range(2, 100000));
  cmd->add_option("--prompt-tokens", o.prompt_tokens,
                  "Length of each random prompt in tokens (words per token are measured on the server first)")
      ->capture_default_str()->check(CLI::Range(16, 1 << 22));
  cmd->add_option("--alpha", o.alpha, "Significance level of the timing test")
      ->capture_default_str()->check(CLI::Range(1e-12, 0.5));
  CLI::Option* seed = cmd->add_option("--seed", o.seed, "Seed of the prompts and the probe order (default: random, printed)");
  cmd->add_option("--model", o.model, "Model to name in the requests (default: the first GET /v1/models lists)");
  cmd->add_option("--request-timeout", p->timeout_s, "Seconds one request may take")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  cmd->add_flag("--json", p->json, "Print the report as JSON (progress still goes to stderr)");
  return [p, seed]() {
    try {
      const router::BackendAddress address = router::parse_backend_url(p->url);
      p->audit.host = address.host;
      p->audit.port = address.port;
    } catch (const std::invalid_argument&) {
      std::cerr << "prefixd-bench audit: error: --url '" << p->url << "' is not http://HOST:PORT (https is not supported)\n";
      return 1;
    }
    // A fresh seed per run by default: prompts a server has already seen would be cached for
    // either key and read as sharing.
    if (seed->count() == 0) p->audit.seed = bench::unpredictable_seed();
    p->audit.request_timeout = std::chrono::seconds(p->timeout_s);
    try {
      const bench::AuditReport report = bench::run_audit(p->audit, std::cerr);
      if (p->json) {
        std::cout << bench::audit_json(report).dump(2) << "\n";
      } else {
        bench::print_audit(report, std::cout);
      }
      return 0;
    } catch (const bench::AuditFailure& failure) {
      std::cerr << "prefixd-bench audit: error: " << failure.what() << "\n";
      return failure.exit_status();
    }
  };
}

}  // namespace prefixd::bench_cli
