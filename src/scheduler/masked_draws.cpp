#include "scheduler/masked_draws.h"

#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

namespace prefixd::scheduler {

MaskedDraws::MaskedDraws(std::function<void()> on_drawn) : on_drawn_(std::move(on_drawn)), thread_([this] { work(); }) {}

MaskedDraws::~MaskedDraws() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MaskedDraws::submit(std::uint64_t request_id, std::shared_ptr<engine::Sampler> sampler, std::vector<float> logits) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(Job{request_id, std::move(sampler), std::move(logits)});
  }
  wake_.notify_all();
}

std::vector<MaskedDraws::Drawn> MaskedDraws::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(drawn_, {});
}

void MaskedDraws::work() {
  // The lowest priority: where the cores are all busy decoding (the usual case on a CPU, where
  // the engine's threads take every core), a mask waits for a free moment instead of taking a core
  // from the batch that every other request is in. Measured on the default model, 2 cores: a
  // plain request decoding beside a 100,000-value enum request ran 2.9-3.4x slower per token at
  // normal priority, 0.95-1.20x at this one, with the enum request's own time unchanged (in place
  // on the scheduler thread, beside a 10,000-value one: 28.5x).
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19) != 0) {
    spdlog::debug("masked draws: could not lower the worker's priority");
  }
  while (true) {
    Job job{};
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Drawn drawn{.request_id = job.request_id, .sampler = job.sampler.get()};
    try {
      drawn.token = job.sampler->sample_masked(job.logits);
    } catch (const std::exception& e) {
      drawn.failure = e.what();
    }
    drawn.logits = std::move(job.logits);
    {
      std::lock_guard lock(mutex_);
      drawn_.push_back(std::move(drawn));
    }
    on_drawn_();
  }
}

}  // namespace prefixd::scheduler
