// A key's path in the prompt cache (PrefixCache::held, PrefixCache::forget) over the FakeEngine:
// held() says how much of a prefix each tier rebuilds and changes nothing; forget() removes a path
// past a position from every tier — device cells counted by the engine, host segments, disk files,
// checkpoints — and leaves what another path shares and what running requests use.
#include "support/cache_fixture.h"

namespace prefixd::cache {
namespace {

using prefixd::testing::joined;
using prefixd::testing::token_run;

struct CachePaths : prefixd::testing::CacheFixture {
  const std::vector<engine::Token> shared = token_run(0, 64);
  const std::vector<engine::Token> a = joined(shared, token_run(100, 40));  // 104 tokens
  const std::vector<engine::Token> b = joined(shared, token_run(150, 50));  // 114 tokens
  const RequestKey key{"ns", "s"};

  void check(PrefixCache& cache, const std::string& where) {
    EXPECT_EQ(holder_cells(), PrefixCacheProbe(cache).device_cells()) << where;
    EXPECT_EQ(PrefixCacheProbe(cache).verify(), "") << where;
  }
};

TEST_F(CachePaths, HeldSaysWhereEachTierReachesAndChangesNothing) {
  auto cache = make();
  serve(*cache, key, a);
  PrefixCacheProbe(*cache).flush_disk();
  const CacheStats before = cache->stats();
  const HeldPrefix held = cache->held(key, a);
  EXPECT_EQ(held.tokens, 104) << "the whole prefix, not one token short";
  EXPECT_EQ(held.device, 104);
  EXPECT_EQ(held.host, 104) << "cumulative: the device's part counts";
  EXPECT_EQ(held.disk, 104);
  EXPECT_EQ(held.checkpoint, 0);
  EXPECT_EQ(cache->held(key, joined(a, token_run(200, 9))).tokens, 104) << "a longer query: what is held of it";
  EXPECT_EQ(cache->held(key, std::vector<engine::Token>(a.begin(), a.begin() + 3)).tokens, 0) << "below min_prefix";
  EXPECT_EQ(cache->held(RequestKey{"other", "s"}, a).tokens, 0) << "another namespace";
  const CacheStats after = cache->stats();
  EXPECT_EQ(after.requests.hits, before.requests.hits);
  EXPECT_EQ(after.requests.misses, before.requests.misses);
  EXPECT_EQ(after.disk.reads, before.disk.reads);
  EXPECT_EQ(after.host.entries, before.host.entries);
  EXPECT_EQ(after.device.cells, before.device.cells);

  // Demoted: the host tier holds it; on disk it is held too.
  cache->release_device_cells(1 << 20);
  const HeldPrefix demoted = cache->held(key, a);
  EXPECT_EQ(demoted.device, 0);
  EXPECT_EQ(demoted.host, 104);
  EXPECT_EQ(demoted.tokens, 104);
  EXPECT_EQ(cache->stats().host.entries, 13) << "held() promoted nothing";
}

TEST_F(CachePaths, HeldHonoursASessionWall) {
  auto cache = make(false);
  const RequestKey alice{"ns", "alice", {}, {}, 32};
  const RequestKey bob{"ns", "bob", {}, {}, 32};
  serve(*cache, alice, a);
  EXPECT_EQ(cache->held(alice, a).tokens, 104);
  EXPECT_EQ(cache->held(bob, a).tokens, 32) << "past the wall only alice's own";
  cache->release_device_cells(1 << 20);
  EXPECT_EQ(cache->held(alice, a).tokens, 104);
  EXPECT_EQ(cache->held(bob, a).tokens, 32);
}

TEST_F(CachePaths, ForgettingOneOfTwoForkedKeysKeepsTheSharedPrefixAndTheOther) {
  auto cache = make();
  serve(*cache, key, a);
  serve(*cache, key, b);
  PrefixCacheProbe(*cache).flush_disk();
  ASSERT_EQ(PrefixCacheProbe(*cache).device_cells(), 64 + 40 + 50);
  const CacheStats before = cache->stats();

  const ResetReport report = cache->forget(key, a, 64);
  check(*cache, "after forgetting a past 64");
  const CacheStats after = cache->stats();
  EXPECT_EQ(PrefixCacheProbe(*cache).device_cells(), 64 + 50) << "exactly a's own cells";
  EXPECT_EQ(before.device.bytes - after.device.bytes, 40 * engine->model().kv_bytes_per_token);
  EXPECT_EQ(after.disk.segments, before.disk.segments - 5) << "a's five files past 64";
  EXPECT_EQ(report.bytes, held_bytes(before) - held_bytes(after)) << "the report is exact";
  EXPECT_EQ(report.entries, 1 + 5);
  EXPECT_EQ(report.locked_entries, 0);
  EXPECT_EQ(cache->held(key, b).tokens, 114) << "the other key's whole path";
  EXPECT_EQ(cache->held(key, a).tokens, 64) << "the shared prefix stays";

  // keep = 0: the whole path goes, in every tier.
  const ResetReport all = cache->forget(key, b, 0);
  check(*cache, "after forgetting b");
  EXPECT_EQ(cache->held(key, b).tokens, 0);
  EXPECT_EQ(PrefixCacheProbe(*cache).device_cells(), 0);
  EXPECT_EQ(cache->stats().disk.files, 0);
  EXPECT_EQ(files_on_disk(), 0);
  EXPECT_EQ(all.bytes, held_bytes(after));
}

TEST_F(CachePaths, ForgetCutsADeviceEntryBackToKeep) {
  auto cache = make(false);
  serve(*cache, key, a);
  const ResetReport report = cache->forget(key, a, 70);
  check(*cache, "after forgetting past 70");
  EXPECT_EQ(report.entries, 1);
  EXPECT_EQ(PrefixCacheProbe(*cache).device_cells(), 70);
  EXPECT_EQ(report.bytes, 34 * engine->model().kv_bytes_per_token);
  EXPECT_EQ(cache->held(key, a).tokens, 70);
}

TEST_F(CachePaths, ForgetRemovesADemotedPathFromTheHostTier) {
  auto cache = make(false);
  serve(*cache, key, a);
  serve(*cache, key, joined(token_run(10, 20), token_run(40, 20)));  // another path stays
  cache->release_device_cells(1 << 20);
  const CacheStats before = cache->stats();
  ASSERT_EQ(PrefixCacheProbe(*cache).device_cells(), 0);
  ASSERT_EQ(cache->held(key, a).host, 104);

  // Keep 20 lies inside the segment [16, 24): it holds positions below keep and stays; every
  // later one of the path goes.
  const ResetReport report = cache->forget(key, a, 20);
  check(*cache, "after forgetting past 20");
  EXPECT_EQ(cache->held(key, a).tokens, 24);
  EXPECT_EQ(cache->stats().host.entries, before.host.entries - 10);
  EXPECT_EQ(report.bytes, before.host.bytes - cache->stats().host.bytes);
  EXPECT_EQ(cache->held(key, joined(token_run(10, 20), token_run(40, 20))).tokens, 40);

  cache->forget(key, a, 0);
  EXPECT_EQ(cache->held(key, a).tokens, 0);
  EXPECT_EQ(cache->stats().host.entries, 5) << "the other path's segments only";
}

TEST_F(CachePaths, ForgetRemovesTheFilesOfAPathThatIsOnlyOnDisk) {
  {
    auto cache = make();
    serve(*cache, key, a);
    serve(*cache, key, b);
  }
  engine->clear();  // a restart: the context is empty, the files stay
  auto cache = make();
  ASSERT_EQ(cache->held(key, a).disk, 104);
  ASSERT_EQ(cache->held(key, a).host, 0);
  const std::int64_t files = files_on_disk();
  const ResetReport report = cache->forget(key, a, 64);
  EXPECT_EQ(files_on_disk(), files - 5);
  EXPECT_EQ(report.entries, 5);
  EXPECT_EQ(cache->held(key, a).tokens, 64);
  EXPECT_EQ(cache->held(key, b).tokens, 114);
  cache->forget(key, a, 0);
  EXPECT_EQ(cache->held(key, b).tokens, 0) << "b's prefix [0, 64) was a's too";
  EXPECT_EQ(files_on_disk(), 0) << "b's files past 64 extended a's path: nothing could reach them any more";
  EXPECT_EQ(PrefixCacheProbe(*cache).verify(), "");
}

TEST_F(CachePaths, ForgetKeepsTheCellsARunningRequestUses) {
  auto cache = make(false);
  serve(*cache, key, a);
  const auto longer = joined(a, token_run(220, 10));
  ASSERT_EQ(PrefixCacheProbe(*cache).acquire(key, longer, 0).reused, 104);
  const ResetReport report = cache->forget(key, a, 0);
  EXPECT_EQ(report.locked_entries, 1);
  EXPECT_EQ(report.entries, 0);
  EXPECT_EQ(PrefixCacheProbe(*cache).device_cells(), 104) << "locked cells are never given up";
  check(*cache, "while the request runs");
  cache->release(0);
  cache->forget(key, a, 0);
  EXPECT_EQ(PrefixCacheProbe(*cache).device_cells(), 0);
  check(*cache, "after it ended");
}

TEST_F(CachePaths, ACheckpointFamilyDropsItsEntryAndTheCheckpointsPastKeep) {
  family = engine::ModelFamily::hybrid;
  auto cache = make(false);
  const RequestKey turn{"ns", "s", {32}};
  const auto prompt = token_run(0, 50);
  serve(*cache, turn, prompt);
  ASSERT_EQ(cache->reuse_mode(), ReuseMode::checkpoints);
  EXPECT_EQ(cache->held(turn, prompt).tokens, 50) << "the entry keeps the state at its end";

  // The entry cannot be cut back to 32: it is dropped; checkpoints at 49 and 50 go, 32 stays.
  cache->release_device_cells(1 << 20);  // demoted: segments to the host tier, its end state a checkpoint
  ASSERT_EQ(cache->held(turn, prompt).checkpoint, 50);
  const CacheStats before = cache->stats();
  const ResetReport report = cache->forget(turn, prompt, 32);
  check(*cache, "after forgetting past 32");
  const HeldPrefix held = cache->held(turn, prompt);
  EXPECT_EQ(held.checkpoint, 32);
  EXPECT_EQ(held.tokens, 32);
  EXPECT_EQ(cache->stats().checkpoints.entries, 1);
  EXPECT_EQ(report.bytes, held_bytes(before) - held_bytes(cache->stats()));

  // A device entry of the path is dropped whole.
  serve(*cache, turn, prompt);
  ASSERT_EQ(cache->stats().device.entries, 1);
  cache->forget(turn, prompt, 32);
  check(*cache, "after forgetting the entry");
  EXPECT_EQ(cache->stats().device.entries, 0);
  EXPECT_EQ(cache->held(turn, prompt).tokens, 32);
}

TEST_F(CachePaths, ForgetKeepsTheSegmentThatHoldsPositionsBelowKeep) {
  // 8-token segments: `module` ends at 60, inside the segment [56, 64) of the longer path `path`,
  // which covers the module's own tail [56, 60) (a lookup compares tokens: it finds the module there).
  const auto module = token_run(0, 60);
  const auto path = joined(module, token_run(100, 40));  // 100 tokens
  auto cache = make();
  serve(*cache, key, module);
  serve(*cache, key, path);
  cache->release_device_cells(1 << 20);
  PrefixCacheProbe(*cache).flush_disk();
  check(*cache, "after demotion");
  ASSERT_EQ(cache->held(key, module).host, 60);
  const CacheStats before = cache->stats();
  const std::int64_t files = files_on_disk();

  const ResetReport report = cache->forget(key, path, 60);
  check(*cache, "after forgetting past 60");
  EXPECT_EQ(cache->held(key, module).host, 60) << "the segment [56, 64) holds the module's tail";
  EXPECT_EQ(PrefixCacheProbe(*cache).acquire(key, joined(module, token_run(200, 2)), 0).reused, 60);
  cache->release(0);
  check(*cache, "after the module's reuse");
  EXPECT_EQ(cache->held(key, path).tokens, 64);
  const CacheStats after = cache->stats();
  EXPECT_EQ(after.host.entries, before.host.entries - 5) << "[64, 72) ... [96, 100) only";
  EXPECT_EQ(files_on_disk(), files - 5);
  EXPECT_EQ(report.entries, 10);
  EXPECT_EQ(report.bytes, held_bytes(before) - held_bytes(after)) << "kept bytes are not counted as freed";

  cache.reset();
  engine->clear();
  cache = make();
  EXPECT_EQ(cache->held(key, module).disk, 60) << "and its file, after a restart";
}

// A prefix whose last segment is a tail of a longer stored segment is held as far as the tail on
// disk too, as on the host: a restore's disk walk compares tokens and finds it there. (held() said
// 56 for a 60-token prefix whose file [56, 64) belonged to a longer path, when the write-behind had
// not written the shorter prefix's own tail [56, 60) before the longer segment replaced it.)
TEST_F(CachePaths, ATailInsideALongerFileIsHeldOnDisk) {
  const auto module = token_run(0, 60);
  const auto path = joined(module, token_run(100, 40));
  auto cache = make();
  serve(*cache, key, path);  // only the longer path: its segment [56, 64) holds the module's tail
  cache->release_device_cells(1 << 20);
  PrefixCacheProbe(*cache).flush_disk();
  EXPECT_EQ(cache->held(key, module).host, 60);
  cache.reset();
  engine->clear();
  cache = make();
  const HeldPrefix held = cache->held(key, module);
  EXPECT_EQ(held.host, 0);
  EXPECT_EQ(held.disk, 60) << "the tail [56, 60) lies in the file of [56, 64)";
  EXPECT_EQ(PrefixCacheProbe(*cache).acquire(key, joined(module, token_run(200, 2)), 0).reused, 60) << "and a request restores it";
  cache->release(0);
  check(*cache, "after the restore");
}

// What a key is said to hold is exactly what a restore reaches, on every tier: a prompt that leaves
// a stored path inside a grid segment is held up to where it leaves it, as far as a restore takes
// the stored segment there (held() stopped at the grid line, 80, while a restore reached 84).
TEST_F(CachePaths, HeldIsWhatARestoreReachesWhereAPromptLeavesAStoredSegment) {
  const RequestKey key{std::string(32, 'n'), "s"};  // artifacts name a namespace by its digest
  const auto query = joined(joined(shared, token_run(100, 20)), token_run(200, 9));  // leaves a at 84
  auto cache = make();
  serve(*cache, key, a);
  cache->release_device_cells(1 << 20);
  PrefixCacheProbe(*cache).flush_disk();
  const HeldPrefix held = cache->held(key, query);
  EXPECT_EQ(held.device, 0);
  EXPECT_EQ(held.host, 84) << "the first 4 tokens of a's segment [80, 88)";
  EXPECT_EQ(held.tokens, 84);
  const Acquisition from_host = PrefixCacheProbe(*cache).acquire(key, query, 0);
  EXPECT_EQ(from_host.reused, held.tokens) << "a restore from the host tier reaches what held() said";
  EXPECT_EQ(from_host.tier, Tier::host);
  cache->release(0);
  check(*cache, "after the host restore");

  // Only the disk holds it after a restart: the same, from the disk's files.
  cache.reset();
  engine->clear();
  cache = make();
  const HeldPrefix on_disk = cache->held(key, query);
  EXPECT_EQ(on_disk.host, 0);
  EXPECT_EQ(on_disk.disk, 84);
  const Acquisition from_disk = PrefixCacheProbe(*cache).acquire(key, query, 0);
  EXPECT_EQ(from_disk.reused, on_disk.tokens) << "a restore from disk reaches what held() said";
  cache->release(0);
  check(*cache, "after the disk restore");

  // An artifact of the query carries exactly that prefix, its last record cut back to the 4 tokens,
  // and another server loads it and restores the whole of it.
  const std::filesystem::path file = dir / "query.prefixd";
  const ArtifactInfo saved = cache->save_artifact(key, query, file);
  EXPECT_EQ(saved.tokens, 84);
  EXPECT_EQ(saved.segments, 11) << "ten grid segments and the 4-token part";
  cache.reset();
  engine->clear();
  std::filesystem::remove_all(dir / "disk");
  cache = make(false);
  EXPECT_EQ(cache->load_artifact(file).tokens, 84);
  EXPECT_EQ(cache->held(key, query).host, 84);
  EXPECT_EQ(PrefixCacheProbe(*cache).acquire(key, query, 0).reused, 84);
  cache->release(0);
  check(*cache, "after the artifact's restore");
}

}  // namespace
}  // namespace prefixd::cache
