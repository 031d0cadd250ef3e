// Progress lines of long startup work (util/progress_log.h), on a clock the test moves.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/progress_log.h"

namespace prefixd::util {
namespace {

using namespace std::chrono_literals;

TEST(ProgressLog, WorkThatEndsWithinTheFirstIntervalSaysNothing) {
  auto now = ProgressLog::Clock::time_point{};
  std::vector<std::string> lines;
  ProgressLog log("hashing", "MiB", 100, [&](const std::string& l) { lines.push_back(l); }, [&] { return now; });
  for (int done = 10; done <= 100; done += 10) {
    now += 100ms;
    log.update(done);
  }
  EXPECT_TRUE(lines.empty());
}

TEST(ProgressLog, LongWorkSaysHowFarItIsAndHowLongIsLeftEveryInterval) {
  auto now = ProgressLog::Clock::time_point{};
  std::vector<std::string> lines;
  ProgressLog log("fingerprinting model.gguf", "MiB", 4000, [&](const std::string& l) { lines.push_back(l); },
                  [&] { return now; });
  // 100 MiB per second: 40 s in all, a line every 2 s.
  for (int second = 1; second <= 40; ++second) {
    now += 1s;
    log.update(100.0 * second);
  }
  ASSERT_EQ(lines.size(), 20u);
  EXPECT_EQ(lines[0], "fingerprinting model.gguf: 200 of 4000 MiB (5%), about 38 s left");
  EXPECT_EQ(lines[9], "fingerprinting model.gguf: 2000 of 4000 MiB (50%), about 20 s left");
  EXPECT_EQ(lines.back(), "fingerprinting model.gguf: 4000 of 4000 MiB (100%)");
}

TEST(ProgressLog, DurationsReadAsMinutesPastAMinute) {
  EXPECT_EQ(duration_text(0.4), "0 s");
  EXPECT_EQ(duration_text(59.4), "59 s");
  EXPECT_EQ(duration_text(185), "3m05s");
}

}  // namespace
}  // namespace prefixd::util
