// Artifacts through the prompt cache over the FakeEngine: a saved artifact carries the caller's
// manifest and its tokens, its header reads back without its records, a load hands the verified
// artifact to `admit` before any tier changes, and a throwing `admit` leaves everything as it was.
#include <stdexcept>

#include "cache/artifact.h"
#include "support/cache_fixture.h"

namespace prefixd::cache {
namespace {

using prefixd::testing::token_run;

struct CacheArtifacts : prefixd::testing::CacheFixture {
  const std::vector<engine::Token> prompt = token_run(0, 44);
  // Artifacts name their namespace by its 32-byte digest, as the API computes it.
  const std::string ns = std::string(32, 'n');
  const RequestKey key{ns, "s"};
  const std::string manifest = R"({"id":"module-7","start":0,"chain":["aa","bb"]})";
  std::filesystem::path artifact() const { return dir / "module.prefixd"; }
};

TEST_F(CacheArtifacts, ASavedArtifactCarriesItsManifestAndTokens) {
  std::filesystem::create_directories(dir);
  auto cache = make();
  serve(*cache, key, prompt);
  const ArtifactInfo saved = cache->save_artifact(key, prompt, artifact(), manifest);
  EXPECT_EQ(saved.tokens, 44);
  EXPECT_EQ(saved.manifest, manifest);
  EXPECT_EQ(saved.token_ids, prompt);
  EXPECT_EQ(saved.tokens, cache->held(key, prompt).tokens) << "save_artifact saves what held() says";

  const Artifact header = read_artifact_header(artifact());
  EXPECT_EQ(header.manifest, manifest);
  EXPECT_EQ(header.tokens, prompt);
  EXPECT_TRUE(header.records.empty());

  cache->reset();
  std::string seen;
  const ArtifactInfo loaded = cache->load_artifact(artifact(), {}, [&](const Artifact& a) { seen = a.manifest; });
  EXPECT_EQ(seen, manifest);
  EXPECT_EQ(loaded.manifest, manifest);
  EXPECT_EQ(loaded.token_ids, prompt);
  EXPECT_EQ(cache->held(key, prompt).host, 44);
  EXPECT_EQ(PrefixCacheProbe(*cache).verify(), "");
}

TEST_F(CacheArtifacts, AThrowingAdmitLeavesEveryTierUnchanged) {
  std::filesystem::create_directories(dir);
  auto cache = make();
  serve(*cache, key, prompt);
  cache->save_artifact(key, prompt, artifact(), manifest);
  cache->reset();
  PrefixCacheProbe(*cache).flush_disk();
  const CacheStats before = cache->stats();
  const std::int64_t files = files_on_disk();
  bool called = false;
  EXPECT_THROW(cache->load_artifact(artifact(), {},
                                    [&](const Artifact& a) {
                                      called = true;
                                      EXPECT_EQ(a.tokens, prompt) << "the whole artifact, verified";
                                      throw std::runtime_error("refused by the caller");
                                    }),
               std::runtime_error);
  EXPECT_TRUE(called);
  PrefixCacheProbe(*cache).flush_disk();
  const CacheStats after = cache->stats();
  EXPECT_EQ(after.host.entries, before.host.entries);
  EXPECT_EQ(after.host.bytes, before.host.bytes);
  EXPECT_EQ(after.checkpoints.entries, before.checkpoints.entries);
  EXPECT_EQ(after.disk.files, before.disk.files);
  EXPECT_EQ(after.disk.writes, before.disk.writes);
  EXPECT_EQ(files_on_disk(), files);
  EXPECT_EQ(cache->held(key, prompt).tokens, 0);

  // A refused artifact is never admitted.
  EXPECT_THROW(cache->load_artifact(dir / "missing.prefixd", {}, [](const Artifact&) { FAIL() << "admitted"; }),
               ArtifactError);
}

TEST_F(CacheArtifacts, AManifestLongerThanTheLimitIsRefusedAndNothingIsWritten) {
  std::filesystem::create_directories(dir);
  auto cache = make();
  serve(*cache, key, prompt);
  EXPECT_THROW(cache->save_artifact(key, prompt, artifact(), std::string(kMaxArtifactManifestBytes + 1, 'x')),
               std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(artifact()));
  EXPECT_EQ(cache->save_artifact(key, prompt, artifact(), std::string(kMaxArtifactManifestBytes, 'x')).tokens, 44);
}

TEST_F(CacheArtifacts, ACheckpointFamilyArtifactEndsAtAKeptState) {
  family = engine::ModelFamily::hybrid;
  std::filesystem::create_directories(dir);
  auto cache = make();
  const RequestKey turn{ns, "s", {32}};
  serve(*cache, turn, prompt);
  const ArtifactInfo saved = cache->save_artifact(turn, prompt, artifact(), manifest);
  EXPECT_EQ(saved.tokens, 44);
  EXPECT_EQ(saved.checkpoints, 1);
  EXPECT_EQ(saved.tokens, cache->held(turn, prompt).tokens);
  cache->reset();
  const ArtifactInfo loaded = cache->load_artifact(artifact());
  EXPECT_EQ(loaded.manifest, manifest);
  EXPECT_EQ(cache->held(turn, prompt).tokens, 44);
  EXPECT_EQ(cache->held(turn, prompt).checkpoint, 44);
  EXPECT_EQ(PrefixCacheProbe(*cache).verify(), "");
}

TEST_F(CacheArtifacts, AnotherModelsArtifactIsRefusedWithoutADiskOrSharedTier) {
  std::filesystem::create_directories(dir);
  {
    auto cache = make(/*disk=*/false);
    serve(*cache, key, prompt);
    cache->save_artifact(key, prompt, artifact(), manifest);
    EXPECT_EQ(read_artifact_header(artifact()).model, cache->summary().model_key)
        << "an artifact names the model that made it, whatever tiers the server has";
  }
  engine.reset();
  family = engine::ModelFamily::recurrent;  // another fingerprint
  auto other = make(/*disk=*/false);
  try {
    other->load_artifact(artifact(), {}, [](const Artifact&) { FAIL() << "admitted"; });
    FAIL() << "another model's artifact was loaded";
  } catch (const ArtifactError& e) {
    EXPECT_EQ(e.kind(), ArtifactError::Kind::model);
  }
  EXPECT_EQ(other->held(key, prompt).tokens, 0);
}

}  // namespace
}  // namespace prefixd::cache
