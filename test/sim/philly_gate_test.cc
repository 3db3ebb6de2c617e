// The Philly replay on the real trace (philly-calibration.md §1): FIFO, SJF
// and SRTF must pass gates G1 (x1) and G2 (x4), and the gpusched policy
// (the queue manager) must beat oracle SRTF's average JCT at x4 without a
// quota violation. Skipped without the traces and in the sanitizer build.
#include <cmath>
#include <cstdlib>

#include "gtest/gtest.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/replay.h"

namespace gpusched::sim {
namespace {

struct Reference {
  const char* policy;
  double jct, queue;
};

class PhillyGate : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("GPUSCHED_SANITIZER_BUILD") != nullptr) GTEST_SKIP() << "sanitizer build";
    const std::string dir = std::string(GPUSCHED_SHARED_DIR) + "/traces/philly/";
    auto vcs = ReadFile(dir + "helios_qssf_philly_vc_nodes.csv");
    auto csv = ReadFile(dir + "philly_jobs_pollux.csv");
    if (!vcs.ok() || !csv.ok()) GTEST_SKIP() << "Philly traces absent";
    pools_ = *ParseVcNodes(*vcs);
    std::vector<std::string> names;
    for (const auto& [vc, n] : pools_) names.push_back(vc);
    jobs_ = *ParsePhillyJobs(*csv, names);
    ASSERT_EQ(jobs_.size(), 68503u);
  }
  ReplayResult Run(const std::string& policy, double load) {
    ReplayOptions o;
    o.policy = policy;
    o.load = load;
    auto r = RunReplay(jobs_, pools_, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ReplayResult{};
  }
  std::vector<Job> jobs_;
  std::vector<std::pair<std::string, int>> pools_;
};

TEST_F(PhillyGate, G1BaselinesAtLoad1) {
  for (const Reference& ref :
       {Reference{"fifo", 11585, 105}, Reference{"sjf", 11543, 63}, Reference{"srtf", 11533, 51}}) {
    ReplayResult r = Run(ref.policy, 1);
    EXPECT_LE(std::fabs(r.avg_jct - ref.jct), 0.01 * ref.jct) << ref.policy;
    EXPECT_LE(std::fabs(r.avg_queue - ref.queue), std::max(0.10 * ref.queue, 15.0)) << ref.policy;
  }
}

TEST_F(PhillyGate, G2BaselinesAndGpuschedGoalAtLoad4) {
  for (const Reference& ref : {Reference{"fifo", 117298, 71375}, Reference{"sjf", 58728, 12805},
                               Reference{"srtf", 54762, 8835}}) {
    ReplayResult r = Run(ref.policy, 4);
    EXPECT_LE(std::fabs(r.avg_jct - ref.jct), 0.05 * ref.jct) << ref.policy;
    EXPECT_LE(std::fabs(r.avg_queue - ref.queue), 0.10 * ref.queue) << ref.policy;
  }
  ReplayResult g = Run("gpusched", 4);
  EXPECT_EQ(g.jobs, 68503);
  EXPECT_LT(g.avg_jct, 54762);
  EXPECT_EQ(g.quota_violations, 0);
}

}  // namespace
}  // namespace gpusched::sim
