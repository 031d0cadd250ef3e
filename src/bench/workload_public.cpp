// The field's public serving benchmarks, with their published parameters scaled to a small CPU:
// SGLang's generated-shared-prefix dataset (bench_serving), LMCache's multi-round QA, and vLLM's
// synthetic multi-turn conversations (benchmarks/multi_turn). Their shapes are kept (groups and
// prompts per group, users and rounds, conversations and clients, arrival process); their sizes
// are divided so that a run fits minutes on two cores, and each description names both.
//
// Every request asks for a fixed number of tokens with ignore_eos, as those benchmarks do, so
// both servers generate the same count and output tokens per second compare like for like.
// Assistant turns in a history are written by the generator (as in the other conversation
// workloads), not the server's reply: both servers then get the same bytes.
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kGsp = 21;
constexpr std::uint64_t kMqa = 22;
constexpr std::uint64_t kMultiTurn = 23;

// A latency workload: ignore_eos on every request, the report's latency table.
Workload latency_workload(std::string name, std::string title, int parallel, int concurrency,
                          std::initializer_list<const char*> arms) {
  Workload w = named_workload(std::move(name), std::move(title), "request", parallel, plain_arms(arms));
  w.concurrency = concurrency;
  w.latency = true;
  return w;
}

nlohmann::json fixed_length_fields() { return {{"ignore_eos", true}}; }

// Uniform integer in [lo, hi], both ends included.
int uniform_int(SeededRng& rng, int lo, int hi) {
  return static_cast<int>(rng.uniform(static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi) + 1));
}

}  // namespace

Workload make_gsp(const WorkloadParams& p) {
  // Published defaults: 64 groups × 16 prompts, 2048-token system prompt, 128-token question,
  // 256 output tokens, request rate unlimited. Here: 4 groups × 8 prompts, lengths ÷ 4 at
  // BENCH_SCALE 1 (system 512, question 32), 16 output tokens, Poisson arrivals at 0.5 / s ÷ scale.
  constexpr int kGroups = 4;
  constexpr int kPerGroup = 8;
  const int system_tokens = scaled(512, p.scale, 16);
  const int question_tokens = scaled(32, p.scale, 4);
  const int output_tokens = scaled(16, p.scale, 4);
  const double rate = 0.5 / p.scale;
  Workload w = latency_workload("gsp", "Generated shared prefix (SGLang bench_serving)", 4, kGroups * kPerGroup,
                                {"first of its group", "rest of its group"});
  w.description = std::format(
      "SGLang's `generated-shared-prefix` dataset: {} groups × {} prompts (published default 64 × 16); each prompt is "
      "its group's system prompt ({} tokens; published 2048) followed by its own question ({} tokens; published 128), "
      "sent as a raw /v1/completions prompt in a seeded shuffled order, as the dataset shuffles them; {} output tokens "
      "with ignore_eos (published 256). Open loop: Poisson arrivals at {:.2f} requests/s (bench_serving's "
      "--request-rate), up to {} in flight. --parallel 4 on both servers.",
      kGroups, kPerGroup, system_tokens, question_tokens, output_tokens, rate, kGroups * kPerGroup);
  struct Prompt {
    int group;
    int index;
  };
  std::vector<Prompt> order;
  for (int g = 0; g < kGroups; ++g) {
    for (int i = 0; i < kPerGroup; ++i) order.push_back({g, i});
  }
  // Fisher–Yates with the portable generator.
  SeededRng rng(derive_seed(p.seed, kGsp, 1));
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.uniform(0, i)]);
  const auto arrivals = poisson_arrivals(derive_seed(p.seed, kGsp, 2), static_cast<int>(order.size()), rate);
  std::vector<bool> group_seen(kGroups, false);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto [g, i] = order[k];
    const auto gs = static_cast<std::uint64_t>(g);
    const std::string prompt = text_of(derive_seed(p.seed, kGsp, 3, gs), system_tokens, p.words_per_token) + "\n\n" +
                               question_of(derive_seed(p.seed, kGsp, 4, gs * 1000 + static_cast<std::uint64_t>(i)),
                                           question_tokens, p.words_per_token);
    const bool first = !group_seen[static_cast<std::size_t>(g)];
    group_seen[static_cast<std::size_t>(g)] = true;
    w.steps.push_back({.arm = first ? "first of its group" : "rest of its group",
                       .session = std::format("gsp-group-{}-prompt-{}", g, i),
                       .prompt = prompt,
                       .body_fields = fixed_length_fields(),
                       .max_tokens = output_tokens,
                       .planned_tokens = system_tokens + question_tokens + 4,
                       .arrival_s = arrivals[k],
                       .x = static_cast<double>(k + 1)});
  }
  return w;
}

Workload make_mqa(const WorkloadParams& p) {
  // Published example: 10 users × 5 rounds, a 1000-token shared system prompt, 2000 (or 20000)
  // tokens of history per user, 100-token answers, 0.5 QPS overall. Here: 4 users × 4 rounds,
  // lengths ÷ 4 at BENCH_SCALE 1, 0.25 QPS ÷ scale, fewer slots than users.
  constexpr int kUsers = 4;
  constexpr int kRounds = 4;
  const int system_tokens = scaled(250, p.scale, 16);
  const int history_tokens = scaled(500, p.scale, 16);
  const int question_tokens = scaled(16, p.scale, 4);
  const int answer_tokens = scaled(25, p.scale, 4);
  const double rate = 0.25 / p.scale;
  Workload w = latency_workload("mqa", "Multi-round QA (LMCache)", 2, kUsers, {"first round", "later rounds"});
  w.description = std::format(
      "LMCache's multi-round QA benchmark: {} users × {} rounds (published example 10 × 5); every prompt is one shared "
      "system prompt ({} tokens; published 1000), the user's own history ({} tokens; published 2000, or 20000 in the "
      "long-context run), then every earlier question and answer of that user and the new question ({} tokens); "
      "answers of {} tokens with ignore_eos (published 100). Requests arrive as a Poisson process at {:.2f} QPS "
      "overall (published 0.5), rounds in user order, and a user's next question also waits for the previous answer. "
      "--parallel 2: more users than slots, so histories must come back from wherever the server kept them.",
      kUsers, kRounds, system_tokens, history_tokens, question_tokens, answer_tokens, rate);
  const std::string system = text_of(derive_seed(p.seed, kMqa, 0), system_tokens, p.words_per_token);
  const auto arrivals = poisson_arrivals(derive_seed(p.seed, kMqa, 1), kUsers * kRounds, rate);
  std::vector<Transcript> transcripts(kUsers);
  std::vector<int> last_step(kUsers, -1);
  for (int u = 0; u < kUsers; ++u) {
    transcripts[static_cast<std::size_t>(u)].add("system", system, system_tokens);
  }
  for (int round = 0; round < kRounds; ++round) {
    for (int u = 0; u < kUsers; ++u) {
      const auto us = static_cast<std::uint64_t>(u);
      const auto rs = static_cast<std::uint64_t>(round);
      Transcript& t = transcripts[static_cast<std::size_t>(u)];
      std::string question = question_of(derive_seed(p.seed, kMqa, 2, us * 100 + rs), question_tokens, p.words_per_token);
      // The user's history opens the first question, as the benchmark sends it in the first message.
      if (round == 0) {
        question = "Here is what I have written so far:\n" +
                   text_of(derive_seed(p.seed, kMqa, 3, us), history_tokens, p.words_per_token) + "\n\n" + question;
      }
      t.add("user", std::move(question), question_tokens + (round == 0 ? history_tokens + 10 : 0));
      Step step = chat_step(round == 0 ? "first round" : "later rounds", std::format("mqa-user-{}", u), t,
                            answer_tokens, static_cast<double>(w.steps.size() + 1));
      step.body_fields = fixed_length_fields();
      step.arrival_s = arrivals[static_cast<std::size_t>(round * kUsers + u)];
      step.after = last_step[static_cast<std::size_t>(u)];
      w.steps.push_back(std::move(step));
      last_step[static_cast<std::size_t>(u)] = static_cast<int>(w.steps.size()) - 1;
      t.add("assistant", text_of(derive_seed(p.seed, kMqa, 4, us * 100 + rs), answer_tokens, p.words_per_token),
            answer_tokens);
    }
  }
  return w;
}

Workload make_multiturn(const WorkloadParams& p) {
  // Published generate_multi_turn.json: 24 conversations of 12–18 messages (uniform), a 500-token
  // prefix common to all, a per-conversation prefix (log-normal, average 1000, at most 5000),
  // user turns of 120–160 tokens and answers of 80–120 (uniform); the README runs 2 clients with
  // 6 active conversations and no request delay. Here: 6 conversations of 6–8 messages, lengths
  // ÷ 4 at BENCH_SCALE 1, the same 2 clients × 3 conversations each.
  constexpr int kConversations = 6;
  constexpr int kClients = 2;
  const int common_tokens = scaled(125, p.scale, 16);
  const LogNormal prefix_shape{.median = 200, .sigma = 0.6, .lo = 16, .hi = 1250};
  Workload w = latency_workload("multiturn", "Multi-turn conversations (vLLM benchmarks/multi_turn)", 2, kClients,
                                {"first turn", "later turns"});
  w.description = std::format(
      "vLLM's synthetic multi-turn conversations (`generate_multi_turn.json`): {} conversations (published 24) of 6–8 "
      "messages (published 12–18, uniform), each opening with a prefix common to all ({} tokens; published 500) and "
      "one of its own (log-normal, median {} tokens, at most {}; published average 1000, at most 5000); user turns "
      "uniform {}–{} tokens (published 120–160), answers {}–{} tokens with ignore_eos (published 80–120). {} clients "
      "(the README's --num-clients 2), each cycling through {} active conversations (--max-active-conversations 6 "
      "over both) with no delay between requests: closed loop. --parallel 2.",
      kConversations, common_tokens, scaled(200, p.scale, 16), scaled(1250, p.scale, 16), scaled(30, p.scale, 4),
      scaled(40, p.scale, 4), scaled(20, p.scale, 4), scaled(30, p.scale, 4), kClients, kConversations / kClients);
  const std::string common = text_of(derive_seed(p.seed, kMultiTurn, 0), common_tokens, p.words_per_token);
  SeededRng rng(derive_seed(p.seed, kMultiTurn, 1));
  struct Conversation {
    Transcript transcript;
    int turns = 0;     // user turns
    int sent = 0;
    std::uint64_t seed = 0;
  };
  std::vector<Conversation> conversations(kConversations);
  for (int c = 0; c < kConversations; ++c) {
    auto& conv = conversations[static_cast<std::size_t>(c)];
    conv.seed = derive_seed(p.seed, kMultiTurn, 2, static_cast<std::uint64_t>(c));
    conv.turns = uniform_int(rng, 6, 8) / 2;
    const int own = draw_length(rng, prefix_shape, p.scale);
    conv.transcript.add("system", common + "\n\n" + text_of(derive_seed(conv.seed, 1), own, p.words_per_token),
                        common_tokens + own + 2);
  }
  // Each client sends its conversations' turns round-robin (a, b, c, a, b, c, …), one at a time;
  // the two clients' steps alternate in the list, so each of the two workers carries one client.
  std::vector<std::vector<Step>> per_client(kClients);
  for (int client = 0; client < kClients; ++client) {
    bool any = true;
    while (any) {
      any = false;
      for (int c = client; c < kConversations; c += kClients) {
        auto& conv = conversations[static_cast<std::size_t>(c)];
        if (conv.sent >= conv.turns) continue;
        any = true;
        const auto k = static_cast<std::uint64_t>(conv.sent);
        const int user_tokens = scaled(uniform_int(rng, 30, 40), p.scale, 4);
        const int answer_tokens = scaled(uniform_int(rng, 20, 30), p.scale, 4);
        conv.transcript.add("user", question_of(derive_seed(conv.seed, 2, k), user_tokens, p.words_per_token), user_tokens);
        Step step = chat_step(conv.sent == 0 ? "first turn" : "later turns", std::format("multiturn-conversation-{}", c),
                              conv.transcript, answer_tokens, 0);
        step.body_fields = fixed_length_fields();
        per_client[static_cast<std::size_t>(client)].push_back(std::move(step));
        conv.transcript.add("assistant", text_of(derive_seed(conv.seed, 3, k), answer_tokens, p.words_per_token),
                            answer_tokens);
        ++conv.sent;
      }
    }
  }
  std::vector<int> last_step(kClients, -1);
  for (std::size_t k = 0;; ++k) {
    bool any = false;
    for (int client = 0; client < kClients; ++client) {
      auto& steps = per_client[static_cast<std::size_t>(client)];
      if (k >= steps.size()) continue;
      any = true;
      Step step = std::move(steps[k]);
      step.after = last_step[static_cast<std::size_t>(client)];
      step.x = static_cast<double>(w.steps.size() + 1);
      w.steps.push_back(std::move(step));
      last_step[static_cast<std::size_t>(client)] = static_cast<int>(w.steps.size()) - 1;
    }
    if (!any) break;
  }
  return w;
}

Workload make_sweep(const WorkloadParams& p, int clients) {
  // One point of the concurrency sweep: `clients` users, each in a conversation of its own with a
  // system prompt shared by all, closed loop (a user asks again as soon as the answer is complete).
  constexpr int kTurns = 3;
  constexpr std::uint64_t kSweep = 24;
  const int system_tokens = scaled(128, p.scale, 16);
  const int own_tokens = scaled(96, p.scale, 8);
  const int question_tokens = scaled(16, p.scale, 4);
  const int answer_tokens = scaled(24, p.scale, 4);
  Workload w = latency_workload(sweep_workload_name(clients), std::format("Concurrency sweep: {} client(s)", clients),
                                clients, clients, {"turn 1", "turns 2–3"});
  w.clients = clients;
  w.description = std::format(
      "{} client(s) at once, each in its own conversation of {} turns: one system prompt shared by all ({} tokens), "
      "the client's own opening context ({} tokens), questions of {} tokens, answers of {} tokens with ignore_eos "
      "(the history carries written answers of the same length). Closed loop: a client asks again as soon as its "
      "answer is complete. --parallel {} on prefixd, -np {} on llama-server.",
      clients, kTurns, system_tokens, own_tokens, question_tokens, answer_tokens, clients, clients);
  const std::string system = text_of(derive_seed(p.seed, kSweep, 0), system_tokens, p.words_per_token);
  std::vector<Transcript> transcripts(static_cast<std::size_t>(clients));
  std::vector<int> last_step(static_cast<std::size_t>(clients), -1);
  for (int turn = 0; turn < kTurns; ++turn) {
    for (int c = 0; c < clients; ++c) {
      const auto cs = static_cast<std::uint64_t>(c);
      const auto ts = static_cast<std::uint64_t>(turn);
      Transcript& t = transcripts[static_cast<std::size_t>(c)];
      if (turn == 0) {
        t.add("system", system, system_tokens);
        t.add("user",
              text_of(derive_seed(p.seed, kSweep, 1, cs), own_tokens, p.words_per_token) + "\n\n" +
                  question_of(derive_seed(p.seed, kSweep, 2, cs * 100), question_tokens, p.words_per_token),
              own_tokens + question_tokens + 2);
      } else {
        t.add("assistant", text_of(derive_seed(p.seed, kSweep, 3, cs * 100 + ts), answer_tokens, p.words_per_token),
              answer_tokens);
        t.add("user", question_of(derive_seed(p.seed, kSweep, 2, cs * 100 + ts), question_tokens, p.words_per_token),
              question_tokens);
      }
      Step step = chat_step(turn == 0 ? "turn 1" : "turns 2–3", std::format("sweep-client-{}", c), t, answer_tokens,
                            static_cast<double>(w.steps.size() + 1));
      step.body_fields = fixed_length_fields();
      step.after = last_step[static_cast<std::size_t>(c)];
      w.steps.push_back(std::move(step));
      last_step[static_cast<std::size_t>(c)] = static_cast<int>(w.steps.size()) - 1;
    }
  }
  return w;
}

}  // namespace prefixd::bench
