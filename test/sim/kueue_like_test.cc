// The Kueue-like baseline's two rules from Kueue's scheduler and
// preemption code, on hand-computed traces: fill-back (victims that turn
// out not to be needed are not evicted) and the admission cycle (heads that
// fit within nominal quota are admitted before borrowers); and Kueue's
// condition for preempting at all (a request within nominal quota).
#include "scheduler/sim/kueue_like.h"

#include "gtest/gtest.h"

namespace gpusched::sim {
namespace {

KueueJob Job(int ns, int gpus, double submit, double duration, int32_t priority = 0) {
  return {.ns = ns, .priority = priority, .gpus = gpus, .submit = submit, .duration = duration};
}

std::vector<ShareSpec> Nominal(std::vector<int64_t> gpus, int64_t limit) {
  std::vector<ShareSpec> out;
  for (int64_t g : gpus) out.push_back({.guarantee = g, .weight = 1, .limit = limit});
  return out;
}

// Three 8-GPU nodes; a and b have 12 GPUs of nominal quota each. b runs 8
// (node 0, admitted at 0) and 8 (node 1, at 1, borrowing), a runs 4 on node
// 2 (at 2) and b 4 beside it (at 3, borrowing). At 10 a's 8-GPU workload
// fits a's nominal quota (4 + 8 = 12): the candidates, most recently
// admitted first, are b's 4 on node 2, then b's 8 on node 1. Removing the
// 4 is not enough (node 2 still has a's 4); removing the 8 too frees node
// 1, and a fits without the 4: fill-back puts it back.
std::vector<KueueJob> FillBackTrace() {
  return {Job(1, 8, 0, 1000), Job(1, 8, 1, 1000), Job(0, 4, 2, 1000), Job(1, 4, 3, 1000),
          Job(0, 8, 10, 100)};
}

TEST(KueueLike, FillBackKeepsVictimsThatAreNotNeeded) {
  const KueueRun run = RunKueueLike(FillBackTrace(), Nominal({12, 12}, 24), {.capacity = 24});
  EXPECT_EQ(run.preemptions, 1);
  EXPECT_EQ(run.reclaim_evictions, 1);
  EXPECT_DOUBLE_EQ(run.lost_gpu_seconds, 30 * 8);
  EXPECT_DOUBLE_EQ(run.jobs[3].end, 1003);  // b's 4 was never evicted
  EXPECT_DOUBLE_EQ(run.jobs[4].end, 110);
  // b's evicted 8 (9 s run, 991 left + 30 s penalty) is back at 40; b then
  // borrows only with a's workload gone: 110 + 1021.
  EXPECT_DOUBLE_EQ(run.jobs[1].end, 1131);
}

TEST(KueueLike, WithoutFillBackEveryRemovedCandidateIsEvicted) {
  const KueueRun run =
      RunKueueLike(FillBackTrace(), Nominal({12, 12}, 24), {.capacity = 24, .fill_back = false});
  EXPECT_EQ(run.preemptions, 2);
  EXPECT_DOUBLE_EQ(run.lost_gpu_seconds, 30 * 8 + 30 * 4);
  EXPECT_GT(run.jobs[3].end, 1003);
}

// Two 8-GPU nodes; a and b have 8 GPUs of nominal quota each. a runs 8
// until 1000, b 8 until 100. a's second 8 (at 1) and b's second 8 (at 2)
// wait. At 100 b's node frees: a's head would borrow, b's fits its nominal
// quota. Kueue's cycle admits b's first, and a's no longer fits; admitting
// the older a first (priority, then creation, across queues) would make b
// reclaim the node at once.
std::vector<KueueJob> OrderTrace() {
  return {Job(0, 8, 0, 1000), Job(1, 8, 0, 100), Job(0, 8, 1, 1000), Job(1, 8, 2, 1000)};
}

TEST(KueueLike, WorkloadsWithinNominalQuotaAreAdmittedBeforeBorrowers) {
  const KueueRun run = RunKueueLike(OrderTrace(), Nominal({8, 8}, 16), {.capacity = 16});
  EXPECT_EQ(run.preemptions, 0);
  EXPECT_DOUBLE_EQ(run.jobs[3].end, 1100);  // b's second from 100
  EXPECT_DOUBLE_EQ(run.jobs[2].end, 2000);  // a's second once a's first is done
}

TEST(KueueLike, AdmittingInCreationOrderAcrossQueuesCostsAPreemption) {
  const KueueRun run =
      RunKueueLike(OrderTrace(), Nominal({8, 8}, 16), {.capacity = 16, .nominal_first = false});
  EXPECT_EQ(run.preemptions, 1);
  EXPECT_EQ(run.reclaim_evictions, 1);
}

// a has 8 GPUs of nominal quota of 16; its priority-100 workload of 16 is
// above its nominal quota, so Kueue does not preempt for it (not even a's
// own lower-priority workload): it waits until 1000.
TEST(KueueLike, NoPreemptionForARequestAboveNominalQuota) {
  const std::vector<KueueJob> t = {Job(0, 8, 0, 1000), Job(0, 16, 10, 10, 100)};
  const KueueRun run = RunKueueLike(t, Nominal({8, 8}, 16), {.capacity = 16});
  EXPECT_EQ(run.preemptions, 0);
  EXPECT_DOUBLE_EQ(run.jobs[1].end, 1010);
  const KueueRun before =
      RunKueueLike(t, Nominal({8, 8}, 16), {.capacity = 16, .preempt_within_nominal_only = false});
  EXPECT_EQ(before.preemptions, 1);
}

// GPUs beyond every ClusterQueue's nominal quota are the cohort's: a
// namespace with no nominal quota borrows them, up to its limit, and nobody
// can reclaim them.
TEST(KueueLike, TheCohortsOwnQuotaIsLentToAllAndReclaimedByNone) {
  const std::vector<KueueJob> t = {Job(0, 8, 0, 100), Job(0, 8, 0, 100), Job(1, 8, 10, 10)};
  const KueueRun run = RunKueueLike(t, Nominal({0, 0}, 16), {.capacity = 16});
  EXPECT_EQ(run.preemptions, 0);
  EXPECT_DOUBLE_EQ(run.jobs[0].end, 100);
  EXPECT_DOUBLE_EQ(run.jobs[1].end, 100);
  EXPECT_DOUBLE_EQ(run.jobs[2].end, 110);  // waits for a free node
  // With a limit of 8 a runs one at a time.
  const KueueRun limited = RunKueueLike(t, Nominal({0, 0}, 8), {.capacity = 16});
  EXPECT_DOUBLE_EQ(limited.jobs[1].end, 200);
  EXPECT_DOUBLE_EQ(limited.jobs[2].end, 20);
}

}  // namespace
}  // namespace gpusched::sim
