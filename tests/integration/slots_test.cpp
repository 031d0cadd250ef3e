// llama-server's /slots on the real `prefixd serve`: the slots listed, a slot's cached sequence
// saved to --slot-save-path, erased from the cache and restored from the file, and bad input
// refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "server_process.h"
#include "support/disk_fixtures.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

std::string story() {
  std::string text;
  for (int i = 0; i < 8; ++i) text += "The river ran past the old mill and the children counted the boats. ";
  return text;
}

int cached_on_resend(httplib::Client& client) {
  const auto reply = post_json(client, "/completion", {{"prompt", story()}, {"n_predict", 2}, {"temperature", 0}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body.value("tokens_cached", -1);
}

TEST(Slots, ListedSavedErasedAndRestored) {
  const TempDir dir("slots");
  ServerProcess server({.extra_args = {"--slot-save-path", dir.path().string()}, .parallel = 2});
  auto client = server.client();

  const auto idle = get_json(*client, "/slots");
  ASSERT_EQ(idle.status, 200) << idle.raw;
  ASSERT_EQ(idle.body.size(), 2u) << "one per --parallel sequence";
  for (const json& slot : idle.body) {
    EXPECT_EQ(slot["is_processing"], false);
    EXPECT_EQ(slot["id_task"], -1);
    EXPECT_EQ(slot["n_ctx"], 2048);
    EXPECT_EQ(slot["n_cached"], 0);
  }
  EXPECT_EQ(get_json(*client, "/slots?fail_on_no_slot=1").status, 200);

  // A request runs in slot 0 (the first free one) and leaves its sequence to the cache.
  const auto first = post_json(*client, "/completion", {{"prompt", story()}, {"n_predict", 2}, {"temperature", 0}});
  ASSERT_EQ(first.status, 200) << first.raw;
  const int prompt = first.body["tokens_evaluated"];
  const auto after = get_json(*client, "/slots");
  ASSERT_EQ(after.status, 200);
  EXPECT_GE(after.body[0]["n_cached"].get<int>(), prompt) << after.raw;
  EXPECT_GT(cached_on_resend(*client), 0);

  const auto saved = post_json(*client, "/slots/0?action=save", {{"filename", "story.bin"}});
  ASSERT_EQ(saved.status, 200) << saved.raw;
  EXPECT_EQ(saved.body["id_slot"], 0);
  EXPECT_EQ(saved.body["filename"], "story.bin");
  EXPECT_GE(saved.body["n_saved"].get<int>(), prompt - 1);
  EXPECT_GT(saved.body["n_written"].get<int>(), 0);
  EXPECT_TRUE(saved.body["timings"].contains("save_ms"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "story.bin"));

  // Erased, the prompt is computed again; restored from the file, it is a hit again.
  const auto erased = post_json(*client, "/slots/0?action=erase", json::object());
  ASSERT_EQ(erased.status, 200) << erased.raw;
  EXPECT_GT(erased.body["n_erased"].get<int>(), 0);
  EXPECT_EQ(cached_on_resend(*client), 0) << "erase dropped the slot's sequence from every tier";
  // That resend left the prompt in slot 0 once more: erased again before the restore.
  ASSERT_EQ(post_json(*client, "/slots/0?action=erase", json::object()).status, 200);
  const auto restored = post_json(*client, "/slots/1?action=restore", {{"filename", "story.bin"}});
  ASSERT_EQ(restored.status, 200) << restored.raw;
  EXPECT_EQ(restored.body["id_slot"], 1);
  EXPECT_EQ(restored.body["n_restored"], saved.body["n_saved"]);
  EXPECT_EQ(restored.body["n_read"], saved.body["n_written"]);
  EXPECT_GE(cached_on_resend(*client), prompt - 1) << "restored, the prefix is served from the cache";
}

TEST(Slots, BadRequestsAreRefusedByName) {
  ServerProcess server({.parallel = 2});
  auto client = server.client();
  const auto no_path = post_json(*client, "/slots/0?action=save", {{"filename", "x.bin"}});
  EXPECT_EQ(no_path.status, 501) << no_path.raw;
  EXPECT_NE(no_path.body["error"]["message"].get<std::string>().find("--slot-save-path"), std::string::npos);
  const auto action = post_json(*client, "/slots/0?action=flush", json::object());
  EXPECT_EQ(action.status, 400);
  EXPECT_EQ(action.body["error"]["param"], "action");
  for (const char* path : {"/slots/2?action=erase", "/slots/x?action=erase", "/slots/-1?action=erase"}) {
    const auto bad = post_json(*client, path, json::object());
    EXPECT_EQ(bad.status, 400) << path;
    EXPECT_EQ(bad.body["error"]["param"], "id_slot") << path;
  }
  const TempDir dir("slots-bad");
  ServerProcess saving({.extra_args = {"--slot-save-path", dir.path().string()}, .parallel = 1});
  auto c = saving.client();
  const auto traversal = post_json(*c, "/slots/0?action=restore", {{"filename", "../etc/passwd"}});
  EXPECT_EQ(traversal.status, 400);
  EXPECT_EQ(traversal.body["error"]["param"], "filename");
  const auto missing = post_json(*c, "/slots/0?action=restore", {{"filename", "none.bin"}});
  EXPECT_EQ(missing.status, 404) << missing.raw;
  const auto empty = post_json(*c, "/slots/0?action=save", {{"filename", "empty.bin"}});
  EXPECT_EQ(empty.status, 404) << "nothing ran in the slot yet: " << empty.raw;
  auto get = c->Post("/slots", "{}", "application/json");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
}

}  // namespace
}  // namespace prefixd::testing
