#include "bench/report_tokens.h"

#include <algorithm>
#include <format>
#include <map>
#include <utility>

#include "bench/report_cells.h"

namespace prefixd::bench {
namespace {

constexpr std::size_t kExcessRows = 20;  // per workload and target: enough to see the pattern

std::int64_t count_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? static_cast<std::int64_t>(it->get<double>()) : -1;
}

std::string first_llama_server(const nlohmann::json& results) {
  for (const auto& name : server_names(results)) {
    if (server_kind(results, name) == "llama-server") return name;
  }
  return "";
}

std::vector<std::string> prefixd_servers(const nlohmann::json& results) {
  std::vector<std::string> out;
  for (const auto& name : server_names(results)) {
    if (server_kind(results, name) == "prefixd") out.push_back(name);
  }
  return out;
}

// Why a side cannot be judged on its counts; empty when it can.
std::string unusable(const std::string& who, const TokenCount& c) {
  if (c.answered == 0) return who + " did not run";
  if (c.failed > 0) return std::format("{}: {} failure(s)", who, c.failed);
  if (c.counts_missing) return who + ": some request did not report its count";
  return "";
}

std::string mib_of_bytes(const nlohmann::json& j, const char* key) {
  const std::int64_t bytes = count_of(j, key);
  return bytes < 0 ? "n/a" : std::format("{:.2f}", static_cast<double>(bytes) / (1 << 20));
}

std::string mib_cell(double mib) { return mib < 0 ? "n/a" : std::format("{:.2f}", mib); }

bool gate_asked(const nlohmann::json& results) {
  return results.value("options", nlohmann::json::object()).value("token_gate", false);
}

std::string tokens_table(const nlohmann::json& results, const std::string& llama) {
  const bool gate = gate_asked(results);
  Table table({"workload", "target", "requests' own", "warm-up", "own + warm-up", llama.empty() ? "llama-server" : llama,
               "÷", gate ? "gate: no more than llama-server" : "no more than llama-server"});
  for (const auto& v : token_verdicts(results)) {
    const std::string warmup = v.prefixd.warmup_reported ? std::to_string(v.prefixd.warmup) : "not reported";
    std::string verdict = v.pass ? "✓" : "✗";
    if (gate && v.gated) verdict += v.pass ? " pass" : " FAIL";
    if (gate && !v.gated) verdict += " (a variant: not gated)";
    if (!v.why.empty()) verdict += " (" + v.why + ")";
    table.add_row({v.workload, v.target, std::to_string(v.prefixd.fed), warmup, std::to_string(v.prefixd.total()),
                   v.llama.answered > 0 ? std::to_string(v.llama.fed) : "n/a",
                   count_ratio_cell(static_cast<double>(v.prefixd.total()), static_cast<double>(v.llama.fed)), verdict});
  }
  return table.render();
}

bool any_checkpoints(const nlohmann::json& results) {
  for (const auto& w : list_at(results, "workloads")) {
    for (const auto& [name, record] : w.value("targets", nlohmann::json::object()).items()) {
      if (record.contains("snapshots") && record.at("snapshots").value("reuse", "") == "checkpoints") return true;
      if (record.contains("checkpoint_log") && count_of(record.at("checkpoint_log"), "created") > 0) return true;
    }
  }
  return false;
}

std::string checkpoint_tables(const nlohmann::json& results, const std::string& llama) {
  Table ours({"workload", "target", "reuse", "checkpoints held", "MiB held", "saved", "restores",
              "refused: diverged / evicted / namespace"});
  Table theirs({"workload", "checkpoints created", "MiB created", "MiB each (largest)", "superseded", "erased",
                "restored", "prompt cache at the end: prompts / MiB / checkpoints"});
  bool silent = false;  // a llama-server log without a single checkpoint line
  for (const auto& w : list_at(results, "workloads")) {
    const std::string name = w.value("name", "");
    for (const auto& target : prefixd_servers(results)) {
      const auto& record = target_of(w, target);
      if (!record.contains("snapshots")) continue;
      const auto& s = record.at("snapshots");
      const auto refusals = s.value("refusals", nlohmann::json::object());
      ours.add_row({name, target, s.value("reuse", "?"), std::to_string(count_of(s, "entries")), mib_of_bytes(s, "bytes"),
                    std::to_string(count_of(s, "saved")), std::to_string(count_of(s, "restores")),
                    std::format("{} / {} / {}", count_of(refusals, "diverged"), count_of(refusals, "evicted"),
                                count_of(refusals, "namespace"))});
    }
    const auto& record = target_of(w, llama);
    if (!record.contains("checkpoint_log")) continue;
    const auto& c = record.at("checkpoint_log");
    silent = silent || (count_of(c, "created") == 0 && count_of(c, "cache_prompts") < 0);
    theirs.add_row({name, std::to_string(count_of(c, "created")), mib_cell(c.value("created_mib", -1.0)),
                    mib_cell(c.value("largest_mib", -1.0)), std::to_string(count_of(c, "superseded")),
                    std::to_string(count_of(c, "erased")), std::to_string(count_of(c, "restored")),
                    count_of(c, "cache_prompts") < 0
                        ? "no listing"
                        : std::format("{} / {} / {}", count_of(c, "cache_prompts"), mib_cell(c.value("cache_mib", -1.0)),
                                      count_of(c, "cache_checkpoints"))});
  }
  std::string out = "prefixd's checkpoints after each workload (`GET /v1/cache/stats`, `snapshots`; held = in host "
                    "memory at the end, within `--prompt-cache-snapshot-capacity-bytes`):\n\n" +
                    ours.render() + "\n";
  if (!llama.empty()) {
    out += llama + "'s context checkpoints, from its log over the workload (`created context checkpoint … size = X MiB`; "
                   "a superseded one is replaced by a new one at the same position; its slots keep up to "
                   "`--ctx-checkpoints` each, outside `--cache-ram`; the prompt cache's last `cache state` listing, "
                   "whose MiB include whole prompt states):\n\n" +
           theirs.render() + "\n";
    if (silent) out += "Some llama-server log has no checkpoint line: llama-server prints them at verbosity 4 (`--llama-args \"-lv 4\"`).\n\n";
  }
  return out;
}

std::string excess_tables(const nlohmann::json& results, const std::string& llama) {
  std::string out;
  for (const auto& target : prefixd_servers(results)) {
    Table table({"workload", "step", "repetition", "arm", "prompt tokens", target, llama});
    std::size_t rows = 0;
    std::string more;
    for (const auto& w : list_at(results, "workloads")) {
      const auto excess = requests_evaluating_more(w, target, llama);
      for (std::size_t i = 0; i < excess.size() && i < kExcessRows; ++i) {
        const auto& e = excess[i];
        table.add_row({w.value("name", ""), std::to_string(e.step + 1), std::to_string(e.rep + 1), e.arm,
                       std::to_string(e.prompt), std::to_string(e.a), std::to_string(e.b)});
        ++rows;
      }
      if (excess.size() > kExcessRows) {
        more += std::format(" {}: {} more not shown.", w.value("name", ""), excess.size() - kExcessRows);
      }
    }
    out += rows == 0 ? std::format("No request where {} evaluated more prompt tokens than {}.\n\n", target, llama)
                     : std::format("Requests where {} evaluated more prompt tokens than {} (their own counts; step "
                                   "numbers from 1):{}\n\n",
                                   target, llama, more) +
                           table.render() + "\n";
  }
  return out;
}

}  // namespace

TokenCount token_count(const nlohmann::json& record) {
  TokenCount c;
  if (record.contains("error")) ++c.failed;
  for (const auto& r : list_at(record, "requests")) {
    if (r.contains("error")) {
      ++c.failed;
      continue;
    }
    ++c.answered;
    const std::int64_t e = count_of(r, "evaluated");
    if (e < 0) c.counts_missing = true;
    c.fed += std::max<std::int64_t>(0, e);
  }
  if (record.contains("warmup")) {
    const std::int64_t w = count_of(record.at("warmup"), "tokens");
    c.warmup_reported = w >= 0;
    c.warmup = std::max<std::int64_t>(0, w);
  }
  return c;
}

std::string server_kind(const nlohmann::json& results, const std::string& name) {
  for (const auto& s : list_at(results, "servers")) {
    if (s.value("name", "") == name && s.contains("kind")) return s.value("kind", "");
  }
  // Results files written before servers carried their kind: the built-in names say it.
  if (name == "llama-server") return "llama-server";
  return name.starts_with("prefixd") ? "prefixd" : "";
}

// Whether the gate judges `name`: every prefixd target of a results file written before servers
// said so, else what the run recorded (prefixd's default configuration, not a --variant).
bool token_gated(const nlohmann::json& results, const std::string& name) {
  for (const auto& s : list_at(results, "servers")) {
    if (s.value("name", "") == name && s.contains("token_gated")) return s.value("token_gated", true);
  }
  return true;
}

std::vector<TokenVerdict> token_verdicts(const nlohmann::json& results) {
  std::vector<TokenVerdict> out;
  const std::string llama = first_llama_server(results);
  if (llama.empty()) return out;
  for (const auto& w : list_at(results, "workloads")) {
    for (const auto& target : prefixd_servers(results)) {
      TokenVerdict v{.workload = w.value("name", ""),
                     .target = target,
                     .prefixd = token_count(target_of(w, target)),
                     .llama = token_count(target_of(w, llama))};
      v.why = unusable(target, v.prefixd);
      if (v.why.empty()) v.why = unusable(llama, v.llama);
      v.pass = v.why.empty() && v.prefixd.total() <= v.llama.fed;
      v.gated = token_gated(results, target);
      if (v.why.empty() && !v.prefixd.warmup_reported) v.why = "warm-up not reported";
      out.push_back(std::move(v));
    }
  }
  return out;
}

bool token_gate_passed(const nlohmann::json& results) {
  if (!gate_asked(results)) return true;
  const auto verdicts = token_verdicts(results);
  // Asked for, but nothing to judge: no llama-server, or no gated prefixd target, ran.
  if (std::ranges::none_of(verdicts, &TokenVerdict::gated)) return false;
  return std::ranges::all_of(verdicts, [](const TokenVerdict& v) { return v.pass || !v.gated; });
}

std::vector<RequestExcess> requests_evaluating_more(const nlohmann::json& w, const std::string& a, const std::string& b) {
  std::map<std::pair<int, int>, const nlohmann::json*> theirs;
  for (const auto& r : list_at(target_of(w, b), "requests")) {
    if (!r.contains("error")) theirs[{r.value("rep", 0), r.value("step", -1)}] = &r;
  }
  std::vector<RequestExcess> out;
  for (const auto& r : list_at(target_of(w, a), "requests")) {
    const auto it = theirs.find({r.value("rep", 0), r.value("step", -1)});
    if (r.contains("error") || it == theirs.end()) continue;
    const std::int64_t mine = count_of(r, "evaluated");
    const std::int64_t other = count_of(*it->second, "evaluated");
    if (mine < 0 || other < 0 || mine <= other) continue;
    out.push_back({.step = r.value("step", -1),
                   .rep = r.value("rep", 0),
                   .arm = r.value("arm", ""),
                   .prompt = count_of(r, "prompt_tokens"),
                   .a = mine,
                   .b = other});
  }
  return out;
}

std::string render_token_section(const nlohmann::json& results, const ReportStyle& style) {
  bool reported = false;
  for (const auto& w : list_at(results, "workloads")) {
    for (const auto& [name, record] : w.value("targets", nlohmann::json::object()).items()) {
      reported = reported || record.contains("warmup") || record.contains("checkpoint_log");
    }
  }
  if (!reported) return "";
  const std::string llama = first_llama_server(results);
  std::string out = heading(style, 2, "Prompt tokens evaluated, warm-up included");
  out += "After a reply prefixd feeds the template's end-of-turn tokens off the request path (its warm-up), so the "
         "next turn can resume after them. Those tokens run through the model like any prompt token, so they count "
         "here: requests' own = Σ `timings.prompt_n`; warm-up = `prefixd_warmup_tokens_total` over the workload "
         "(after its last reply, before the correctness gates).";
  if (gate_asked(results)) {
    out += std::format(" Gate: prefixd as a user runs it (the `prefixd` target; a `--variant` is shown, not gated) "
                       "must evaluate no more prompt tokens, warm-up included, than {} on "
                       "every workload: **{}**.",
                       llama.empty() ? "llama-server" : llama, token_gate_passed(results) ? "PASS" : "FAIL");
  }
  out += "\n\n" + tokens_table(results, llama) + "\n";
  if (any_checkpoints(results)) out += checkpoint_tables(results, llama);
  if (!llama.empty()) out += excess_tables(results, llama);
  return out;
}

}  // namespace prefixd::bench
