// The router's decision and its view of a backend, without servers.
#include <gtest/gtest.h>

#include <format>
#include <string>
#include <vector>

#include "router/backend.h"
#include "router/policy.h"

namespace prefixd::router {
namespace {

using nlohmann::json;

TEST(RouterPolicy, LongestHeldPrefixWins) {
  const std::vector<Candidate> candidates = {{.backend = 0, .matched_blocks = 2, .load = 0},
                                             {.backend = 1, .matched_blocks = 10, .load = 0},
                                             {.backend = 2, .matched_blocks = 0, .load = 0}};
  const Choice choice = choose_by_prefix(candidates, 16, 64, 0);
  EXPECT_EQ(choice.backend, 1u);
  EXPECT_EQ(choice.reason, Reason::prefix);
  EXPECT_EQ(choice.matched_tokens, 160);
}

TEST(RouterPolicy, LoadOutweighsASmallPrefix) {
  // 2 blocks (32 tokens) held by a backend running 3 requests lose to an idle one holding nothing.
  const std::vector<Candidate> candidates = {{.backend = 0, .matched_blocks = 2, .load = 3},
                                             {.backend = 1, .matched_blocks = 0, .load = 0}};
  const Choice choice = choose_by_prefix(candidates, 16, 64, 0);
  EXPECT_EQ(choice.backend, 1u);
  EXPECT_EQ(choice.reason, Reason::load);
  EXPECT_EQ(choice.matched_tokens, 0);
}

TEST(RouterPolicy, TiesGoToTheLeastLoadedThenRotate) {
  const std::vector<Candidate> loaded = {{.backend = 0, .matched_blocks = 4, .load = 1},
                                         {.backend = 1, .matched_blocks = 5, .load = 2}};
  // Equal scores with 16 tokens per request: 64 - 16 = 80 - 32 = 48.
  EXPECT_EQ(choose_by_prefix(loaded, 16, 16, 0).backend, 0u);
  EXPECT_EQ(choose_by_prefix(loaded, 16, 16, 1).backend, 0u);
  const std::vector<Candidate> idle = {{.backend = 0}, {.backend = 1}, {.backend = 2}};
  std::vector<std::size_t> picked;
  for (std::size_t turn = 0; turn < 3; ++turn) picked.push_back(choose_by_prefix(idle, 16, 64, turn).backend);
  EXPECT_EQ(picked, (std::vector<std::size_t>{0, 1, 2}));
}

TEST(RouterPolicy, ParsesPolicyNames) {
  EXPECT_EQ(parse_policy("prefix"), Policy::prefix);
  EXPECT_EQ(parse_policy("round_robin"), Policy::round_robin);
  EXPECT_THROW(parse_policy("random"), std::invalid_argument);
}

TEST(RouterBackend, ParsesOnlyHttpUrlsWithAPort) {
  EXPECT_EQ(parse_backend_url("http://127.0.0.1:8081").port, 8081);
  EXPECT_EQ(parse_backend_url("localhost:9000/").host, "localhost");
  EXPECT_THROW(parse_backend_url("https://a:1"), std::invalid_argument);
  EXPECT_THROW(parse_backend_url("http://a"), std::invalid_argument);
  EXPECT_THROW(parse_backend_url("http://a:0"), std::invalid_argument);
  EXPECT_THROW(parse_backend_url("http://a:x"), std::invalid_argument);
}

// A block's chain hash in hex, as summaries and chains list it: 64 digits ending in `tail`.
std::string hash(std::uint64_t tail) {
  return std::string(48, 'f') + std::format("{:016x}", tail);
}
const std::string a = hash(0xa), b = hash(0xb), c = hash(0xc), d = hash(0xd);

json summary(std::uint64_t version, const std::vector<std::string>& blocks, const std::string& server = "s1") {
  return {{"object", "prefixd.cache_summary"}, {"format", 1}, {"server_id", server}, {"block_size", 16},
          {"version", version}, {"load", {{"running", 1}, {"queued", 2}, {"slots", 4}}}, {"blocks", blocks}};
}

TEST(RouterBackend, MatchesTheLeadingBlocksOfAChain) {
  Backend backend("http://127.0.0.1:1");
  ASSERT_TRUE(backend.apply_summary(summary(3, {a, b, d})));
  const std::vector<std::string> chain = {a, b, c, d};
  EXPECT_EQ(backend.matched_blocks(chain), 2);
  EXPECT_EQ(backend.load(), 3);
  EXPECT_EQ(backend.summary_version(), 3u);
  backend.add_blocks(chain);  // optimistic: the request just sent there
  EXPECT_EQ(backend.matched_blocks(chain), 4);
}

TEST(RouterBackend, UnchangedKeepsTheSetAndAnotherProcessForcesAFullFetch) {
  Backend backend("http://127.0.0.1:1");
  ASSERT_TRUE(backend.apply_summary(summary(3, {a})));
  json unchanged = {{"object", "prefixd.cache_summary"}, {"format", 1}, {"server_id", "s1"}, {"version", 3},
                    {"unchanged", true}, {"load", {{"running", 0}, {"queued", 0}}}};
  EXPECT_TRUE(backend.apply_summary(unchanged));
  EXPECT_EQ(backend.block_count(), 1u);
  EXPECT_EQ(backend.load(), 0);
  unchanged["server_id"] = "s2";  // restarted: same version number, other content
  EXPECT_FALSE(backend.apply_summary(unchanged));
  EXPECT_FALSE(backend.summary_version().has_value());
  EXPECT_FALSE(backend.apply_summary(json{{"object", "other"}}));
}

TEST(RouterBackend, FollowingKvEventsTheBlocksComeFromTheStream) {
  Backend backend("http://10.1.2.3:8081");
  json advertised = summary(3, {a});
  advertised["kv_events"] = {{"endpoint", "tcp://*:5557"}, {"replay_endpoint", "tcp://0.0.0.0:5558"}, {"topic", ""},
                             {"block_hashes", "int"}};
  ASSERT_TRUE(backend.apply_summary(advertised));
  const auto source = backend.events_source();
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->endpoint, "tcp://10.1.2.3:5557") << "a wildcard bind is reached at the backend's host";
  EXPECT_EQ(source->replay_endpoint, "tcp://10.1.2.3:5558");
  backend.follow_events();
  const std::vector<std::string> chain = {a, b, c};
  events::WireBatch batch;
  batch.events = {events::WireCleared{}, events::WireStored{{0xa, 0xb}, std::nullopt, {}, 16, "GPU"},
                  events::WireStored{{0xa, 0xb, 0xc}, std::nullopt, {}, 16, "DISK"}};
  backend.apply_events(batch);
  EXPECT_EQ(backend.matched_blocks(chain), 3);
  batch.events = {events::WireRemoved{{0xc}, "DISK"}, events::WireRemoved{{0xb}, "GPU"}};
  backend.apply_events(batch);
  EXPECT_EQ(backend.matched_blocks(chain), 2) << "b is still on disk; c is in no tier";
  ASSERT_TRUE(backend.apply_summary(summary(9, {a, b, c, d})));
  EXPECT_EQ(backend.matched_blocks(chain), 2) << "a summary's list no longer counts";
  EXPECT_FALSE(backend.take_restart());
  ASSERT_TRUE(backend.apply_summary(summary(1, {}, "s2")));
  EXPECT_TRUE(backend.take_restart()) << "a new server id: follow its stream from the start";
  backend.resync();
  EXPECT_TRUE(backend.needs_blocks());
  ASSERT_TRUE(backend.apply_summary(summary(2, {c}, "s2")));
  EXPECT_FALSE(backend.needs_blocks());
  EXPECT_EQ(backend.matched_blocks(chain), 3) << "a resync's list counts beside the events";
  batch.events = {events::WireCleared{}};
  backend.apply_events(batch);
  EXPECT_EQ(backend.matched_blocks(chain), 0);
  backend.add_blocks(chain);
  EXPECT_EQ(backend.matched_blocks(chain), 3) << "the router's own credit";
}

TEST(RouterBackend, AStreamItCannotReachIsNotFollowed) {
  Backend backend("http://10.1.2.3:8081");
  json advertised = summary(3, {a});
  advertised["kv_events"] = {{"endpoint", "tcp://collector:5557"}, {"replay_endpoint", nullptr}};
  ASSERT_TRUE(backend.apply_summary(advertised));
  EXPECT_FALSE(backend.events_source().has_value()) << "the backend connects to a collector";
}

TEST(RouterBackend, DrainingForgetsTheSummaryVersion) {
  Backend backend("http://127.0.0.1:1");
  EXPECT_FALSE(backend.healthy());
  backend.set_healthy(true);
  ASSERT_TRUE(backend.apply_summary(summary(5, {a})));
  backend.set_healthy(false);
  EXPECT_FALSE(backend.summary_version().has_value());
  {
    Backend::InFlight one(backend);
    EXPECT_EQ(backend.in_flight(), 1);
  }
  EXPECT_EQ(backend.in_flight(), 0);
}

TEST(RouterBackend, ItsOwnRequestsInFlightAreCountedOnce) {
  Backend backend("http://127.0.0.1:9");
  Backend::InFlight first(backend);
  Backend::InFlight second(backend);
  // The backend reports these two (running 1, queued 2: one more from another client).
  ASSERT_TRUE(backend.apply_summary(summary(3, {a})));
  EXPECT_EQ(backend.load(), 3);
  {
    Backend::InFlight third(backend);
    EXPECT_EQ(backend.load(), 4);
  }
  EXPECT_EQ(backend.load(), 3);
}

}  // namespace
}  // namespace prefixd::router
