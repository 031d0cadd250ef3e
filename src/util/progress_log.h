// prefixd util — progress lines for long startup work (hashing a large model file, reading the
// headers of a large disk tier), so that an operator watching the log knows the server is busy and
// roughly for how long.
//
// A line is written every `every` while the work runs, with the share done and the time left at
// the pace so far; work that ends within the first interval writes nothing, so small models and
// empty tiers start as quietly as before.
#pragma once

#include <chrono>
#include <cmath>
#include <format>
#include <functional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace prefixd::util {

// "45 s", "3m05s".
inline std::string duration_text(double seconds) {
  const auto whole = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (whole < 60) return std::format("{} s", whole);
  return std::format("{}m{:02}s", whole / 60, whole % 60);
}

class ProgressLog {
 public:
  using Clock = std::chrono::steady_clock;
  using Sink = std::function<void(const std::string& line)>;

  // `total` in `unit`s (at least 0); updates pass how many are done.
  ProgressLog(std::string what, std::string unit, double total, Sink sink = {},
              std::function<Clock::time_point()> now = Clock::now, std::chrono::milliseconds every = std::chrono::seconds(2))
      : what_(std::move(what)),
        unit_(std::move(unit)),
        total_(std::max(0.0, total)),
        sink_(sink ? std::move(sink) : Sink([](const std::string& line) { spdlog::info("{}", line); })),
        now_(std::move(now)),
        every_(every),
        started_(now_()),
        next_(started_ + every_) {}

  void update(double done) {
    const Clock::time_point now = now_();
    if (now < next_ || total_ <= 0) return;
    next_ = now + every_;
    const double share = std::clamp(done / total_, 0.0, 1.0);
    const double elapsed = std::chrono::duration<double>(now - started_).count();
    std::string line = std::format("{}: {:.0f} of {:.0f} {} ({:.0f}%)", what_, done, total_, unit_, share * 100);
    if (share > 0 && share < 1) line += ", about " + duration_text(elapsed * (1 - share) / share) + " left";
    sink_(line);
  }

 private:
  std::string what_;
  std::string unit_;
  double total_;
  Sink sink_;
  std::function<Clock::time_point()> now_;
  std::chrono::milliseconds every_;
  Clock::time_point started_;
  Clock::time_point next_;
};

}  // namespace prefixd::util
