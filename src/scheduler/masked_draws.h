// prefixd scheduler — masked draws off the scheduler thread.
//
// Under a grammar, a draw the grammar refuses must be drawn again from the whole vocabulary masked
// by the grammar: a walk of every token against every live grammar stack, which takes from a few
// to hundreds of milliseconds on a 150k-token vocabulary. Done on the scheduler thread, that walk
// would stall every other request's step. Instead the request waits out of the batch while this
// worker draws from a copy of its logits; the scheduler takes the token at its next turn. Other
// requests keep their step rate; the constrained one pays only for its own masks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace prefixd::scheduler {

class MaskedDraws {
 public:
  struct Drawn {
    std::uint64_t request_id = 0;
    const engine::Sampler* sampler = nullptr;  // identity only: the draw belongs to this sampler
    engine::Token token = 0;
    std::vector<float> logits;  // the row drawn from (logprobs are computed from it)
    std::string failure;        // not empty: the draw threw, and this says why
  };

  // `on_drawn` runs on the worker after each draw, with no lock of this object held.
  explicit MaskedDraws(std::function<void()> on_drawn);
  ~MaskedDraws();  // draws not yet started are dropped; one in progress finishes first
  MaskedDraws(const MaskedDraws&) = delete;
  MaskedDraws& operator=(const MaskedDraws&) = delete;

  // Queues sampler->sample_masked(logits). The sampler stays alive until its draw is done, whether
  // or not its request still exists; the caller must not use it until take() returns the draw.
  void submit(std::uint64_t request_id, std::shared_ptr<engine::Sampler> sampler, std::vector<float> logits);
  // The draws finished since the last call, in order.
  std::vector<Drawn> take();

 private:
  struct Job {
    std::uint64_t request_id;
    std::shared_ptr<engine::Sampler> sampler;
    std::vector<float> logits;
  };
  void work();

  std::function<void()> on_drawn_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  std::vector<Drawn> drawn_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after every member above is constructed
};

}  // namespace prefixd::scheduler
