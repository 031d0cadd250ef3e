// Sampler chains over libllama, with an optional GBNF grammar. Internal to src/engine/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <llama.h>

#include "engine/engine.h"

namespace prefixd::engine::detail {

// nullopt when libllama parses `grammar` for `vocab`, else its parser's message. Safe from any
// thread: it reads the vocabulary only, and collects libllama's messages on this thread.
std::optional<std::string> check_llama_grammar(const llama_vocab* vocab, const Grammar& grammar);

// Where a sampler reads the logits of a row of the last decode(): libllama's context, or the
// engine's copy of them when one decode() took several libllama calls (a stream per sequence).
class RowLogits {
 public:
  virtual ~RowLogits() = default;
  virtual const float* row(std::int32_t row) const = 0;  // nullptr: the row has no logits
  // True: row() reads the engine's copy, not libllama's last call, so libllama's own draw
  // (llama_sampler_sample, which reads the context) must not be used.
  virtual bool copied() const = 0;
};

// A sampler for rows of `logits` (over `ctx`). Throws std::invalid_argument when params.grammar
// does not parse. REQUIRES: `ctx`, `vocab` and `logits` outlive the sampler.
std::unique_ptr<Sampler> make_llama_sampler(llama_context* ctx, const llama_vocab* vocab, const RowLogits& logits,
                                            const SamplingParams& params);

}  // namespace prefixd::engine::detail
