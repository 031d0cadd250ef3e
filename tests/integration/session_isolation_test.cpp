// --cache-isolation session through the real server: two sessions of one tenant share the
// configured system prompt (--cache-shared-prefix-file) and nothing past it, a request without a
// session shares only that prefix, and tenant isolation (the default) still shares everything.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "server_process.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string system_prompt() {
  std::string text = "You are a meticulous librarian. ";
  for (int i = 0; i < 12; ++i) text += "Rule " + std::to_string(i) + ": catalogue every book by author and year. ";
  return text;
}

json conversation(const std::string& system, const std::string& question, const json& extra = json::object()) {
  json request = {{"messages", json::array({{{"role", "system"}, {"content", system}},
                                            {{"role", "user"}, {"content", question}}})},
                  {"max_tokens", 2},
                  {"temperature", 0}};
  request.update(extra);
  return request;
}

class SharedPrefixFile {
 public:
  SharedPrefixFile() : path_(fs::temp_directory_path() / ("prefixd-shared-prefix-" + std::to_string(::getpid()))) {
    std::ofstream(path_) << system_prompt();
  }
  ~SharedPrefixFile() { fs::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

json chat(httplib::Client& client, const json& request) {
  const auto reply = post_json(client, "/v1/chat/completions", request);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body;
}

int cached(const json& reply) { return reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

// Tokens of the system prompt rendered alone, as the server renders the shared prefix.
int shared_prefix_tokens(httplib::Client& client) {
  const auto rendered = post_json(client, "/apply-template",
                                  {{"messages", json::array({{{"role", "system"}, {"content", system_prompt()}}})},
                                   {"add_generation_prompt", false}});
  EXPECT_EQ(rendered.status, 200) << rendered.raw;
  const auto tokens = post_json(client, "/tokenize", {{"content", rendered.body["prompt"]}, {"add_special", true}});
  EXPECT_EQ(tokens.status, 200) << tokens.raw;
  return static_cast<int>(tokens.body["tokens"].size());
}

TEST(SessionIsolation, SessionsShareTheConfiguredSystemPromptAndNothingPastIt) {
  SharedPrefixFile file;
  ServerProcess server({.extra_args = {"--cache-isolation", "session", "--cache-shared-prefix-file", file.path()}});
  auto client = server.client();
  const int shared = shared_prefix_tokens(*client);
  ASSERT_GT(shared, 100);
  const json request = conversation(system_prompt(), "Where is the atlas of the northern coast?");

  const json first = chat(*client, conversation(system_prompt(), "Where is the atlas of the northern coast?",
                                                {{"prompt_cache_key", "session-1"}}));
  EXPECT_EQ(first["prompt_cache"]["outcome"], "cold");
  const int prompt_tokens = first["usage"]["prompt_tokens"].get<int>();
  ASSERT_GT(prompt_tokens, shared + 8);

  // The same conversation in another session: the system prompt is shared, the question is not.
  json other_session = request;
  other_session["prompt_cache_key"] = "session-2";
  const json other = chat(*client, other_session);
  EXPECT_EQ(cached(other), shared);
  EXPECT_EQ(other["prompt_cache"]["scope"], "cross_session");

  // Its own session reuses everything.
  json same_session = request;
  same_session["user"] = "session-1";
  const json own = chat(*client, same_session);
  EXPECT_EQ(cached(own), prompt_tokens - 1);
  EXPECT_EQ(own["prompt_cache"]["scope"], "in_session");

  // No session: only the shared prefix, even for a resend of the same anonymous request.
  EXPECT_EQ(cached(chat(*client, request)), shared);
  EXPECT_EQ(cached(chat(*client, request)), shared);

  // Another system prompt shares nothing across sessions, not even its own first turns.
  const std::string private_system = "Answer like a pirate. " + system_prompt();
  chat(*client, conversation(private_system, "Where is the atlas?", {{"prompt_cache_key", "session-3"}}));
  EXPECT_EQ(cached(chat(*client, conversation(private_system, "Where is the atlas?", {{"prompt_cache_key", "session-4"}}))),
            0);
}

TEST(SessionIsolation, TenantIsolationSharesEveryPrefixAcrossSessions) {
  ServerProcess server;
  auto client = server.client();
  const json request = conversation(system_prompt(), "Where is the atlas of the northern coast?");
  json first = request;
  first["prompt_cache_key"] = "session-1";
  const int prompt_tokens = chat(*client, first)["usage"]["prompt_tokens"].get<int>();
  json second = request;
  second["prompt_cache_key"] = "session-2";
  EXPECT_EQ(cached(chat(*client, second)), prompt_tokens - 1);
}

TEST(SessionIsolation, ASharedPrefixWithoutSessionIsolationIsAStartupError) {
  SharedPrefixFile file;
  EXPECT_THROW(ServerProcess({.extra_args = {"--cache-shared-prefix-file", file.path()}}), std::runtime_error);
}

}  // namespace
}  // namespace prefixd::testing
