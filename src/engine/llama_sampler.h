// Sampler chains over libllama, with an optional GBNF grammar. Internal to src/engine/.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <llama.h>

#include "engine/engine.h"

namespace prefixd::engine::detail {

// nullopt when libllama parses `grammar` for `vocab`, else its parser's message. Safe from any
// thread: it reads the vocabulary only, and collects libllama's messages on this thread.
std::optional<std::string> check_llama_grammar(const llama_vocab* vocab, const Grammar& grammar);

// A sampler for rows of `ctx`'s logits. Throws std::invalid_argument when params.grammar does not
// parse. REQUIRES: `ctx` and `vocab` outlive the sampler.
std::unique_ptr<Sampler> make_llama_sampler(llama_context* ctx, const llama_vocab* vocab, const SamplingParams& params);

}  // namespace prefixd::engine::detail
