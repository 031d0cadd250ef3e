// prefixd scheduler — log-probabilities of a generated token, from the logits it was sampled from.
#pragma once

#include <cstdint>
#include <span>

#include "engine/engine.h"
#include "scheduler/request.h"

namespace prefixd::scheduler {

// The log-softmax of `logits` at `chosen`, and the `top_n` most likely tokens (ties broken by
// lower id), each with its piece. The distribution is the model's own: temperature, top-k/p and
// penalties are sampling choices and do not change it. REQUIRES: chosen < logits.size().
GeneratedLogprobs logprobs_of(std::span<const float> logits, engine::Token chosen, std::int32_t top_n,
                              const engine::Vocabulary& vocab);

}  // namespace prefixd::scheduler
