// Sessions that run at once, every turn sent with the cache and without (cache_prompt false): the
// check that a cached answer is its cold twin's whatever runs beside it and whatever other requests
// left in memory (docs/operator-guide.md, "Exactness").
#pragma once

#include <string>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {

struct SessionsAtOnce {
  // Per session, "turn T: cached ... cold ..." for each turn whose two answers differ.
  std::vector<std::vector<std::string>> differences;
  std::vector<int> cached;  // per session, prompt tokens its cached requests reused
  // A request answered on the empty server before the sessions, and after them: cold, cached, and
  // resent (with the tokens the resend reused).
  std::string on_empty;
  std::string cold_after;
  std::string cached_after;
  std::string resent_after;
  int resent_cached = 0;
};

// `sessions` sessions of `turns` turns on `server`, each from a thread of its own, 6 tokens a reply
// at temperature 0.
SessionsAtOnce run_sessions_at_once(const ServerProcess& server, int sessions, int turns);

// The check of run_sessions_at_once's result: no difference, every session reused something, and
// the request answers after the sessions as on the empty server, cold, cached and resent.
void expect_answers_as_cold(const SessionsAtOnce& outcome);

}  // namespace prefixd::testing
