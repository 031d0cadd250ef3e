// KV events (cache/kv_events.h, events/): the cache's event stream, applied to an empty set per
// tier, rebuilds exactly what each tier holds (PrefixCache::summary by medium) through hits,
// demotions to the host tier, a disk tier across a restart, a reset and a scope's reset; a stored
// run's hashes are its tokens' chain; scopes the filter refuses never appear; the wire encoding
// decodes back to the same events in both hash forms; adapter labels follow blocks to every tier
// and across a restart (DIR/labels); the publisher numbers batches and replays
// them, including those a full queue kept off the live stream; a forwarder relays several
// publishers' streams on one address, each whole under its topic.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "cache/changed_keys.h"
#include "cache/kv_events.h"
#include "cache/namespace_labels.h"
#include "cache/scope.h"
#include "events/kv_event_forwarder.h"
#include "events/kv_event_publisher.h"
#include "events/kv_event_wire.h"
#include "support/cache_fixture.h"

namespace prefixd::cache {
namespace {

using prefixd::testing::joined;
using prefixd::testing::token_run;

// What a subscriber rebuilds: each tier's blocks.
struct Rebuilt {
  std::array<std::set<Digest>, kMediumCount> blocks;
  std::int64_t cleared = 0;
  void apply(const std::vector<KvEvent>& events) {
    for (const KvEvent& e : events) {
      if (const auto* s = std::get_if<BlocksStored>(&e)) {
        for (const Digest& h : s->hashes) EXPECT_TRUE(blocks[static_cast<int>(s->medium)].insert(h).second) << "stored twice";
      } else if (const auto* r = std::get_if<BlocksRemoved>(&e)) {
        for (const Digest& h : r->hashes) EXPECT_EQ(blocks[static_cast<int>(r->medium)].erase(h), 1u) << "removed unheld";
      } else {
        ++cleared;
        for (auto& set : blocks) set.clear();
      }
    }
  }
};

struct KvEventsTest : prefixd::testing::CacheFixture {
  const std::vector<engine::Token> shared = token_run(0, 64);
  const std::vector<engine::Token> a = joined(shared, token_run(100, 40));  // 26 blocks of 4
  const std::vector<engine::Token> b = joined(shared, token_run(150, 50));  // 28 blocks
  const RequestKey key{"ns", "s"};
  Rebuilt rebuilt;

  // Takes the events and checks the rebuilt sets against the cache's own view of every tier.
  void expect_in_step(PrefixCache& cache, const std::string& when) {
    const std::vector<KvEvent> events = cache.take_kv_events();
    check_runs(cache, events);
    rebuilt.apply(events);
    const CacheSummary summary = cache.summary(std::nullopt, true);
    ASSERT_EQ(summary.by_medium.size(), static_cast<std::size_t>(kMediumCount));
    for (int m = 0; m < kMediumCount; ++m) {
      const std::set<Digest> held(summary.by_medium[m].begin(), summary.by_medium[m].end());
      EXPECT_EQ(rebuilt.blocks[m], held) << when << ": " << medium_name(static_cast<Medium>(m));
    }
  }

  // A stored run's hashes are the chain of its tokens: from its parent, or a run of a served
  // prompt's chain when it starts the prefix.
  void check_runs(PrefixCache& cache, const std::vector<KvEvent>& events) {
    const BlockHasher hasher(config.hash, config.block_size);
    for (const KvEvent& e : events) {
      const auto* s = std::get_if<BlocksStored>(&e);
      if (s == nullptr) continue;
      ASSERT_EQ(s->tokens.size(), s->hashes.size() * 4);
      if (s->parent) {
        Digest h = *s->parent;
        for (std::size_t i = 0; i < s->hashes.size(); ++i) {
          h = hasher.next(h, std::span(s->tokens).subspan(i * 4, 4));
          EXPECT_EQ(h, s->hashes[i]) << "block " << i << " of a run";
        }
      } else {
        const std::vector<Digest> chain = cache.chain_of(key, s->tokens);
        EXPECT_EQ(chain, s->hashes) << "a run from the root is the chain of its tokens";
      }
    }
  }
};

TEST_F(KvEventsTest, TheStreamRebuildsEveryTiersBlocks) {
  auto cache = make();
  cache->record_kv_events([](const ScopeId&) { return true; });
  expect_in_step(*cache, "empty");
  EXPECT_EQ(rebuilt.cleared, 1) << "a subscriber starts over";
  serve(*cache, key, a);
  PrefixCacheProbe(*cache).flush_disk();
  expect_in_step(*cache, "after a");
  EXPECT_EQ(rebuilt.blocks[0].size(), 26u);
  EXPECT_EQ(rebuilt.blocks[2].size(), 26u) << "its disk copy";

  cache->release_device_cells(1 << 20);
  expect_in_step(*cache, "demoted to the host tier");
  EXPECT_TRUE(rebuilt.blocks[0].empty());
  EXPECT_EQ(rebuilt.blocks[1].size(), 26u);

  serve(*cache, key, b);
  PrefixCacheProbe(*cache).flush_disk();
  expect_in_step(*cache, "after b");
  serve(*cache, key, a);
  expect_in_step(*cache, "a again, a hit");

  cache->reset();
  const std::vector<KvEvent> events = cache->take_kv_events();
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(events.front())) << "a reset is one AllBlocksCleared";
  rebuilt.apply(events);
  for (const auto& set : rebuilt.blocks) EXPECT_TRUE(set.empty());
  expect_in_step(*cache, "after the reset");
}

TEST_F(KvEventsTest, ARestartedCacheAnnouncesItsDiskFiles) {
  {
    auto cache = make();
    serve(*cache, key, a);
    PrefixCacheProbe(*cache).flush_disk();
  }
  engine.reset();
  auto reopened = make();
  reopened->record_kv_events([](const ScopeId&) { return true; });
  expect_in_step(*reopened, "reopened");
  EXPECT_TRUE(rebuilt.blocks[0].empty());
  EXPECT_EQ(rebuilt.blocks[2].size(), 26u);
}

TEST_F(KvEventsTest, AScopeTheFilterRefusesIsNeverAnnounced) {
  auto cache = make();
  const ScopeId mine = scope_id("mine");
  RequestKey own{"ns-mine", "s"};
  own.scope = mine;
  RequestKey other{"ns-other", "s"};
  other.scope = scope_id("other");
  cache->record_kv_events([mine](const ScopeId& scope) { return scope == mine; });
  serve(*cache, other, b);
  serve(*cache, own, a);
  PrefixCacheProbe(*cache).flush_disk();
  std::vector<KvEvent> events = cache->take_kv_events();
  const std::vector<Digest> others = cache->chain_of(other, b);
  const std::set<Digest> refused(others.begin(), others.end());
  std::int64_t stored = 0;
  for (const KvEvent& e : events) {
    if (const auto* s = std::get_if<BlocksStored>(&e)) {
      EXPECT_EQ(s->scope, mine);
      for (const Digest& h : s->hashes) EXPECT_FALSE(refused.contains(h));
      stored += static_cast<std::int64_t>(s->hashes.size());
    }
  }
  EXPECT_EQ(stored, 26 * 2) << "device and disk";
  cache->reset_scope(scope_id("other"));
  events = cache->take_kv_events();
  EXPECT_TRUE(events.empty()) << "removing the other scope's blocks announces nothing";
  cache->reset_scope(mine);
  events = cache->take_kv_events();
  ASSERT_EQ(events.size(), 2u) << "removals per tier, not a clear";
  for (const KvEvent& e : events) EXPECT_EQ(std::get<BlocksRemoved>(e).hashes.size(), 26u);
}

// A namespace computed under LoRA adapters: its stored blocks carry their label in every tier
// (device, then the host tier it is demoted to, then disk), found through a segment's parents;
// another namespace's carry none.
TEST_F(KvEventsTest, AdapterLabelsFollowTheirBlocksToEveryTier) {
  auto cache = make();
  RequestKey adapted{"ns-adapted", "s"};
  adapted.adapter = "lora-a@0.5";
  const RequestKey base{"ns-base", "s"};
  cache->record_kv_events([](const ScopeId&) { return true; });
  serve(*cache, adapted, a);
  serve(*cache, base, b);
  std::vector<KvEvent> events = cache->take_kv_events();
  PrefixCacheProbe(*cache).flush_disk();
  cache->release_device_cells(1 << 20);
  for (KvEvent& e : cache->take_kv_events()) events.push_back(std::move(e));
  const std::vector<Digest> adapted_chain = cache->chain_of(adapted, a);
  const std::set<Digest> adapted_blocks(adapted_chain.begin(), adapted_chain.end());
  std::map<Medium, std::int64_t> labelled;
  std::int64_t unlabelled = 0;
  for (const KvEvent& e : events) {
    const auto* s = std::get_if<BlocksStored>(&e);
    if (s == nullptr) continue;
    const bool ours = adapted_blocks.contains(s->hashes.front());
    for (const Digest& h : s->hashes) EXPECT_EQ(adapted_blocks.contains(h), ours) << "a run is of one namespace";
    if (ours) {
      EXPECT_EQ(s->adapter, "lora-a@0.5") << medium_name(s->medium);
      labelled[s->medium] += static_cast<std::int64_t>(s->hashes.size());
    } else {
      EXPECT_EQ(s->adapter, "") << medium_name(s->medium);
      unlabelled += static_cast<std::int64_t>(s->hashes.size());
    }
  }
  EXPECT_EQ(labelled[Medium::device], 26);
  EXPECT_EQ(labelled[Medium::host], 26) << "demoted segments reach the label through their parents";
  EXPECT_EQ(labelled[Medium::disk], 26);
  EXPECT_GT(unlabelled, 0);
}

// The labels outlive the process with the disk tier: a restarted cache announces the disk blocks
// of a namespace computed under adapters with their label before any request under them comes.
TEST_F(KvEventsTest, ARestartedCacheAnnouncesItsDiskBlocksWithTheirAdapters) {
  RequestKey adapted{"ns-adapted", "s"};
  adapted.adapter = "lora-a@0.5+lora-b";
  std::vector<Digest> adapted_chain;
  {
    auto cache = make();
    serve(*cache, adapted, a);
    serve(*cache, key, b);
    PrefixCacheProbe(*cache).flush_disk();
    adapted_chain = cache->chain_of(adapted, a);
  }
  engine.reset();
  auto reopened = make();
  reopened->record_kv_events([](const ScopeId&) { return true; });
  std::int64_t labelled = 0;
  std::int64_t unlabelled = 0;
  for (const KvEvent& e : reopened->take_kv_events()) {
    const auto* s = std::get_if<BlocksStored>(&e);
    if (s == nullptr) continue;
    EXPECT_EQ(s->medium, Medium::disk);
    const bool ours = std::ranges::find(adapted_chain, s->hashes.front()) != adapted_chain.end();
    EXPECT_EQ(s->adapter, ours ? "lora-a@0.5+lora-b" : "");
    (ours ? labelled : unlabelled) += static_cast<std::int64_t>(s->hashes.size());
  }
  EXPECT_EQ(labelled, 26);
  EXPECT_GT(unlabelled, 0) << "the base namespace's blocks, unlabelled";
}

// DIR/labels: a line per label, read back; a line that does not parse is skipped, a root keeps its
// first label, and a label with a line break stays in memory.
TEST(NamespaceLabels, KeepsItsLabelsInItsFileAndSkipsWhatDoesNotParse) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("labels-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "labels";
  std::filesystem::remove(file);
  Digest one{};
  one[0] = 1;
  Digest two{};
  two[31] = 0xab;
  Digest three{};
  three[5] = 7;
  {
    NamespaceLabels labels(file);
    EXPECT_TRUE(labels.empty()) << "no file: no labels";
    labels.add(one, "a@0.5");
    labels.add(one, "b");
    labels.add(two, "a+b@2");
    labels.add(three, "bad\nname");
    labels.add(three, "");
    EXPECT_EQ(labels.find(one), "a@0.5") << "a root keeps its first label";
    EXPECT_EQ(labels.find(three), "bad\nname");
  }
  {
    std::ofstream out(file, std::ios::app);
    out << "not-a-digest label\n" << std::string(64, 'g') << " label\n" << std::string(64, '0') << "\n";
  }
  const NamespaceLabels reread(file);
  EXPECT_EQ(reread.size(), 2u);
  EXPECT_EQ(reread.find(one), "a@0.5");
  EXPECT_EQ(reread.find(two), "a+b@2");
  EXPECT_EQ(reread.find(three), "") << "a label with a line break is not written";
  const NamespaceLabels in_memory{std::filesystem::path()};
  EXPECT_TRUE(in_memory.empty());
  std::filesystem::remove_all(dir);
}

Digest digest_of(std::uint8_t first, std::uint8_t last) {
  Digest d{};
  d.front() = first;
  d.back() = last;
  d[24] = 0x80;
  return d;
}

TEST(KvEventWire, BatchesDecodeToTheEventsEncodedInBothHashForms) {
  std::vector<KvEvent> events;
  events.emplace_back(AllBlocksCleared{});
  events.emplace_back(BlocksStored{{digest_of(1, 2), digest_of(1, 3)}, digest_of(9, 9), {5, 6, 7, 8, 9, 10, 11, 12},
                                   Medium::host, {}});
  events.emplace_back(BlocksStored{{digest_of(4, 4)}, std::nullopt, {1, 2, 3, 4}, Medium::device, {}});
  events.emplace_back(BlocksRemoved{{digest_of(1, 2)}, Medium::disk, {}});
  events.emplace_back(BlocksStored{{digest_of(5, 5)}, std::nullopt, {1, 2, 3, 4}, Medium::device, {}, "lora-a+lora-b@0.5"});
  for (const auto format : {events::HashFormat::integer, events::HashFormat::bytes}) {
    const std::string payload = events::encode_batch(events, 1234.5, 4, format);
    const auto decoded = events::decode_batch(std::span(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size()));
    ASSERT_TRUE(decoded) << decoded.error();
    EXPECT_EQ(decoded->timestamp, 1234.5);
    ASSERT_EQ(decoded->events.size(), 5u);
    EXPECT_TRUE(std::holds_alternative<events::WireCleared>(decoded->events[0]));
    const auto& host = std::get<events::WireStored>(decoded->events[1]);
    EXPECT_EQ(host.hashes, (std::vector<std::uint64_t>{events::hash_as_integer(digest_of(1, 2)),
                                                       events::hash_as_integer(digest_of(1, 3))}));
    EXPECT_EQ(host.parent, events::hash_as_integer(digest_of(9, 9)));
    EXPECT_EQ(host.tokens, (std::vector<std::int64_t>{5, 6, 7, 8, 9, 10, 11, 12}));
    EXPECT_EQ(host.block_size, 4);
    EXPECT_EQ(host.medium, "CPU");
    const auto& device = std::get<events::WireStored>(decoded->events[2]);
    EXPECT_FALSE(device.parent.has_value());
    EXPECT_EQ(device.medium, "GPU");
    EXPECT_EQ(std::get<events::WireRemoved>(decoded->events[3]).medium, "DISK");
    EXPECT_FALSE(host.lora_id.has_value()) << "the base model's blocks: lora_id nil, no lora_name";
    EXPECT_EQ(host.lora_name, "");
    const auto& adapted = std::get<events::WireStored>(decoded->events[4]);
    EXPECT_EQ(adapted.lora_name, "lora-a+lora-b@0.5");
    EXPECT_EQ(adapted.lora_id, events::lora_id_of("lora-a+lora-b@0.5"));
    EXPECT_EQ(adapted.medium, "GPU");
  }
  EXPECT_GE(events::lora_id_of("x"), 0);
  EXPECT_NE(events::lora_id_of("lora-a"), events::lora_id_of("lora-a@0.5"));
  EXPECT_EQ(events::hash_as_integer(digest_of(0, 0x2a)), 0x800000000000002aull) << "the last 8 bytes, big-endian";
}

TEST(KvEventWire, MalformedPayloadsAreRefusedWithAReason) {
  const auto decode = [](std::string_view bytes) {
    return events::decode_batch(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  };
  EXPECT_FALSE(decode(""));
  EXPECT_FALSE(decode("\x91\x01")) << "[1]: no events";
  EXPECT_FALSE(decode("\x92\xa1x\x90")) << "a string timestamp";
  const auto bad_event = decode("\x92\x01\x91\x92\xab" "BlockStored" "\x01");
  EXPECT_FALSE(bad_event);
  const auto unknown = decode("\x92\x01\x91\x91\xa4" "Next");
  ASSERT_TRUE(unknown) << unknown.error();
  EXPECT_TRUE(unknown->events.empty()) << "an unknown event is skipped";
}

// The publisher's socket addresses for one test: ipc paths of this process.
std::string ipc(const std::string& name) {
  return "ipc://" + (std::filesystem::temp_directory_path() / ("prefixd-kv-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::vector<KvEvent> one_block(std::uint8_t n) {
  std::vector<KvEvent> events;
  events.emplace_back(BlocksStored{{digest_of(n, n)}, std::nullopt, {n, n, n, n}, Medium::device, {}});
  return events;
}

// Asks the replay socket for every batch from `from` on: (seq, payload) until the end marker.
std::vector<std::int64_t> replay(zmq::context_t& context, const std::string& endpoint, std::int64_t from) {
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(endpoint);
  const std::string start = events::sequence_frame(from);
  dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start), zmq::send_flags::none);
  std::vector<std::int64_t> seqs;
  for (;;) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(dealer, std::back_inserter(frames))) {
      ADD_FAILURE() << "no end marker";
      break;
    }
    EXPECT_EQ(frames.size(), 3u);
    const auto seq = events::parse_sequence_frame(std::span(frames[1].data<std::uint8_t>(), frames[1].size()));
    if (!seq || *seq == -1) break;
    const auto batch = events::decode_batch(std::span(frames[2].data<std::uint8_t>(), frames[2].size()));
    EXPECT_TRUE(batch) << "replayed payload decodes";
    seqs.push_back(*seq);
  }
  return seqs;
}

TEST(KvEventPublisher, NumbersBatchesAndReplaysThemFromAnyPoint) {
  const std::string pub = ipc("pub"), rep = ipc("replay");
  auto started = events::KvEventPublisher::start({.endpoint = pub, .replay_endpoint = rep, .topic = "kv@pod@m"});
  ASSERT_TRUE(started) << started.error();
  auto& publisher = **started;
  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.connect(pub);
  for (std::uint8_t i = 0; i < 3; ++i) publisher.publish(one_block(i));  // before the subscription is up
  EXPECT_EQ(replay(context, rep, 0), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(replay(context, rep, 2), (std::vector<std::int64_t>{2}));
  // Live: a batch arrives with its topic and its number (published again until the subscription
  // is up: a PUB socket sends nothing to a subscriber it does not know yet).
  std::optional<std::int64_t> seen;
  std::int64_t published = 3;
  for (std::uint8_t i = 3; i < 200 && !seen; ++i, ++published) {
    publisher.publish(one_block(i));
    std::vector<zmq::message_t> frames;
    sub.set(zmq::sockopt::rcvtimeo, 50);
    if (zmq::recv_multipart(sub, std::back_inserter(frames))) {
      ASSERT_EQ(frames.size(), 3u);
      EXPECT_EQ(frames[0].to_string(), "kv@pod@m");
      seen = events::parse_sequence_frame(std::span(frames[1].data<std::uint8_t>(), frames[1].size()));
    }
  }
  ASSERT_TRUE(seen.has_value());
  EXPECT_LE(*seen, published);
  EXPECT_EQ(publisher.stats().stored_events, publisher.stats().batches);
}

TEST(KvEventPublisher, ABatchAFullQueueCannotTakeIsStillReplayed) {
  const std::string pub = ipc("pub-full"), rep = ipc("replay-full");
  auto started = events::KvEventPublisher::start({.endpoint = pub, .replay_endpoint = rep, .queue_batches = 1});
  ASSERT_TRUE(started) << started.error();
  auto& publisher = **started;
  constexpr int kBatches = 200;
  for (int i = 0; i < kBatches; ++i) publisher.publish(one_block(static_cast<std::uint8_t>(i)));
  zmq::context_t context;
  std::vector<std::int64_t> seqs;
  // The thread may still be sending the last queued ones: ask until all are kept.
  for (int tries = 0; tries < 100 && seqs.size() < kBatches; ++tries) {
    seqs = replay(context, rep, 0);
    if (seqs.size() < kBatches) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<std::int64_t> all(kBatches);
  for (int i = 0; i < kBatches; ++i) all[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(seqs, all) << "every number is replayable, in order";
  EXPECT_GT(publisher.stats().dropped_batches, 0) << "a queue of one batch cannot take 200 at once";
}

TEST(KvEventPublisher, AnAddressZeroMqRefusesIsAnError) {
  const auto refused = events::KvEventPublisher::start({.endpoint = "tcp://*:notaport"});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("--kv-events-endpoint tcp://*:notaport"), std::string::npos) << refused.error();
}

}  // namespace
}  // namespace prefixd::cache

namespace prefixd::cache {
namespace {

// Two publishers behind one forwarder (a server of several models): a subscriber of the public
// address gets both streams whole, each under its topic with its own numbers from 0; an address
// ZeroMQ refuses is an error naming it.
TEST(KvEventForwarder, RelaysEveryPublishersMessagesWholeUnderTheirTopics) {
  const std::string outer = ipc("forwarded");
  auto forwarder = events::KvEventForwarder::start(outer);
  ASSERT_TRUE(forwarder) << forwarder.error();
  EXPECT_TRUE((*forwarder)->inner_endpoint().starts_with("tcp://127.0.0.1:")) << (*forwarder)->inner_endpoint();
  auto first = events::KvEventPublisher::start({.endpoint = (*forwarder)->inner_endpoint(), .topic = "kv@pod@one"});
  auto second = events::KvEventPublisher::start({.endpoint = (*forwarder)->inner_endpoint(), .topic = "kv@pod@two"});
  ASSERT_TRUE(first && second);
  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 50);
  sub.connect(outer);
  // Published again until both subscriptions are up (a PUB socket drops what nobody asked for).
  std::map<std::string, std::vector<std::int64_t>> seqs;
  for (std::uint8_t i = 0; i < 200 && (seqs["kv@pod@one"].empty() || seqs["kv@pod@two"].empty()); ++i) {
    (*first)->publish(one_block(i));
    (*second)->publish(one_block(static_cast<std::uint8_t>(i + 100)));
    for (;;) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(sub, std::back_inserter(frames))) break;
      ASSERT_EQ(frames.size(), 3u) << "topic, number, payload";
      const auto seq = events::parse_sequence_frame(std::span(frames[1].data<std::uint8_t>(), frames[1].size()));
      ASSERT_TRUE(seq.has_value());
      const auto batch = events::decode_batch(std::span(frames[2].data<std::uint8_t>(), frames[2].size()));
      ASSERT_TRUE(batch) << batch.error();
      const std::string topic = frames[0].to_string();
      ASSERT_TRUE(topic == "kv@pod@one" || topic == "kv@pod@two") << topic;
      const auto& stored = std::get<events::WireStored>(batch->events.at(0));
      EXPECT_EQ(stored.tokens.front() >= 100, topic == "kv@pod@two") << "each payload under its own topic";
      seqs[topic].push_back(*seq);
    }
  }
  for (const auto& [topic, numbers] : seqs) {
    ASSERT_FALSE(numbers.empty()) << topic;
    EXPECT_TRUE(std::ranges::is_sorted(numbers)) << topic << ": each publisher's numbers, in order";
    EXPECT_EQ(std::ranges::adjacent_find(numbers), numbers.end()) << topic;
  }
  const auto refused = events::KvEventForwarder::start("tcp://*:not-a-port");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("tcp://*:not-a-port"), std::string::npos) << refused.error();
}

TEST(ChangedKeys, TracksFromTheFirstAskAndFallsBackToAWalkWhenTooMuchChanged) {
  ChangedKeys changed;
  changed.touched(Digest{1});
  EXPECT_FALSE(changed.take(4).has_value()) << "the first ask walks the store";
  changed.touched(Digest{2});
  changed.touched(Digest{2});
  const auto some = changed.take(4);
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(*some, std::vector<Digest>{Digest{2}});
  for (std::uint8_t k = 0; k < 6; ++k) changed.touched(Digest{k});
  EXPECT_FALSE(changed.take(4).has_value()) << "more than the limit: walk again";
  EXPECT_TRUE(changed.take(4).has_value());
}

}  // namespace
}  // namespace prefixd::cache
