// prefixd cli — how the server's heap hands memory back to the operating system.
//
// A request can make the server allocate far more than its body: parsing it (up to
// --max-json-nodes values, about 100 bytes each), rendering the chat template over its tools and
// messages (10,000 tools: about 60 MB of small blocks, and then a 400 because the prompt is too
// long). glibc keeps what is freed for reuse: small blocks stay in its bins, each thread that
// meets contention gets an arena of its own (up to 8 per core) that keeps its own high-water
// mark, and only free memory at the very top of an arena goes back by itself.
//
// Measured (tiny model, 2 loaded cores, 72 HTTP threads; the resident set once each burst of 8
// concurrent 10,000-tool chats was over, after 3 bursts, from 33 MiB at start):
//
//   glibc with its defaults                           1,077 MiB
//   MALLOC_ARENA_MAX=1 / =2                           510 / 561 MiB
//   jemalloc 5.3 (LD_PRELOAD), 1 s after the burst    387 MiB (it purges after a 10 s decay)
//   mimalloc 2.0 (LD_PRELOAD)                         704 MiB
//   malloc_trim(0) after the burst, 16 / 2 arenas     38 / 37 MiB
//
// So the server keeps glibc, with one arena per core (what is held between trims: 561 instead of
// 1,077 MiB above) and a trim after large requests (HeapTrimmer); the same bursts then leave it
// within a few MiB of where it started. A packaged allocator was not needed: jemalloc also
// returns memory, but only after its decay time, and would be one more library to link and to
// keep out of the sanitizer build.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stop_token>
#include <thread>

namespace prefixd::cli {

// Sets the allocator up for the server, for the whole process. Call once at startup, before
// threads start: at most `arenas` malloc arenas (glibc's default is 8 per core). Each keeps the
// high-water mark of the threads that used it, so fewer arenas hold less memory between trims;
// one per core still lets every core allocate without waiting for another.
void configure_heap(int arenas);

// Makes every allocation of 128 KiB or more its own mapping, unmapped when freed; called once the
// model is loaded, when it runs on the CPU. glibc maps large blocks separately only above a
// threshold (128 KiB at start) that it raises to the size of each such block freed, up to 32 MiB:
// after one burst of megabyte-sized requests (bodies, parsed copies, tokenizer buffers) the same
// sizes came from the heap arenas instead and stayed resident once freed. Fixing the threshold at
// glibc's own starting value turns that adaptation off (and with it the matching rise of the heap
// trim threshold). The price is a fresh mapping (and its page faults) for each large block instead
// of reusing a freed one. A GPU backend's driver can pay that price on every kernel launch (Mesa's
// lavapipe allocates its compute stacks per dispatch: a 1,342-token prefill took 3.1 s with the
// fixed threshold, 0.22 s without), so with layers on a GPU glibc's adaptive threshold stays and
// the trimmer alone returns what large requests leave.
void fix_mmap_threshold();

// Hands the heap's free pages back to the system (malloc_trim) on a thread of its own once the
// large requests (bodies of at least `large_body_bytes`) have ended: what they allocated beyond
// their bodies (parsed JSON, the rendered template) is free by then, and without a trim most of it
// stays resident. A trim is not free: it merges the arenas' free lists and releases their pages
// while holding each arena's lock (measured on a loaded 2-core machine after bursts of 8 large
// requests: 30 to 400 ms, growing with what was freed), and released pages fault in again when reused. So it waits until no large
// request is in flight (while they run, what one frees the next reuses), and the next trim waits
// at least `min_interval` and nine times the last trim's duration (trims take at most a tenth of
// the time). A large request that ends while a trim runs or waits gets the next one, so every
// burst of large requests is followed by a trim after its last request.
class HeapTrimmer {
 public:
  HeapTrimmer(std::size_t large_body_bytes, std::chrono::milliseconds min_interval);
  ~HeapTrimmer();
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  // A request with a body of `body_bytes` begins / has ended. Thread-safe; never waits for a trim.
  void request_began(std::size_t body_bytes);
  void request_ended(std::size_t body_bytes);

 private:
  void run(const std::stop_token& stop);

  const std::size_t large_body_bytes_;
  const std::chrono::milliseconds min_interval_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  int large_in_flight_ = 0;
  bool pending_ = false;  // a large request ended since the last trim began
  std::jthread thread_;   // last: started after, and stopped before, the rest
};

// Bodies from this size on are followed by a trim: a smaller body holds at most half as many JSON
// values as bytes, whose parse (about 100 bytes a value) stays within about 10 MiB.
inline constexpr std::size_t kLargeBodyBytes = 256u << 10;
inline constexpr std::chrono::milliseconds kMinTrimInterval{250};

}  // namespace prefixd::cli
