#include "sessions_at_once.h"

#include <gtest/gtest.h>

#include <format>
#include <thread>

namespace prefixd::testing {

namespace {

using nlohmann::json;

json chat(const std::vector<json>& messages, bool cache_prompt) {
  return {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}, {"cache_prompt", cache_prompt}};
}

std::string text_of(const JsonReply& reply) {
  if (reply.status != 200) return std::format("<{}: {}>", reply.status, reply.raw.substr(0, 200));
  return reply.body["choices"][0]["message"].value("content", "");
}

std::string topic(int session, int turn) {
  std::string out = std::format("Session {} turn {}:", session, turn);
  for (int i = 0; i < 40 + 13 * session + 7 * turn; ++i) out += std::format(" item{}-{}", (i * 7 + session) % 97, turn);
  return out;
}

}  // namespace

SessionsAtOnce run_sessions_at_once(const ServerProcess& server, int sessions, int turns) {
  SessionsAtOnce out;
  out.differences.resize(static_cast<size_t>(sessions));
  out.cached.assign(static_cast<size_t>(sessions), 0);
  auto client = server.client();
  const std::vector<json> probe = {{{"role", "user"}, {"content", topic(9, 0)}}};
  out.on_empty = text_of(post_json(*client, "/v1/chat/completions", chat(probe, false)));
  std::vector<std::thread> threads;
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&, s] {
      auto own = server.client();
      std::vector<json> messages;
      for (int turn = 0; turn < turns; ++turn) {
        messages.push_back({{"role", "user"}, {"content", topic(s, turn)}});
        const JsonReply warm = post_json(*own, "/v1/chat/completions", chat(messages, true));
        const JsonReply cold = post_json(*own, "/v1/chat/completions", chat(messages, false));
        if (warm.status == 200) {
          out.cached[static_cast<size_t>(s)] += warm.body["usage"]["prompt_tokens_details"].value("cached_tokens", 0);
        }
        if (text_of(warm) != text_of(cold)) {
          out.differences[static_cast<size_t>(s)].push_back(
              std::format("turn {}: cached {:?} cold {:?}", turn, text_of(warm), text_of(cold)));
        }
        messages.push_back({{"role", "assistant"}, {"content", text_of(warm)}});
      }
    });
  }
  for (auto& t : threads) t.join();
  out.cold_after = text_of(post_json(*client, "/v1/chat/completions", chat(probe, false)));
  out.cached_after = text_of(post_json(*client, "/v1/chat/completions", chat(probe, true)));
  const JsonReply resent = post_json(*client, "/v1/chat/completions", chat(probe, true));
  out.resent_after = text_of(resent);
  if (resent.status == 200) out.resent_cached = resent.body["usage"]["prompt_tokens_details"].value("cached_tokens", 0);
  return out;
}

void expect_answers_as_cold(const SessionsAtOnce& outcome) {
  for (size_t s = 0; s < outcome.differences.size(); ++s) {
    EXPECT_TRUE(outcome.differences[s].empty()) << "session " << s << ": " << outcome.differences[s].front();
    EXPECT_GT(outcome.cached[s], 0) << "session " << s << " reused nothing: no cached answer was compared";
  }
  EXPECT_EQ(outcome.cold_after, outcome.on_empty) << "cold, after history";
  EXPECT_EQ(outcome.cached_after, outcome.on_empty) << "cached, after history";
  EXPECT_EQ(outcome.resent_after, outcome.on_empty) << "resent";
  EXPECT_GT(outcome.resent_cached, 0) << "the resend reused nothing";
}

}  // namespace prefixd::testing
