#include "cli/memory_return.h"

#include <malloc.h>

#include <spdlog/spdlog.h>

namespace prefixd::cli {

void return_large_blocks_to_the_os() {
  constexpr int kLargeBlockBytes = 128 << 10;  // glibc's own initial threshold
  if (mallopt(M_MMAP_THRESHOLD, kLargeBlockBytes) != 1) {
    spdlog::warn("could not fix the allocator's mmap threshold: memory freed after large requests may stay resident");
  }
}

}  // namespace prefixd::cli
