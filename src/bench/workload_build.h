// prefixd bench — the pieces every workload generator assembles its workload from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "bench/text.h"
#include "bench/transcript.h"
#include "bench/workload.h"

namespace prefixd::bench {

// A workload with its name, title, plot axis, slot count and table rows; the generator adds the
// description and the steps.
inline Workload named_workload(std::string name, std::string title, std::string x_label, int parallel,
                               std::vector<Arm> arms = {}) {
  Workload w;
  w.name = std::move(name);
  w.title = std::move(title);
  w.x_label = std::move(x_label);
  w.parallel = parallel;
  w.arms = std::move(arms);
  return w;
}

// Table rows that are neither cold nor prefill probes.
inline std::vector<Arm> plain_arms(std::initializer_list<const char*> names) {
  std::vector<Arm> arms;
  for (const char* name : names) arms.push_back({.name = name});
  return arms;
}

// A chat request that sends the transcript as it stands.
inline Step chat_step(std::string arm, std::string session, const Transcript& transcript, int max_tokens, double x) {
  return {.arm = std::move(arm),
          .session = std::move(session),
          .messages = transcript.messages(),
          .max_tokens = max_tokens,
          .planned_tokens = transcript.planned_tokens(),
          .x = x};
}

// A question of about `tokens` tokens from its own seed.
inline std::string question_of(std::uint64_t seed, int tokens, double words_per_token) {
  return text_of(seed, tokens, words_per_token) + "?";
}

// How many times a repeated arm or conversation runs: at least once even when asked for none.
inline int repetitions(int asked) { return std::max(1, asked); }

}  // namespace prefixd::bench
