// The prepared workload: an agent's system prompt and tool schema prefilled once through POST
// /v1/cache/prepare_modules, then the first request of several sessions, each that chain and its
// own user message; against a cold arm, the same first requests each after POST /v1/cache/reset.
// The claim is counted in tokens (bench/checks.cpp): a prepared first request feeds only its own
// message.
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kPrepared = 31;
constexpr int kSessions = 4;
constexpr int kTools = 6;
constexpr const char* kToolNames[kTools] = {"search_flights", "book_hotel", "get_weather", "convert_currency",
                                            "list_trains",    "send_itinerary"};
constexpr const char* kFields[] = {"city", "date", "passengers", "budget", "currency", "notes"};

// One function tool: a seeded description of about `tokens` tokens and a few typed parameters,
// each with a seeded description of its own.
nlohmann::json tool_of(std::uint64_t seed, const char* name, int tokens, double words_per_token) {
  constexpr int kParameters = 3;
  const int part = std::max(4, tokens / (kParameters + 1));
  nlohmann::json properties = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  for (int k = 0; k < kParameters; ++k) {
    const auto index = static_cast<std::size_t>((seed + static_cast<std::uint64_t>(k)) % std::size(kFields));
    const std::string field = std::format("{}_{}", kFields[index], k);
    properties[field] = {{"type", k == 2 ? "integer" : "string"},
                         {"description", text_of(derive_seed(seed, 1, static_cast<std::uint64_t>(k)), part, words_per_token)}};
    required.push_back(field);
  }
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", text_of(derive_seed(seed, 2), part, words_per_token)},
            {"parameters", {{"type", "object"}, {"properties", properties}, {"required", required}}}}}};
}

}  // namespace

Workload make_prepared(const WorkloadParams& p) {
  Workload w = named_workload("prepared", "Prepared system and tools (first requests)", "session", 1,
                              {{.name = "cold", .cold = true, .pinned = true}, {.name = "prepared", .pinned = true}});
  const int system_tokens = scaled(768, p.scale, 32);
  const int tool_tokens = scaled(96, p.scale, 16);
  const int user_tokens = scaled(24, p.scale, 4);
  const int reps = repetitions(p.reps);
  w.description = std::format(
      "An agent's {}-token system prompt and {} tools (about {} tokens each, with parameters) form a chain prepared "
      "once with POST /v1/cache/prepare_modules; then the first request of {} sessions, each the chain and its own "
      "{}-token user message, max_tokens 1. Cold: the same first requests, each after POST /v1/cache/reset and without "
      "a prepare. {} repetitions, the arms' order alternating. --parallel 1.",
      system_tokens, kTools, tool_tokens, kSessions, user_tokens, reps);

  const std::string system = text_of(derive_seed(p.seed, kPrepared, 0), system_tokens, p.words_per_token);
  nlohmann::json tools = nlohmann::json::array();
  for (int t = 0; t < kTools; ++t) {
    tools.push_back(tool_of(derive_seed(p.seed, kPrepared, 1, static_cast<std::uint64_t>(t)), kToolNames[t], tool_tokens,
                            p.words_per_token));
  }
  const int chain_tokens = system_tokens + kTools * (tool_tokens + 24) + Transcript::kPerMessage;
  const nlohmann::json prepare = {
      {"modules", nlohmann::json::array({{{"module_id", "system"}, {"system_prompt", system}},
                                         {{"module_id", "tools"}, {"tools", tools}}})}};

  auto control = [&](const char* arm, const char* path, nlohmann::json body) {
    return Step{.arm = arm, .control = path, .control_body = std::move(body), .planned_tokens = chain_tokens};
  };
  auto first_request = [&](const char* arm, int s, int rep) {
    Transcript t;
    t.add("system", system, chain_tokens);
    const auto seed = derive_seed(p.seed, kPrepared, 2, static_cast<std::uint64_t>(s));
    t.add("user", question_of(seed, user_tokens, p.words_per_token), user_tokens);
    Step step = chat_step(arm, std::format("prepared-{}-{}-{}", arm, rep, s), t, 1, s + 1);
    step.tools = tools;
    return step;
  };
  for (int rep = 0; rep < reps; ++rep) {
    auto prepared_arm = [&] {
      w.steps.push_back(control(kPreparedResetArm, "/v1/cache/reset", nlohmann::json::object()));
      w.steps.push_back(control(kPreparedPrepareArm, "/v1/cache/prepare_modules", prepare));
      for (int s = 0; s < kSessions; ++s) w.steps.push_back(first_request("prepared", s, rep));
    };
    auto cold_arm = [&] {
      for (int s = 0; s < kSessions; ++s) {
        w.steps.push_back(control(kPreparedResetArm, "/v1/cache/reset", nlohmann::json::object()));
        w.steps.push_back(first_request("cold", s, rep));
      }
    };
    if (rep % 2 == 0) {
      cold_arm();
      prepared_arm();
    } else {
      prepared_arm();
      cold_arm();
    }
  }
  // The gates replay a prepared first request: its chain is still cached.
  for (int i = static_cast<int>(w.steps.size()) - 1; i >= 0; --i) {
    if (w.steps[static_cast<std::size_t>(i)].arm == "prepared") {
      w.gate_step = i;
      break;
    }
  }
  return w;
}

}  // namespace prefixd::bench
