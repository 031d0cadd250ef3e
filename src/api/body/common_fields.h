// prefixd api — the fields every generation endpoint reads the same way: OpenAI chat and
// completions, Responses and Anthropic Messages each parse their own protocol, and these once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/body/field_reader.h"
#include "api/chat_request.h"
#include "engine/types.h"

namespace prefixd::api::fields {

// `model`, when sent (or always, `required`), must be one of `served` (the model's id and its
// alias): else a 404 naming it (a 400 when required and absent).
void check_served_model(const FieldReader& in, const std::vector<std::string>& served, bool required);

// `temperature` in [0, most], when sent. 0 means "always the most likely token": top_k 1 makes the
// draw greedy whatever sampler chain the engine builds.
void read_temperature(const FieldReader& in, engine::SamplingParams& sampling, double most);

// `stream`, and `return_progress` (llama-server's extension, at the root or in extra_body): a
// stream that also reports how far the prompt has been processed.
void read_streaming(const FieldReader& in, CommonParams& params);

// cache_prompt, prompt_cache_key and cache_salt, at the root or in extra_body (prefixd's and
// llama-server's extensions to each protocol). `cache_prompt_default` is false when the server
// runs with --no-cache-prompt. `end_user` is the protocol's own id of the end user (OpenAI's
// `user`, Anthropic's `metadata.user_id`): the cache session when prompt_cache_key is absent.
// Rejects an empty cache_salt (400 naming the field): absent is the only way to say "no salt", so
// a client that meant to keep its prefixes apart never shares them by mistake.
// llama-server's per-request speculation controls, at the root or in extra_body, as flat keys
// ("speculative.n_max": 8) or one object ("speculative": {"n_max": 8}): n_max (0 turns drafting
// off for the request), n_min, and p_min (a draft model's confidence bound; n-gram drafting has
// no probabilities and ignores it). n_min above n_max is refused.
scheduler::DraftSettings read_speculative(const FieldReader& in);

// Also `lora` (parse_adapter_choice), at the root or in extra_body.
CacheFields read_cache_fields(const FieldReader& in, bool cache_prompt_default, const std::optional<std::string>& end_user);

}  // namespace prefixd::api::fields
