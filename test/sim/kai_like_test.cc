// The KAI-like baseline on hand-computed traces: idle GPUs are used by
// whoever waits (up to the limit), the surplus is divided by over-quota
// weight and reclaimed for a queue below its fair share, a deserved quota
// is restored, and a limit holds.
#include "scheduler/sim/kai_like.h"

#include "gtest/gtest.h"

namespace gpusched::sim {
namespace {

KueueJob Job(int ns, int gpus, double submit, double duration) {
  return {.ns = ns, .priority = 0, .gpus = gpus, .submit = submit, .duration = duration};
}

// Four 8-GPU nodes, nothing deserved; a has over-quota weight 1, b 3. a's
// four 8-GPU jobs take the idle pool at 0. At 10 b's four arrive: fair
// shares 8 and 24, so b reclaims three of a's jobs (a stays above its share
// until the third) and runs three; its fourth would take it past 24. At
// 110 b's three are done: fair shares 24 (a, which asks 32 again) and 8 (b,
// which asks 8): b's fourth starts, and two of a's.
TEST(KaiLike, SurplusByOverQuotaWeightAndReclaimToTheFairShare) {
  std::vector<KueueJob> t;
  for (int k = 0; k < 4; ++k) t.push_back(Job(0, 8, 0, 1000));
  for (int k = 0; k < 4; ++k) t.push_back(Job(1, 8, 10, 100));
  const std::vector<ShareSpec> ns = {{.guarantee = 0, .weight = 1, .limit = 32},
                                     {.guarantee = 0, .weight = 3, .limit = 32}};
  const KueueRun run = RunKaiLike(t, ns, {.capacity = 32});
  EXPECT_EQ(run.preemptions, 3);
  EXPECT_EQ(run.reclaim_evictions, 3);
  for (int k = 4; k < 7; ++k) EXPECT_DOUBLE_EQ(run.jobs[k].end, 110) << k;
  EXPECT_DOUBLE_EQ(run.jobs[7].end, 210);
  EXPECT_DOUBLE_EQ(run.jobs[3].end, 1000);  // the one a kept
  // Equal weights: fair shares 16 and 16, two reclaimed.
  std::vector<ShareSpec> equal = ns;
  equal[1].weight = 1;
  EXPECT_EQ(RunKaiLike(t, equal, {.capacity = 32}).preemptions, 2);
}

// a and b deserve 16 each of 32; a holds all 32 when b's 8 arrive: b is
// within its deserved quota and its fair share, a above max(deserved, fair
// share) = 24: one of a's jobs goes.
TEST(KaiLike, ADeservedQuotaIsRestoredByReclaim) {
  std::vector<KueueJob> t;
  for (int k = 0; k < 4; ++k) t.push_back(Job(0, 8, 0, 1000));
  t.push_back(Job(1, 8, 10, 50));
  const std::vector<ShareSpec> ns = {{.guarantee = 16, .weight = 1, .limit = 32},
                                     {.guarantee = 16, .weight = 1, .limit = 32}};
  const KueueRun run = RunKaiLike(t, ns, {.capacity = 32});
  EXPECT_EQ(run.preemptions, 1);
  EXPECT_DOUBLE_EQ(run.jobs[4].end, 60);
  EXPECT_DOUBLE_EQ(run.jobs[4].queue_time, 0);
  EXPECT_TRUE(run.guarantee_waits.empty());  // b held what it asked for at once
}

// Reclaim sees the jobs that finished since the last event. Three nodes;
// a (weight 1) runs three 8-GPU jobs from 0, the first until 50, and asks
// 16 more at 10; b (weight 3) asks 16 at 60: fair shares 8 and 16, so b
// reclaims one of a's two running jobs (not the one that has finished) and
// starts at once.
TEST(KaiLike, ReclaimSeesJobsFinishedSinceTheLastEvent) {
  const std::vector<KueueJob> t = {Job(0, 8, 0, 50), Job(0, 8, 0, 1000), Job(0, 8, 0, 1000),
                                   Job(0, 16, 10, 100), Job(1, 16, 60, 100)};
  const std::vector<ShareSpec> ns = {{.guarantee = 0, .weight = 1, .limit = 48},
                                     {.guarantee = 0, .weight = 3, .limit = 24}};
  const KueueRun run = RunKaiLike(t, ns, {.capacity = 24});
  EXPECT_EQ(run.preemptions, 1);
  EXPECT_DOUBLE_EQ(run.jobs[4].end, 160);
  EXPECT_DOUBLE_EQ(run.jobs[0].end, 50);
}

// A limit holds even with idle GPUs: a's second job waits for its first.
TEST(KaiLike, TheLimitHoldsWithIdleGpus) {
  const std::vector<KueueJob> t = {Job(0, 8, 0, 100), Job(0, 8, 0, 100)};
  const KueueRun run = RunKaiLike(t, {{.guarantee = 0, .weight = 1, .limit = 8}}, {.capacity = 16});
  EXPECT_DOUBLE_EQ(run.jobs[1].end, 200);
  EXPECT_EQ(run.preemptions, 0);
  EXPECT_DOUBLE_EQ(run.util_while_waiting, 0.5);  // 8 of 16 in use while it waited
}

}  // namespace
}  // namespace gpusched::sim
