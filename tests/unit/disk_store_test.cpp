// The disk tier's store on real directories: what it writes it indexes and reads back, a new store
// rebuilds the same index from the files, every bad file is removed and counted by its reason,
// the byte cap holds and never takes a segment another extends while a leaf could go, and the
// write-behind queue drops or fails without indexing anything.
#include <gtest/gtest.h>

#include <set>

#include "cache/disk_directory.h"
#include "cache/disk_store.h"
#include "support/disk_fixtures.h"

namespace prefixd::cache {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::test_digest;
using testing::test_segment;

const Digest kModel = test_digest(0x21, 1);
constexpr std::size_t kPayload = 1000;
constexpr int kTokens = 4;

std::int64_t removed(const DiskStats& s, DiskRemoval reason) { return s.removed[static_cast<size_t>(reason)]; }
std::int64_t removed_total(const DiskStats& s) {
  std::int64_t n = 0;
  for (std::int64_t r : s.removed) n += r;
  return n;
}

DiskStore::Options options(const fs::path& dir, std::uint64_t capacity = 1ull << 30, std::uint64_t queue = 1ull << 30) {
  return DiskStore::Options{dir, capacity, queue, kModel};
}

// Segments i = 0..n-1 of one chain: each extends the one before (its parent is that one's key).
std::vector<Record> chain(std::uint8_t tag, int n) {
  std::vector<Record> out;
  Digest parent = test_digest(tag, 0);  // the namespace root: no file
  for (int i = 0; i < n; ++i) {
    out.push_back(test_segment(kModel, test_digest(tag, i + 1), parent, i * kTokens, kTokens, kPayload));
    parent = out.back().meta.key;
  }
  return out;
}

// A segment at position 0 that nothing extends and that extends no file.
Record leaf(std::uint8_t tag, int n) {
  return test_segment(kModel, test_digest(tag, n), test_digest(tag, 0), 0, kTokens, kPayload);
}

fs::path path_of(const fs::path& dir, const Record& r) { return record_path(dir, r.meta.key, r.meta.kind); }

// Writes `records` as one job and waits for it.
void write_job(DiskStore& store, std::vector<Record> records, std::vector<Digest> supersedes = {}) {
  ASSERT_TRUE(store.enqueue(DiskStore::Job{std::move(records), std::move(supersedes)}));
  store.flush();
}

TEST(DiskStore, WrittenChainIsIndexedAndReadable) {
  TempDir dir("disk-store");
  DiskStore store(options(dir.path()));
  const std::vector<Record> segs = chain(1, 3);
  write_job(store, segs);
  std::uint64_t bytes = 0;
  for (const Record& r : segs) {
    ASSERT_TRUE(fs::is_regular_file(path_of(dir.path(), r)));
    EXPECT_EQ(fs::file_size(path_of(dir.path(), r)), testing::record_file_bytes(r));
    bytes += testing::record_file_bytes(r);
    EXPECT_TRUE(store.has(r.meta.key));
  }
  const std::optional<RecordMeta> second = store.meta(segs[1].meta.key);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->begin, kTokens);
  EXPECT_EQ(second->parent, segs[0].meta.key);
  EXPECT_EQ(second->tokens, segs[1].meta.tokens);
  EXPECT_EQ(store.children(segs[0].meta.key, segs[1].meta.tokens.front()), std::vector<Digest>{segs[1].meta.key});
  EXPECT_TRUE(store.children(segs[0].meta.key, segs[1].meta.tokens.front() + 1).empty());
  const std::optional<Record> last = store.read(segs[2].meta.key);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->payload, segs[2].payload);
  EXPECT_EQ(last->meta.tokens, segs[2].meta.tokens);
  const DiskStats s = store.stats();
  EXPECT_EQ(s.files, 3);
  EXPECT_EQ(s.segments, 3);
  EXPECT_EQ(s.tokens, 3 * kTokens);
  EXPECT_EQ(s.bytes, bytes);
  EXPECT_EQ(s.writes, 3);
  EXPECT_EQ(s.reads, 1);
  EXPECT_EQ(removed_total(s), 0);
  EXPECT_EQ(testing::bytes_under(dir.path()), bytes);
}

TEST(DiskStore, NewStoreRebuildsTheSameIndex) {
  TempDir dir("disk-store");
  const std::vector<Record> segs = chain(2, 3);
  const Record checkpoint = testing::test_checkpoint(kModel, test_digest(3, 1), 8, 300);
  DiskStats before;
  {
    DiskStore store(options(dir.path()));
    write_job(store, segs);
    write_job(store, {checkpoint});
    before = store.stats();
  }
  DiskStore again(options(dir.path()));
  const DiskStats after = again.stats();
  EXPECT_EQ(after.files, 4);
  EXPECT_EQ(after.files, before.files);
  EXPECT_EQ(after.segments, before.segments);
  EXPECT_EQ(after.checkpoints, 1);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(removed_total(after), 0);
  EXPECT_EQ(again.meta(segs[2].meta.key)->parent, segs[1].meta.key);
  EXPECT_EQ(again.checkpoint_positions(checkpoint.meta.ns), std::vector<engine::Pos>{8});
  EXPECT_EQ(again.read(segs[0].meta.key)->payload, segs[0].payload);
}

TEST(DiskStore, FlippedPayloadByteIsRemovedNeverRead) {
  TempDir dir("disk-store");
  DiskStore store(options(dir.path()));
  const std::vector<Record> segs = chain(4, 3);
  write_job(store, segs);
  testing::flip_file_byte(path_of(dir.path(), segs[1]), -1);
  EXPECT_FALSE(store.read(segs[1].meta.key));
  const DiskStats s = store.stats();
  EXPECT_EQ(removed(s, DiskRemoval::checksum), 1);
  EXPECT_EQ(removed_total(s), 1);
  EXPECT_EQ(s.files, 2);
  EXPECT_EQ(s.reads, 0);
  EXPECT_FALSE(fs::exists(path_of(dir.path(), segs[1])));
  EXPECT_FALSE(store.has(segs[1].meta.key));
  EXPECT_TRUE(store.read(segs[0].meta.key));
}

TEST(DiskStore, RebuildRemovesTruncatedAndForeignFiles) {
  TempDir dir("disk-store");
  const std::vector<Record> segs = chain(5, 3);
  {
    DiskStore store(options(dir.path()));
    write_job(store, segs);
  }
  const fs::path cut = path_of(dir.path(), segs[2]);
  fs::resize_file(cut, fs::file_size(cut) - 10);
  const Record foreign = test_segment(test_digest(0x21, 2), test_digest(6, 1), test_digest(6, 0), 0, kTokens, kPayload);
  testing::write_file(path_of(dir.path(), foreign), testing::encode_record(foreign));

  DiskStore again(options(dir.path()));
  const DiskStats s = again.stats();
  EXPECT_EQ(removed(s, DiskRemoval::truncated), 1);
  EXPECT_EQ(removed(s, DiskRemoval::foreign), 1);
  EXPECT_EQ(removed_total(s), 2);
  EXPECT_EQ(s.files, 2);
  EXPECT_FALSE(fs::exists(cut));
  EXPECT_FALSE(fs::exists(path_of(dir.path(), foreign)));
  EXPECT_FALSE(again.has(foreign.meta.key));
  EXPECT_TRUE(again.has(segs[1].meta.key));
}

TEST(DiskStore, LeftoverTemporaryIsRemovedAsIncomplete) {
  TempDir dir("disk-store");
  const fs::path leftover = dir.path() / "tmp" / "0123.4567.1";
  testing::write_file(leftover, engine::Bytes(100, 7));
  DiskStore store(options(dir.path()));
  const DiskStats s = store.stats();
  EXPECT_EQ(removed(s, DiskRemoval::incomplete), 1);
  EXPECT_EQ(removed_total(s), 1);
  EXPECT_FALSE(fs::exists(leftover));
}

TEST(DiskStore, FileRenamedToAnotherKeyIsRejected) {
  TempDir dir("disk-store");
  const std::vector<Record> segs = chain(7, 2);
  {
    DiskStore store(options(dir.path()));
    write_job(store, segs);
  }
  Record impostor = segs[1];
  impostor.meta.key = test_digest(8, 1);
  const fs::path renamed = path_of(dir.path(), impostor);
  fs::create_directories(renamed.parent_path());
  fs::rename(path_of(dir.path(), segs[1]), renamed);

  DiskStore again(options(dir.path()));
  const DiskStats s = again.stats();
  EXPECT_EQ(removed(s, DiskRemoval::checksum), 1);
  EXPECT_EQ(removed_total(s), 1);
  EXPECT_EQ(s.files, 1);
  EXPECT_FALSE(again.has(impostor.meta.key));
  EXPECT_FALSE(again.has(segs[1].meta.key));
  EXPECT_FALSE(fs::exists(renamed));
}

TEST(DiskStore, DirectoryNeverExceedsItsCap) {
  TempDir dir("disk-store");
  const std::uint64_t file = testing::record_file_bytes(chain(9, 1).front());
  const std::uint64_t cap = 3 * file + file / 2;
  DiskStore store(options(dir.path(), cap));
  std::vector<Record> writes = chain(9, 5);
  for (int i = 0; i < 3; ++i) writes.push_back(leaf(10, i + 1));
  for (const Record& r : writes) {
    write_job(store, {r});
    EXPECT_LE(testing::bytes_under(dir.path()), cap);
    EXPECT_EQ(testing::bytes_under(dir.path()), store.stats().bytes);
    EXPECT_TRUE(store.has(r.meta.key)) << "the newest file always fits";
  }
  const DiskStats s = store.stats();
  EXPECT_EQ(s.files, 3);
  EXPECT_EQ(removed(s, DiskRemoval::capacity), 5);
  EXPECT_EQ(removed_total(s), 5);
}

TEST(DiskStore, SegmentsOthersExtendOutliveLeaves) {
  TempDir dir("disk-store");
  const std::vector<Record> segs = chain(11, 5);
  const std::uint64_t file = testing::record_file_bytes(segs.front());
  DiskStore store(options(dir.path(), 6 * file + file / 2));
  for (const Record& r : segs) write_job(store, {r});  // one job each: the chain's root is the least recently used
  for (int i = 0; i < 4; ++i) {
    write_job(store, {leaf(12, i + 1)});
    // LRU alone would take segs[0] first; the cap may only take the chain from its tip.
    const int evicted = i;  // the first leaf fits; each later one costs the chain its tip
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(store.has(segs[static_cast<size_t>(k)].meta.key), k < 5 - evicted) << "leaf " << i << ", segment " << k;
    }
    EXPECT_LE(testing::bytes_under(dir.path()), 6 * file + file / 2);
  }
  EXPECT_EQ(removed(store.stats(), DiskRemoval::capacity), 3);
}

TEST(DiskStore, JobLargerThanTheQueueIsDropped) {
  TempDir dir("disk-store");
  DiskStore store(options(dir.path(), 1ull << 30, kPayload / 2));
  const std::vector<Record> segs = chain(13, 1);
  EXPECT_FALSE(store.enqueue(DiskStore::Job{segs, {}}));
  store.flush();
  const DiskStats s = store.stats();
  EXPECT_EQ(s.writes_dropped, 1);
  EXPECT_EQ(s.writes, 0);
  EXPECT_EQ(s.files, 0);
  EXPECT_EQ(s.queue_bytes, 0u);
  EXPECT_FALSE(store.has(segs[0].meta.key));
  EXPECT_EQ(testing::files_under(dir.path()), 0);
}

TEST(DiskStore, FailedWriteIndexesNothingAndLeavesReadsAlone) {
  TempDir dir("disk-store");
  DiskStore store(options(dir.path()));
  const std::vector<Record> first = chain(14, 1);
  write_job(store, first);
  // Tests run as root, so permissions stop nothing: a file where tmp/ should be stops the create.
  fs::remove_all(dir.path() / "tmp");
  testing::write_file(dir.path() / "tmp", engine::Bytes(1, 0));
  const std::vector<Record> segs = chain(15, 2);
  write_job(store, segs);
  const DiskStats s = store.stats();
  EXPECT_EQ(s.write_errors, 1) << "the rest of a job extends the failed record and is not tried";
  EXPECT_EQ(s.writes, 1);
  EXPECT_EQ(s.files, 1);
  for (const Record& r : segs) {
    EXPECT_FALSE(store.has(r.meta.key));
    EXPECT_FALSE(fs::exists(path_of(dir.path(), r)));
  }
  const std::optional<Record> read = store.read(first[0].meta.key);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->payload, first[0].payload);
}

TEST(DiskStore, ClearRemovesEveryFileAsReset) {
  TempDir dir("disk-store");
  DiskStore store(options(dir.path()));
  const std::vector<Record> segs = chain(16, 3);
  write_job(store, segs);
  const std::uint64_t bytes = store.stats().bytes;
  EXPECT_EQ(store.clear(), bytes);
  const DiskStats s = store.stats();
  EXPECT_EQ(removed(s, DiskRemoval::reset), 3);
  EXPECT_EQ(removed_total(s), 3);
  EXPECT_EQ(s.files, 0);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(testing::files_under(dir.path()), 0);
}

TEST(DiskStore, SupersededFileGoesAfterTheJobIsWritten) {
  TempDir dir("disk-store");
  DiskStore store(options(dir.path()));
  const Record shorter = test_segment(kModel, test_digest(17, 1), test_digest(17, 0), 0, 2, kPayload);
  const Record longer = test_segment(kModel, test_digest(17, 2), test_digest(17, 0), 0, 4, kPayload);
  write_job(store, {shorter});
  write_job(store, {longer}, {shorter.meta.key});
  const DiskStats s = store.stats();
  EXPECT_EQ(removed(s, DiskRemoval::superseded), 1);
  EXPECT_EQ(removed_total(s), 1);
  EXPECT_FALSE(store.has(shorter.meta.key));
  EXPECT_FALSE(fs::exists(path_of(dir.path(), shorter)));
  EXPECT_TRUE(store.has(longer.meta.key));
  EXPECT_EQ(s.files, 1);
}

// The tool's trim plan (prefixd cache gc) and the store's cap at startup take the same files.
TEST(DiskStore, TrimPlanTakesWhatTheStoreTakes) {
  TempDir dir("disk-store");
  std::vector<Record> records = chain(18, 4);
  for (int i = 0; i < 3; ++i) records.push_back(leaf(19, i + 1));
  records.push_back(testing::test_checkpoint(kModel, test_digest(20, 1), 4, kPayload));
  {
    DiskStore store(options(dir.path()));
    for (const Record& r : records) write_job(store, {r});
  }
  // Distinct last uses, in an order that is not the write order: the chain's root oldest.
  const auto now = fs::file_time_type::clock::now();
  const int order[] = {0, 5, 1, 7, 2, 4, 3, 6};
  for (int rank = 0; rank < 8; ++rank) {
    const Record& r = records[static_cast<size_t>(order[rank])];
    fs::last_write_time(path_of(dir.path(), r), now - std::chrono::minutes(60 - rank));
  }
  const std::uint64_t cap = 3 * testing::record_file_bytes(records.front()) + 100;
  const std::vector<DiskFile> files = list_disk_files(dir.path(), &kModel);
  ASSERT_EQ(files.size(), 8u);
  std::set<fs::path> planned;
  for (std::size_t i : plan_trim(files, cap)) planned.insert(files[i].path);

  DiskStore store(options(dir.path(), cap));
  std::set<fs::path> taken;
  for (const Record& r : records) {
    if (!fs::exists(path_of(dir.path(), r))) taken.insert(path_of(dir.path(), r));
  }
  EXPECT_EQ(planned, taken);
  EXPECT_EQ(static_cast<std::int64_t>(taken.size()), removed(store.stats(), DiskRemoval::capacity));
  EXPECT_TRUE(store.has(records[0].meta.key)) << "the oldest file, extended by another, stays";
}

}  // namespace
}  // namespace prefixd::cache
