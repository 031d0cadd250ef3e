// prefixd bench — what llama-server's log says about its context checkpoints and prompt cache.
// llama-server reuses recurrent, hybrid and sliding-window models through per-slot context
// checkpoints and counts their memory nowhere else a client can read, so the benchmark reads the
// lines it prints (llama.cpp 0.7.0 wording, at verbosity 4: `-lv 4`) from the slice of the log one
// server run wrote.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

struct LlamaCheckpointLog {
  std::int64_t created = 0;        // "created context checkpoint N of M (..., size = X MiB)"
  double created_mib = 0;          // Σ X over them
  double largest_mib = 0;          // the biggest one
  std::int64_t erased = 0;         // erased as old, too close to another, or invalidated
  double erased_mib = 0;
  std::int64_t superseded = 0;     // replaced by a new one at the same position (created again)
  std::int64_t restored = 0;       // "restored context checkpoint (...)": a prompt resumed there
  std::int64_t prompts_saved = 0;  // "saving prompt with length N, total state size = X MiB"
  // The last "cache state: N prompts, X MiB" listing of the host prompt cache, -1 without one, and
  // the checkpoints its prompts hold ("prompt 0x…: N tokens, checkpoints: K, X MiB").
  std::int64_t cache_prompts = -1;
  double cache_mib = -1;
  std::int64_t cache_checkpoints = 0;

  nlohmann::json to_json() const;
};

LlamaCheckpointLog parse_llama_checkpoint_log(std::string_view log);

}  // namespace prefixd::bench
