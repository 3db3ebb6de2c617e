// Differential test of the queue manager's incremental state: the same
// random workloads (simulation.h) run once with the incremental structures
// (pending index fed by ClusterState's change feed, ordered queues, usage
// sums over changed nodes, reclaim planned off the mutex) and once
// recomputing all of it from scratch before every decision. Every filter
// answer and reason, bind result, preempt answer and tick's evictions must
// be identical.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test/queue/simulation.h"

namespace gpusched::queue {
namespace {

int64_t Steps() {
  const char* env = std::getenv("GPUSCHED_QUEUE_DIFF_STEPS");
  return env != nullptr ? std::atoll(env) : 12'000;
}

TEST(QueueDifferentialTest, IncrementalStateDecidesLikeRecomputingFromScratch) {
  int64_t binds = 0, evictions = 0, preemptions = 0, decisions = 0;
  for (uint32_t seed : {11u, 12u, 13u, 14u}) {
    std::vector<std::string> incremental, scratch;
    testing::SimulationResult a = testing::RunSimulation(Steps(), seed, false, &incremental);
    testing::SimulationResult b = testing::RunSimulation(Steps(), seed, true, &scratch);
    ASSERT_EQ(a.violation, "") << "seed " << seed;
    ASSERT_EQ(b.violation, "") << "seed " << seed;
    const size_t n = std::min(incremental.size(), scratch.size());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(incremental[i], scratch[i]) << "seed " << seed << ": first difference";
    }
    ASSERT_EQ(incremental.size(), scratch.size()) << "seed " << seed;
    binds += a.binds;
    evictions += a.evictions;
    preemptions += a.preemptions;
    decisions += static_cast<int64_t>(incremental.size());
  }
  // The comparison is only worth something on a cluster that moves.
  EXPECT_GE(binds, 500);
  EXPECT_GE(preemptions, 10);
  EXPECT_GE(evictions, 1);
  EXPECT_GE(decisions, 5'000);
}

}  // namespace
}  // namespace gpusched::queue
