// The replay's measure of the estimated start, on samples computed by hand.
#include "scheduler/sim/estimate_samples.h"

#include <gtest/gtest.h>

namespace gpusched::sim {
namespace {

TEST(EstimateSampler, SamplesAtQueueingAndEachHourAndComparesWithTheStart) {
  EstimateSampler s;
  s.Completed(1000);  // mean runtime so far: 1,000 s
  // Unit 1, queued at 0: sampled at 0 (predicts 3,000; naive 2 x 1,000),
  // not again within the hour, again at 3,600 (predicts 4,000; naive 5,600).
  s.Offer(1, 0, 0, 2, 3000);
  s.Offer(1, 60, 0, 2, 9999);  // same hour: ignored
  s.Offer(1, 3600, 0, 2, 4000);
  s.Started(1, 4000);
  // Unit 2 has no estimate: never sampled; unit 3 is stopped before it starts.
  s.Offer(2, 0, 0, 1, -1);
  s.Started(2, 100);
  s.Offer(3, 0, 0, 1, 50);
  s.Forget(3);
  s.Started(3, 50);
  const EstimateAccuracy a = s.Summary();
  EXPECT_EQ(a.samples, 2);
  // Errors 1,000 and 0: median 500; within 25 % of the wait ahead (4,000
  // and 400 s): 1,000 > 1,000? no (equal: within), 0 within.
  EXPECT_DOUBLE_EQ(a.median_abs_error_s, 500);
  EXPECT_DOUBLE_EQ(a.within_25pct, 1.0);
  // Naive: 2,000 (error 2,000, outside 1,000) and 5,600 (error 1,600,
  // outside 100): median 1,800.
  EXPECT_DOUBLE_EQ(a.naive_median_abs_error_s, 1800);
  EXPECT_DOUBLE_EQ(a.naive_within_25pct, 0.0);
}

}  // namespace
}  // namespace gpusched::sim
