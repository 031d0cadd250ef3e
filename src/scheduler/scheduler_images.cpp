// prefixd scheduler — images in prompts: the positions of an image are filled with its embeddings
// (kept by digest, else encoded now) in a decode of their own, one image per step, for the prompt
// that prefill serves first.
#include "scheduler/scheduler_impl.h"

#include <algorithm>
#include <optional>

#include <spdlog/spdlog.h>

namespace prefixd::scheduler {

// Returns false when the step must end here (the decode failed and was recovered from).
bool Scheduler::Impl::prefill_next_image() {
  std::optional<size_t> next;
  for (size_t i = 0; i < active_.size(); ++i) {
    Active* a = active_[i].get();
    if (!a->prefilling() || a->drawing || a->image_at(a->n_past) == nullptr) continue;
    if (!next || prefills_before(a, active_[*next].get())) next = i;
  }
  if (!next) return true;
  return prefill_image(*next, *active_[*next]->image_at(active_[*next]->n_past));
}

bool Scheduler::Impl::prefill_image(size_t index, const PromptImage& image) {
  Active& a = *active_[index];
  engine::Vision* vision = engine_.vision();
  if (vision == nullptr) {
    finish(index, FinishReason::error, "the prompt holds an image and the server has no vision projector");
    return false;
  }
  ImageEmbeddings::Got got;
  const auto encode_start = Clock::now();
  try {
    const StepClock::Scope in_model = step_clock_.enter(StepPhase::compute);  // the vision encoder, unless kept
    got = image_embeddings_.get(*vision, *image.image);
  } catch (const std::exception& e) {
    finish(index, FinishReason::error, std::string("the image could not be encoded: ") + e.what());
    return false;
  }
  if (got.reused) {
    a.cache.image_embeddings_reused += 1;
  } else {
    a.cache.images_encoded += 1;
    spdlog::debug("request {}: image {} ({}x{}, {} tokens) encoded in {:.1f} ms", a.id,
                  engine::digest_hex(image.image->digest).substr(0, 12), image.image->width, image.image->height,
                  image.image->n_tokens, ms_between(encode_start, Clock::now()));
  }
  {
    std::lock_guard lock(mutex_);
    (got.reused ? stats_.image_embedding_hits_total : stats_.images_encoded_total) += 1;
    stats_.image_embeddings = image_embeddings_.count();
    stats_.image_embedding_bytes = image_embeddings_.bytes();
  }
  // A prompt resumed inside an image (possible only where its rows attend causally, else the cache
  // never stops there) computes the rest of it. Causal media longer than a batch (an audio clip's
  // windows) take a batch per step, resuming inside it the next; rows that attend both ways are
  // decoded whole (the projector refused media that do not fit a batch).
  const std::int32_t offset = a.n_past - image.begin;
  const std::int32_t left = image.image->n_tokens - offset;
  const std::int32_t rows = image.image->non_causal ? left : std::min(left, engine_.batch_size());
  const auto n_embd = static_cast<size_t>(vision->info().n_embd);
  if (got.rows->size() != static_cast<size_t>(image.image->n_tokens) * n_embd) {
    finish(index, FinishReason::error, "the vision encoder returned embeddings of an unexpected size");
    return false;
  }
  const std::span<const float> embeddings =
      std::span<const float>(*got.rows).subspan(static_cast<size_t>(offset) * n_embd, static_cast<size_t>(rows) * n_embd);
  const auto decode_start = Clock::now();
  const engine::DecodeStatus status = [&] {
    const StepClock::Scope in_model = step_clock_.enter(StepPhase::compute);
    return engine_.decode_embeddings(embeddings, rows, a.n_past, a.seq, *image.image, image.begin);
  }();
  spdlog::trace("step: image of {} rows for request {} decoded in {:.1f} ms", rows, a.id,
                ms_between(decode_start, Clock::now()));
  if (status != engine::DecodeStatus::ok) {
    recover_from_failed_decode(status);
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    stats_.prompt_tokens_fed_total += rows;
  }
  a.n_past += rows;
  if (a.uses_cache()) {
    const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
    life().advance(a.seq, a.n_past);
  }
  report_progress(a);
  return true;
}

}  // namespace prefixd::scheduler
