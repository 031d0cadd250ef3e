#include "cache/family.h"

#include <array>

namespace prefixd::cache {
namespace {

constexpr std::array kTrimSources = {Source::device, Source::running, Source::host};
constexpr std::array kCheckpointSources = {Source::entry_state, Source::checkpoint, Source::window};
// A stream per sequence copies a sequence as its saved state, which holds only the window of its
// last position: an entry's window before an earlier match cannot be copied out of it.
constexpr std::array kStreamCheckpointSources = {Source::entry_state, Source::checkpoint};

}  // namespace

const char* source_name(Source source) {
  switch (source) {
    case Source::device: return "device";
    case Source::running: return "running";
    case Source::host: return "host";
    case Source::entry_state: return "entry_state";
    case Source::checkpoint: return "checkpoint";
    case Source::window: return "window";
  }
  return "unknown";
}

Family Family::of(const engine::ModelInfo& model) {
  Family family;
  family.mode = engine::memory_is_trimmable(model) ? ReuseMode::trim : ReuseMode::checkpoints;
  family.attention_cells = engine::has_attention_cells(model);
  family.sliding = model.family == engine::ModelFamily::sliding_window;
  family.window_only = family.sliding && !family.trimmable();
  family.sliding_window = model.sliding_window;
  family.shares_cells = model.cells_shared;
  return family;
}

std::span<const Source> Family::sources() const {
  if (trimmable()) return kTrimSources;
  if (!shares_cells) return kStreamCheckpointSources;
  return kCheckpointSources;
}

}  // namespace prefixd::cache
