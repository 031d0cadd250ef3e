// The fuzz targets' seed corpora (fuzz/corpus/, written by prefixd_fuzz_seeds) are valid inputs of
// their decoders, so that fuzzing starts past every check. A change of a format or of the API that
// makes them stale fails here: rewrite them with `make fuzz-seeds`.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "api/prompt/chat_template.h"
#include "api/anthropic/anthropic_messages.h"
#include "api/openai/request_parser.h"
#include "api/responses/responses_api.h"
#include "cache/artifact.h"
#include "cache/disk_format.h"
#include "events/kv_event_wire.h"
#include "reseal.h"

namespace prefixd {
namespace {

namespace fs = std::filesystem;

struct Seed {
  std::string name;
  std::string bytes;
};

std::vector<Seed> seeds(const std::string& target) {
  std::vector<Seed> out;
  for (const auto& entry : fs::directory_iterator(fs::path(PREFIXD_FUZZ_CORPUS) / target)) {
    std::ifstream in(entry.path(), std::ios::binary);
    out.push_back({entry.path().filename().string(), std::string(std::istreambuf_iterator<char>(in), {})});
  }
  return out;
}

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

const api::ParseOptions kOptions{.model_names = {"default"}};

TEST(FuzzCorpus, RequestSeedsAreAcceptedByOneOfTheParsers) {
  const auto all = seeds("request_parser");
  EXPECT_GE(all.size(), 10u);
  int completions = 0, messages = 0, responses = 0;
  for (const Seed& seed : all) {
    const auto chat = api::parse_chat_request(seed.bytes, kOptions);
    const auto completion = api::parse_completion_request(seed.bytes, kOptions);
    const auto message = api::parse_messages_request(seed.bytes, kOptions, api::MessagesRoute::count_tokens);
    const auto response = api::parse_responses_request(seed.bytes, kOptions);
    EXPECT_TRUE(chat || completion || message || response) << seed.name << ": " << (chat ? "" : chat.error().message);
    completions += completion ? 1 : 0;
    messages += seed.name.starts_with("messages-") && message ? 1 : 0;
    responses += seed.name.starts_with("responses-") && response ? 1 : 0;
  }
  EXPECT_GE(completions, 3);
  EXPECT_GE(messages, 4) << "every Messages seed parses as one";
  EXPECT_GE(responses, 3) << "every Responses seed parses as one";
}

TEST(FuzzCorpus, RequestSeedsHoldAsManyValuesAsTheScanBeforeParsingCounts) {
  for (const Seed& seed : seeds("request_parser")) {
    const auto parsed = api::parse_json_object(seed.bytes, api::kDefaultMaxJsonNodes);
    ASSERT_TRUE(parsed) << seed.name;
    EXPECT_EQ(api::json_shape(seed.bytes, api::kMaxJsonDepth, api::kDefaultMaxJsonNodes).nodes, api::json_value_count(*parsed))
        << seed.name;
  }
}

TEST(FuzzCorpus, ChatTemplateSeedsRenderWithChatMl) {
  const auto all = seeds("chat_template");
  EXPECT_GE(all.size(), 5u);
  const auto chatml = api::ChatTemplate::create(std::string(api::chatml_template_source()));
  ASSERT_TRUE(chatml.has_value());
  bool tools = false;
  for (const Seed& seed : all) {
    const auto request = api::parse_chat_request(seed.bytes, kOptions);
    ASSERT_TRUE(request.has_value()) << seed.name << ": " << request.error().message;
    const auto text = chatml->render(request->chat);
    EXPECT_TRUE(text.has_value()) << seed.name << ": " << (text ? "" : text.error());
    tools = tools || request->chat.tools.is_array();
  }
  EXPECT_TRUE(tools) << "a seed with tools";
}

TEST(FuzzCorpus, DiskRecordSeedsAreValidRecordsOfBothKinds) {
  const auto all = seeds("disk_record");
  int segments = 0;
  int checkpoints = 0;
  for (const Seed& seed : all) {
    const cache::DecodedRecord decoded = cache::decode_record(bytes_of(seed.bytes), nullptr);
    ASSERT_EQ(decoded.fault, cache::RecordFault::none) << seed.name << ": " << cache::record_fault_name(decoded.fault);
    (decoded.record.meta.kind == cache::RecordKind::segment ? segments : checkpoints) += 1;
  }
  EXPECT_GE(segments, 3);
  EXPECT_GE(checkpoints, 1);
}

TEST(FuzzCorpus, ArtifactSeedsAreValidArtifactsWithAndWithoutACheckpoint) {
  const auto all = seeds("artifact");
  bool with_checkpoint = false;
  bool without = false;
  for (const Seed& seed : all) {
    ASSERT_GE(seed.bytes.size(), 48u);
    cache::Digest model{};
    std::copy_n(seed.bytes.begin() + 16, model.size(), model.begin());
    const cache::Artifact artifact = cache::decode_artifact(bytes_of(seed.bytes), model, seed.name);
    ASSERT_FALSE(artifact.records.empty()) << seed.name;
    (artifact.records.back().meta.kind == cache::RecordKind::checkpoint ? with_checkpoint : without) = true;
  }
  EXPECT_TRUE(with_checkpoint);
  EXPECT_TRUE(without);
}

// The fuzz targets reseal mutated inputs (fuzz/reseal.h); resealing must recompute each checksum
// exactly where the encoders put it, or the targets stop at the first check. A checksum written at
// the wrong place changes a valid file, so a format change that moves a field breaks this test, not
// only the fuzz run.
TEST(FuzzCorpus, KvEventSeedsDecodeToEveryEventKind) {
  bool stored = false, removed = false, cleared = false;
  const auto corpus = seeds("kv_event_batch");
  ASSERT_FALSE(corpus.empty());
  for (const Seed& seed : corpus) {
    const auto batch = events::decode_batch(bytes_of(seed.bytes));
    ASSERT_TRUE(batch) << seed.name << ": " << batch.error();
    for (const events::WireEvent& e : batch->events) {
      stored |= std::holds_alternative<events::WireStored>(e);
      removed |= std::holds_alternative<events::WireRemoved>(e);
      cleared |= std::holds_alternative<events::WireCleared>(e);
    }
  }
  EXPECT_TRUE(stored && removed && cleared);
}

TEST(FuzzCorpus, ResealingAValidSeedLeavesItUnchanged) {
  for (const auto& [target, reseal] :
       {std::pair<std::string, bool (*)(std::span<std::uint8_t>)>{"disk_record", fuzz::reseal_record},
        std::pair<std::string, bool (*)(std::span<std::uint8_t>)>{"artifact", fuzz::reseal_artifact}}) {
    const auto all = seeds(target);
    ASSERT_FALSE(all.empty()) << target;
    for (const Seed& seed : all) {
      std::vector<std::uint8_t> bytes(seed.bytes.begin(), seed.bytes.end());
      ASSERT_TRUE(reseal(bytes)) << seed.name;
      EXPECT_EQ(std::string(bytes.begin(), bytes.end()), seed.bytes) << target << "/" << seed.name << ": resealing a valid file changed it";
    }
  }
}

}  // namespace
}  // namespace prefixd
