// Invariant property test: long random sequences (simulation.h). Steps
// default to 100,000 per seed run; GPUSCHED_QUEUE_STEPS overrides.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "test/queue/simulation.h"

namespace gpusched::queue {
namespace {

int64_t Steps() {
  const char* env = std::getenv("GPUSCHED_QUEUE_STEPS");
  return env != nullptr ? std::atoll(env) : 100'000;
}

TEST(QueuePropertyTest, InvariantsHoldOverLongRandomSequences) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t steps = Steps();
  int64_t total = 0;
  testing::SimulationResult sum;
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    testing::SimulationResult r = testing::RunSimulation(steps / 4, seed);
    total += r.steps;
    ASSERT_EQ(r.violation, "") << "seed " << seed << " step " << r.steps;
    std::cout << "seed " << seed << ": " << r.steps << " steps, " << r.submits << " submits, "
              << r.binds << " binds, " << r.rejected_binds << " rejected binds, " << r.finishes
              << " finishes, " << r.cancels << " cancels, " << r.preemptions << " preemptions, "
              << r.evictions << " evictions, " << r.quota_changes << " quota changes, "
              << r.restarts << " restarts, " << r.gang_followups
              << " victim gangs evicted whole across nodes, up to " << r.gang_reservations
              << " reserved device sets, " << r.idle_checks << " work-conservation checks\n";
    sum.binds += r.binds;
    sum.finishes += r.finishes;
    sum.preemptions += r.preemptions;
    sum.evictions += r.evictions;
    sum.quota_changes += r.quota_changes;
    sum.gang_followups += r.gang_followups;
    sum.idle_checks += r.idle_checks;
  }
  // The invariants must be checked on a cluster that moves, not a stuck
  // one: per 100,000 steps, thousands of binds, hundreds of finishes, and
  // some preemptions, reclaims and quota changes.
  const double scale = static_cast<double>(steps) / 100'000;
  EXPECT_GE(sum.binds, 4'000 * scale);
  EXPECT_GE(sum.finishes, 500 * scale);
  EXPECT_GE(sum.preemptions, 20 * scale);
  EXPECT_GE(sum.evictions, 5 * scale);
  EXPECT_GE(sum.quota_changes, 500 * scale);
  EXPECT_GE(sum.idle_checks, 200 * scale);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << total << " steps in " << secs << " s\n";
  EXPECT_GE(total, steps);
}

// The same invariants with topology on (two cliques, gangs that require or
// prefer one), plus: no member of a required gang outside its clique.
TEST(QueuePropertyTest, InvariantsHoldWithTopologyOn) {
  const int64_t steps = Steps() / 2;
  int64_t binds = 0, domain_checks = 0;
  for (uint32_t seed : {11u, 12u}) {
    testing::SimulationResult r = testing::RunSimulation(steps / 2, seed, false, nullptr, true);
    ASSERT_EQ(r.violation, "") << "seed " << seed << " step " << r.steps;
    binds += r.binds;
    domain_checks += r.domain_checks;
    std::cout << "topology seed " << seed << ": " << r.steps << " steps, " << r.binds << " binds, "
              << r.preemptions << " preemptions, " << r.domain_checks
              << " required-gang domain checks\n";
  }
  const double scale = static_cast<double>(steps) / 50'000;
  EXPECT_GE(binds, 2'000 * scale);
  EXPECT_GE(domain_checks, 1'000 * scale);  // required gangs did hold GPUs
}

}  // namespace
}  // namespace gpusched::queue
