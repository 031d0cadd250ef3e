#include "scheduler/masked_draws.h"

#include <exception>
#include <utility>

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
