// YieldPoint: yields the core once its interval has passed, never sooner.
#include "scheduler/queue/yield_point.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gpusched::queue {
namespace {

TEST(YieldPointTest, NoYieldBeforeTheIntervalHasPassed) {
  YieldPoint y(std::chrono::seconds(60));
  for (int i = 0; i < 100'000; ++i) y.Pass();
  EXPECT_EQ(y.yields(), 0);
}

TEST(YieldPointTest, YieldsOncePerIntervalWhileCalled) {
  const auto every = std::chrono::microseconds(100);
  YieldPoint y(every);
  const auto start = std::chrono::steady_clock::now();
  const auto give_up = start + std::chrono::seconds(20);
  while (y.yields() < 10 && std::chrono::steady_clock::now() < give_up) y.Pass();
  EXPECT_EQ(y.yields(), 10);                                        // it does yield, over and over
  EXPECT_GE(std::chrono::steady_clock::now() - start, 10 * every);  // and not more often
}

}  // namespace
}  // namespace gpusched::queue
