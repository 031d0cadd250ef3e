// The family runs' pure parts: the chat workload, llama-server's checkpoint log lines, prompt
// tokens with prefixd's warm-up, the token gate, named docs sections, prefixd variants and the
// host-memory split. No model, no server.
#include <gtest/gtest.h>

#include <set>

#include "bench/executor.h"
#include "bench/llama_log.h"
#include "bench/report.h"
#include "bench/report_tokens.h"
#include "bench/target.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

WorkloadParams params() { return {.seed = 7, .scale = 1.0, .words_per_token = 0.7, .reps = 2, .cold_reps_long = 3}; }

std::string content(const Step& s, std::size_t i) { return s.messages.at(i).at("content").get<std::string>(); }

TEST(BenchFamilyWorkloads, ChatHasTurnsResendEditAndASecondSession) {
  const Workload w = make_workload("chat", params());
  ASSERT_EQ(w.steps.size(), 2u * 11u) << "6 turns, a resend, an edit, 3 turns of a second session; per round";
  EXPECT_EQ(w.parallel, 1);
  const auto& s = w.steps;
  // Turns 1–6 grow one conversation by a user and an assistant message each.
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(s[static_cast<std::size_t>(t)].messages.size(), static_cast<std::size_t>(2 + 2 * t)) << t;
    EXPECT_EQ(s[static_cast<std::size_t>(t)].session, "chat-0-first");
  }
  EXPECT_EQ(s[5].messages[2]["role"], "assistant") << "assistant turns come from the client";
  EXPECT_EQ(s[6].arm, "resend turn 6");
  EXPECT_EQ(s[6].messages, s[5].messages) << "the resend is byte for byte the last turn";
  // The edit: system, turns 1–2 as they were, then turn 3's question with its first half kept.
  const Step& edit = s[7];
  EXPECT_EQ(edit.arm, "edit turn 3");
  ASSERT_EQ(edit.messages.size(), 6u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(edit.messages[i], s[5].messages[i]) << i;
  EXPECT_NE(content(edit, 5), content(s[5], 5));
  EXPECT_NE(content(edit, 5).find(", or rather "), std::string::npos);
  // The second session shares only the system prompt.
  for (std::size_t i = 8; i < 11; ++i) {
    EXPECT_EQ(s[i].session, "chat-0-second");
    EXPECT_EQ(s[i].messages[0], s[0].messages[0]);
  }
  EXPECT_NE(s[8].messages[1], s[0].messages[1]);
  EXPECT_EQ(s[8].arm, "second session turn 1");
  EXPECT_EQ(s[10].arm, "second session turns 2–3");
  EXPECT_EQ(s[11].session, "chat-1-first") << "the next round is a new conversation";
  EXPECT_EQ(s[11].messages[0], s[0].messages[0]);
}

TEST(BenchFamilyWorkloads, FamilyListNamesKnownWorkloads) {
  for (const auto& name : family_workload_names()) EXPECT_NO_THROW(make_workload(name, params())) << name;
  EXPECT_EQ(family_workload_names().front(), "chat");
}

constexpr const char* kLlamaLog =
    "srv  params_from_: Chat format: Content-only\n"
    "slot update_slots: id  0 | task 0 | created context checkpoint 1 of 32 (pos_min = 140, pos_max = 140, n_tokens = "
    "141, size = 0.250 MiB)\n"
    "slot update_slots: id  0 | task 3 | created context checkpoint 2 of 32 (pos_min = 301, pos_max = 301, n_tokens = "
    "302, size = 0.500 MiB)\n"
    "slot update_slots: id  0 | task 3 | erasing old context checkpoint (pos_min = 140, pos_max = 140, n_tokens = 141, "
    "size = 0.250 MiB)\n"
    "slot create_check: id  0 | task 4 | superseding context checkpoint at n_tokens = 302\n"
    "slot update_slots: id  1 | task 5 | restored context checkpoint (pos_min = 301, pos_max = 301, n_tokens = 302, "
    "n_past = 302, size = 0.500 MiB)\n"
    "srv  prompt_save:  - saving prompt with length 302, total state size = 3.100 MiB\n"
    "srv          load:  - cache state: 1 prompts, 3.100 MiB (limits: 8192.000 MiB, 65536 tokens, 1000 est)\n"
    "srv          load:    - prompt 0x55d1:     302 tokens, checkpoints:  2,     3.100 MiB\n"
    "srv  prompt_save:  - saving prompt with length 410, total state size = 3.600 MiB\n"
    "srv          load:  - cache state: 2 prompts, 6.700 MiB (limits: 8192.000 MiB, 65536 tokens, 1000 est)\n"
    "srv          load:    - prompt 0x55d1:     302 tokens, checkpoints:  2,     3.100 MiB\n"
    "srv          load:    - prompt 0x55e9:     410 tokens, checkpoints:  3,     3.600 MiB\n"
    "slot update_slots: id  0 | task 9 | erased invalidated context checkpoint (pos_min = 9, pos_max = 72, n_tokens = "
    "73, n_swa = 64, pos_next = 40, size = 0.125 MiB)";

TEST(BenchLlamaLog, CountsCheckpointsAndKeepsTheLastCacheListing) {
  const LlamaCheckpointLog log = parse_llama_checkpoint_log(kLlamaLog);
  EXPECT_EQ(log.created, 2);
  EXPECT_DOUBLE_EQ(log.created_mib, 0.75);
  EXPECT_DOUBLE_EQ(log.largest_mib, 0.5);
  EXPECT_EQ(log.erased, 2) << "an old one and an invalidated one";
  EXPECT_DOUBLE_EQ(log.erased_mib, 0.375);
  EXPECT_EQ(log.superseded, 1);
  EXPECT_EQ(log.restored, 1);
  EXPECT_EQ(log.prompts_saved, 2);
  EXPECT_EQ(log.cache_prompts, 2);
  EXPECT_DOUBLE_EQ(log.cache_mib, 6.7);
  EXPECT_EQ(log.cache_checkpoints, 5) << "the last listing only, not 2 + 2 + 3";
  EXPECT_EQ(log.to_json()["created"], 2);
}

TEST(BenchLlamaLog, NothingToReadIsNothingCounted) {
  const LlamaCheckpointLog log = parse_llama_checkpoint_log("main: server is listening\nsize = 9 MiB\n");
  EXPECT_EQ(log.created, 0);
  EXPECT_EQ(log.erased, 0);
  EXPECT_EQ(log.cache_prompts, -1);
  EXPECT_DOUBLE_EQ(log.cache_mib, -1);
}

nlohmann::json request(int step, const std::string& arm, int prompt, int evaluated) {
  return {{"step", step}, {"arm", arm}, {"ttft_ms", 5.0}, {"prompt_tokens", prompt}, {"evaluated", evaluated},
          {"cached", prompt - evaluated}, {"completion_tokens", 8}};
}

// One workload, prefixd against llama-server: prefixd evaluates 10 + 40 tokens and warms up
// `warmup`; llama-server evaluates 100 + 20.
nlohmann::json gated_results(double warmup, bool gate = true) {
  nlohmann::json prefixd = {{"requests", {request(0, "turn 1", 100, 10), request(1, "turn 2", 150, 40)}},
                            {"warmup", {{"metric", "prefixd_warmup_tokens_total"}, {"tokens", warmup}}},
                            {"snapshots", {{"reuse", "checkpoints"}, {"entries", 3}, {"bytes", 3 << 20}, {"saved", 4}}}};
  nlohmann::json llama = {{"requests", {request(0, "turn 1", 100, 100), request(1, "turn 2", 150, 20)}},
                          {"checkpoint_log", parse_llama_checkpoint_log(kLlamaLog).to_json()}};
  nlohmann::json workload = {{"name", "chat"},
                             {"arms", {{{"name", "turn 1"}}, {{"name", "turn 2"}}}},
                             {"targets", {{"prefixd", prefixd}, {"llama-server", llama}}}};
  return {{"options", {{"token_gate", gate}}},
          {"servers", {{{"name", "prefixd"}, {"kind", "prefixd"}}, {{"name", "llama-server"}, {"kind", "llama-server"}}}},
          {"workloads", {workload}}};
}

TEST(BenchTokenGate, WarmUpTokensCountForPrefixd) {
  const auto pass = token_verdicts(gated_results(69));
  ASSERT_EQ(pass.size(), 1u);
  EXPECT_EQ(pass[0].prefixd.fed, 50);
  EXPECT_EQ(pass[0].prefixd.total(), 119);
  EXPECT_EQ(pass[0].llama.fed, 120);
  EXPECT_TRUE(pass[0].pass);
  EXPECT_TRUE(token_gate_passed(gated_results(69)));
  // As many as llama-server passes (both reused every prefix there was); one more fails.
  EXPECT_TRUE(token_verdicts(gated_results(70))[0].pass);
  const auto fail = token_verdicts(gated_results(71));
  EXPECT_FALSE(fail[0].pass);
  EXPECT_FALSE(token_gate_passed(gated_results(71)));
  EXPECT_TRUE(token_gate_passed(gated_results(71, /*gate=*/false))) << "only a run that asked for it is gated";
}

TEST(BenchTokenGate, AVariantIsJudgedAndShownButDoesNotGate) {
  auto results = gated_results(0);
  results["servers"][0]["token_gated"] = true;
  results["servers"].push_back({{"name", "prefixd-swa-off"}, {"kind", "prefixd"}, {"token_gated", false}});
  nlohmann::json variant = {{"requests", {request(0, "turn 1", 100, 100), request(1, "turn 2", 150, 40)}},
                            {"warmup", {{"metric", "prefixd_warmup_tokens_total"}, {"tokens", 0}}}};
  results["workloads"][0]["targets"]["prefixd-swa-off"] = variant;
  const auto v = token_verdicts(results);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].gated && v[0].pass);
  EXPECT_EQ(v[1].target, "prefixd-swa-off");
  EXPECT_FALSE(v[1].gated);
  EXPECT_FALSE(v[1].pass) << "140 tokens against llama-server's 120";
  EXPECT_TRUE(token_gate_passed(results));
  // Without the default target there is nothing the gate judges.
  results["servers"][0]["token_gated"] = false;
  EXPECT_FALSE(token_gate_passed(results));
}

TEST(BenchTokenGate, FailedRequestsOrAMissingLlamaServerFailTheGate) {
  auto results = gated_results(0);
  results["workloads"][0]["targets"]["prefixd"]["requests"][1]["error"] = "HTTP 500";
  const auto v = token_verdicts(results);
  EXPECT_FALSE(v[0].pass);
  EXPECT_NE(v[0].why.find("1 failure"), std::string::npos) << v[0].why;
  auto alone = gated_results(0);
  alone["servers"].erase(1);
  EXPECT_TRUE(token_verdicts(alone).empty());
  EXPECT_FALSE(token_gate_passed(alone)) << "asked for, with nothing to compare against";
}

TEST(BenchTokenGate, KindComesFromTheServerListElseTheName) {
  auto results = gated_results(0);
  results["servers"].push_back({{"name", "prefixd-swa-off"}, {"kind", "prefixd"}});
  EXPECT_EQ(server_kind(results, "prefixd-swa-off"), "prefixd");
  EXPECT_EQ(server_kind(results, "llama-server"), "llama-server");
  EXPECT_EQ(server_kind(nlohmann::json::object(), "prefixd-nocache"), "prefixd");
  EXPECT_EQ(server_kind(nlohmann::json::object(), "vllm"), "");
}

TEST(BenchTokenGate, RequestsWherePrefixdEvaluatesMoreAreListed) {
  const auto results = gated_results(0);
  const auto excess = requests_evaluating_more(results["workloads"][0], "prefixd", "llama-server");
  ASSERT_EQ(excess.size(), 1u);
  EXPECT_EQ(excess[0].step, 1);
  EXPECT_EQ(excess[0].arm, "turn 2");
  EXPECT_EQ(excess[0].a, 40);
  EXPECT_EQ(excess[0].b, 20);
}

TEST(BenchTokenGate, TheReportStatesTheVerdictAndTheCheckpoints) {
  const std::string passed = render_report(gated_results(69), {});
  EXPECT_NE(passed.find("## Prompt tokens evaluated, warm-up included"), std::string::npos) << passed;
  EXPECT_NE(passed.find("**PASS**"), std::string::npos);
  EXPECT_NE(passed.find("| chat     | prefixd | 50            | 69      | 119"), std::string::npos) << passed;
  EXPECT_NE(passed.find("✓ pass"), std::string::npos);
  EXPECT_NE(passed.find("| 3                | 3.00"), std::string::npos) << "3 checkpoints, 3 MiB held";
  EXPECT_NE(passed.find("2 / 6.70 / 5"), std::string::npos) << "llama-server's last cache listing";
  EXPECT_NE(passed.find("| chat     | 2    | 1          | turn 2"), std::string::npos) << passed;
  // The summary's evaluated column counts the warm-up too.
  EXPECT_NE(passed.find("| chat     | 119"), std::string::npos) << passed;
  const std::string failed = render_report(gated_results(71), {});
  EXPECT_NE(failed.find("**FAIL**"), std::string::npos);
  EXPECT_NE(failed.find("✗ FAIL"), std::string::npos);
}

TEST(BenchTokenGate, WarmUpAddsUpOverRepetitions) {
  nlohmann::json into;
  merge_repetition(into, {{"requests", nlohmann::json::array()}, {"warmup", {{"tokens", 12.0}}}}, 0);
  merge_repetition(into, {{"requests", nlohmann::json::array()}, {"warmup", {{"tokens", 30.0}}}}, 1);
  EXPECT_DOUBLE_EQ(into["warmup"]["tokens"].get<double>(), 42.0);
}

TEST(BenchDocs, NamedSectionsKeepEachOtherAndTheDefaultReport) {
  std::string page = std::string("# B\n\n") + kReportBegin + "\ndefault\n" + kReportEnd + "\n";
  page = splice_report(page, "QWEN 1", "qwen35-tiny");
  page = splice_report(page, "GEMMA 1", "gemma3-tiny");
  page = splice_report(page, "QWEN 2", "qwen35-tiny");
  EXPECT_NE(page.find("default"), std::string::npos);
  EXPECT_NE(page.find("GEMMA 1"), std::string::npos);
  EXPECT_NE(page.find("QWEN 2"), std::string::npos);
  EXPECT_EQ(page.find("QWEN 1"), std::string::npos) << page;
  EXPECT_LT(page.find("QWEN 2"), page.find("GEMMA 1")) << "a section stays where it was";
  EXPECT_EQ(splice_report(page, "X", "gemma3-tiny").find("GEMMA 1"), std::string::npos);
  EXPECT_NE(report_begin_marker("qwen35-tiny"), report_begin_marker("qwen35-tiny-2"));
  EXPECT_EQ(report_begin_marker(""), kReportBegin);
}

TEST(BenchDocs, MarkersWrittenUnderTheCommandsOldNameAreReplacedInPlace) {
  const std::string page =
      "# B\n\n<!-- compare-report:begin (written by prefixd compare --docs) -->\nOLD\n<!-- compare-report:end -->\n\n"
      "<!-- compare-report:begin qwen35-tiny (written by prefixd compare --docs --docs-section qwen35-tiny) -->\n"
      "OLD QWEN\n<!-- compare-report:end qwen35-tiny -->\n\ntail\n";
  const std::string once = splice_report(splice_report(page, "NEW", ""), "NEW QWEN", "qwen35-tiny");
  EXPECT_EQ(once, std::string("# B\n\n") + kReportBegin + "\n\nNEW\n" + kReportEnd + "\n\n" +
                      report_begin_marker("qwen35-tiny") + "\n\nNEW QWEN\n" + report_end_marker("qwen35-tiny") +
                      "\n\ntail\n");
  EXPECT_EQ(splice_report(once, "NEW", ""), once) << "and the new markers match themselves";
}

std::string joined_args(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += " " + a;
  return out;
}

TEST(BenchTargets, VariantsAddTheirArgumentsToThePrefixdOnes) {
  TargetSources sources{.prefixd_bin = "/bin/prefixd", .prefixd_args = "--threads-x 1"};
  sources.variants.insert(parse_variant("prefixd-swa-off=--swa-full off"));
  const Target t = make_target("prefixd-swa-off", sources);
  EXPECT_EQ(t.kind(), TargetKind::prefixd);
  EXPECT_EQ(joined_args(t.extra_args()), " --threads-x 1 --swa-full off");
  EXPECT_EQ(joined_args(make_target("prefixd", sources).extra_args()), " --threads-x 1");
  EXPECT_THROW(parse_variant("=--x"), std::invalid_argument);
  EXPECT_THROW(parse_variant("no-equals"), std::invalid_argument);
  EXPECT_THROW(parse_variant("prefixd=--x"), std::invalid_argument) << "a built-in name";
  EXPECT_EQ(parse_variant("a=b=c").second, "b=c");
}

TEST(BenchTargets, SnapshotBudgetComesOutOfTheHostBudget) {
  const Target prefixd(TargetKind::prefixd, "prefixd", "/bin/prefixd", {});
  ServerSettings s{.model_path = "m.gguf", .cache_mib = 8192};
  EXPECT_NE(joined_args(prefixd.arguments(s, 1)).find("--prompt-cache-capacity-bytes 8589934592"), std::string::npos);
  EXPECT_EQ(joined_args(prefixd.arguments(s, 1)).find("snapshot"), std::string::npos);
  s.snapshot_mib = 1024;
  const std::string split = joined_args(prefixd.arguments(s, 1));
  EXPECT_NE(split.find("--prompt-cache-capacity-bytes 7516192768"), std::string::npos) << split;
  EXPECT_NE(split.find("--prompt-cache-snapshot-capacity-bytes 1073741824"), std::string::npos) << split;
  const Target llama(TargetKind::llama_server, "llama-server", "/bin/llama-server", {});
  EXPECT_NE(joined_args(llama.arguments(s, 1)).find("--cache-ram 8192"), std::string::npos);
  EXPECT_EQ(prefixd.warmup_counter(), std::string("prefixd_warmup_tokens_total"));
  EXPECT_EQ(llama.warmup_counter(), nullptr);
}

}  // namespace
}  // namespace prefixd::bench
