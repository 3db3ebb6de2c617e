// Replay protocol on tiny hand-computed traces.
#include "scheduler/sim/replay.h"

#include "gtest/gtest.h"

namespace gpusched::sim {
namespace {

Job J(std::string ns, int gpus, double submit, double duration) {
  Job j;
  j.id = ns + std::to_string(submit);
  j.ns = std::move(ns);
  j.gpus_per_pod = gpus;
  j.submit = submit;
  j.duration = duration;
  return j;
}

// One VC of one 8-GPU node. A: 8 GPUs 0..100. B: 8 GPUs at 10, runs 50.
// C: 8 GPUs at 20, runs 10.
std::vector<Job> Trace() { return {J("a", 8, 0, 100), J("a", 8, 10, 50), J("a", 8, 20, 10)}; }

TEST(Replay, FifoIsArrivalOrder) {
  auto r = RunReplay(Trace(), {{"a", 1}}, {.policy = "fifo"});
  ASSERT_TRUE(r.ok());
  // A ends 100; B 100..150 (JCT 140); C 150..160 (JCT 140).
  EXPECT_DOUBLE_EQ(r->avg_jct, (100 + 140 + 140) / 3.0);
  EXPECT_DOUBLE_EQ(r->avg_queue, (0 + 90 + 130) / 3.0);
  EXPECT_EQ(r->quota_violations, 0);
}

TEST(Replay, SjfRunsShortFirst) {
  auto r = RunReplay(Trace(), {{"a", 1}}, {.policy = "sjf"});
  ASSERT_TRUE(r.ok());
  // A ends 100; C 100..110 (JCT 90); B 110..160 (JCT 150).
  EXPECT_DOUBLE_EQ(r->avg_jct, (100 + 90 + 150) / 3.0);
}

TEST(Replay, SrtfPreemptsWithPenalty) {
  auto r = RunReplay(Trace(), {{"a", 1}}, {.policy = "srtf"});
  ASSERT_TRUE(r.ok());
  // t=10: A has 90 left > B's 50: A preempted (+30). B 10..61 (JCT 51).
  // t=20: C (10) < B (40 left): B preempted (+30 -> 70); C 20..31 (JCT 11).
  // t=31: A 120 vs B 70: B 31..102 (JCT 92); A 102..223 (JCT 223).
  EXPECT_EQ(r->preemptions, 2);
  EXPECT_DOUBLE_EQ(r->avg_jct, (223 + 92 + 11) / 3.0);
}

// The pooled baselines run every VC's jobs on every VC's nodes: a's second
// job runs on b's idle node at once, where per VC it waits for the first.
TEST(Replay, PooledBaselinesShareEveryNode) {
  const std::vector<Job> t = {J("a", 8, 0, 100), J("a", 8, 1, 100)};
  auto per_vc = RunReplay(t, {{"a", 1}, {"b", 1}}, {.policy = "fifo"});
  auto pooled = RunReplay(t, {{"a", 1}, {"b", 1}}, {.policy = "fifo-pool"});
  ASSERT_TRUE(per_vc.ok() && pooled.ok());
  EXPECT_DOUBLE_EQ(per_vc->avg_jct, (100 + 199) / 2.0);
  EXPECT_DOUBLE_EQ(pooled->avg_jct, 100);
  EXPECT_EQ(pooled->quota_violations, 0);
}

// Least attained service (Tiresias-style, duration-agnostic): A has had
// 5,000 s x 8 GPUs, past the 28,800 GPU-s threshold, when B arrives, so B
// displaces it (B runs 5,000..5,101 with the 1 s release delay); FIFO makes
// B wait for A.
TEST(Replay, LeastAttainedServiceDemotesLongJobs) {
  const std::vector<Job> t = {J("a", 8, 0, 100'000), J("a", 8, 5'000, 100)};
  auto las = RunReplay(t, {{"a", 1}}, {.policy = "las-pool"});
  auto fifo = RunReplay(t, {{"a", 1}}, {.policy = "fifo-pool"});
  ASSERT_TRUE(las.ok() && fifo.ok());
  EXPECT_EQ(las->preemptions, 1);
  EXPECT_DOUBLE_EQ(las->p50_jct, 101);  // B, the shorter JCT
  EXPECT_EQ(fifo->preemptions, 0);
  EXPECT_DOUBLE_EQ(fifo->avg_jct, (100'000 + 95'100) / 2.0);  // B runs 100,000..100,100
  // Before the threshold the first job keeps the node: B at 1,000 waits.
  auto early =
      RunReplay({J("a", 8, 0, 10'000), J("a", 8, 1'000, 100)}, {{"a", 1}}, {.policy = "las-pool"});
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(early->preemptions, 0);
}

// Kueue-like: a borrows b's idle nominal quota; b's job at 50 fits its
// nominal quota, so it evicts a's borrowing job at once (reclaimWithinCohort
// Any). b runs 50..60; the victim, stopped after 50 of 100 s, is back in
// its queue at 80 (30 s to requeue) and runs its last 50 s plus the 30 s
// penalty: 80..160.
TEST(Replay, KueueLikeReclaimsBorrowedQuota) {
  const std::vector<Job> t = {J("a", 8, 0, 100), J("a", 8, 0, 100), J("b", 8, 50, 10)};
  auto r = RunReplay(t, {{"a", 1}, {"b", 1}}, {.policy = "kueue-like"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->preemptions, 1);
  EXPECT_EQ(r->reclaim_evictions, 1);
  EXPECT_DOUBLE_EQ(r->avg_jct, (100 + 160 + 10) / 3.0);
  EXPECT_DOUBLE_EQ(r->lost_gpu_seconds, 30 * 8);
  EXPECT_EQ(r->guarantee_episodes, 0);  // b got its quota when it asked
}

// Kueue-like BestEffortFIFO: a head that cannot be admitted does not block
// the workloads behind it; a higher priority evicts a lower one of its own
// ClusterQueue (withinClusterQueue LowerPriority), never one of another
// ClusterQueue within its nominal quota.
TEST(Replay, KueueLikeBestEffortFifoAndLowerPriorityPreemption) {
  std::vector<Job> t = {J("a", 8, 0, 100), J("a", 16, 1, 10), J("a", 4, 2, 10)};
  auto r = RunReplay(t, {{"a", 2}}, {.policy = "kueue-like"});
  ASSERT_TRUE(r.ok()) << r.status();
  // The 4-GPU job runs at 2 beside the first; the 16-GPU one at 100.
  EXPECT_DOUBLE_EQ(r->avg_jct, (100 + (110 - 1) + 10) / 3.0);
  Job high = J("a", 8, 10, 10);
  high.priority = 100;
  auto p = RunReplay({J("a", 8, 0, 100), J("b", 8, 0, 100), high}, {{"a", 1}, {"b", 1}},
                     {.policy = "kueue-like"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->preemptions, 1);
  EXPECT_EQ(p->reclaim_evictions, 0);  // a's own job, not b's
}

// The work-conserving figure and the longest gang wait, for any policy on
// one pool. Two nodes; pooled FIFO: A (8) runs 0..100; the 16-GPU gang G
// (a Philly job larger than a node) heads the queue from 10 and S (8) waits
// behind it from 20 with a node idle; G runs 100..110, S 110..120. While
// something waits (10..110): 8 of 16 GPUs in use for 90 s, 16 for 10 s.
TEST(Replay, UtilisationWhileJobsWaitAndTheLongestGangWait) {
  const std::vector<Job> t = {J("a", 8, 0, 100), J("a", 16, 10, 10), J("a", 8, 20, 10)};
  auto r = RunReplay(t, {{"a", 2}}, {.policy = "fifo-pool"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->share_metrics);
  EXPECT_DOUBLE_EQ(r->util_while_waiting, (8 * 90 + 16 * 10) / (16.0 * 100));
  EXPECT_EQ(r->gang_jobs, 1);
  EXPECT_DOUBLE_EQ(r->max_gang_wait, 90);
  EXPECT_DOUBLE_EQ(r->surplus_jain, -1);  // one namespace: nothing to compare
  // Per VC nothing is shared: not computed.
  auto per_vc = RunReplay(t, {{"a", 2}}, {.policy = "fifo"});
  ASSERT_TRUE(per_vc.ok());
  EXPECT_FALSE(per_vc->share_metrics);
}

// The KAI-like baseline and the Kueue-like variants are replay policies;
// a misspelt variant is refused.
TEST(Replay, KaiLikeAndKueueLikeVariantsAreReplayPolicies) {
  const std::vector<Job> t = {J("a", 8, 0, 100), J("a", 8, 0, 100), J("b", 8, 50, 10)};
  for (const char* p :
       {"kai-like", "kueue-like-before", "kueue-like-no-fill-back", "kueue-like-no-ordering"}) {
    auto r = RunReplay(t, {{"a", 1}, {"b", 1}}, {.policy = p});
    ASSERT_TRUE(r.ok()) << p << ": " << r.status();
    EXPECT_EQ(r->jobs, 3) << p;
    EXPECT_EQ(r->preemptions, 1) << p;  // b reclaims its node from a's borrower
  }
  EXPECT_FALSE(RunReplay(t, {{"a", 1}, {"b", 1}}, {.policy = "kueue-like-x"}).ok());
}

// The KAI-like baseline reads each namespace's deserved quota, limit and
// over-quota weight from the config's quotas: with nothing deserved and
// weights 1 and 3 on four nodes, b's four jobs reclaim three of a's.
TEST(Replay, KaiLikeTakesDeservedQuotaAndWeightFromTheConfig) {
  std::vector<Job> t;
  for (int k = 0; k < 4; ++k) t.push_back(J("a", 8, 0, 1000));
  for (int k = 0; k < 4; ++k) t.push_back(J("b", 8, 10, 100));
  ReplayOptions o{.policy = "kai-like"};
  o.config.quotas.enabled = true;
  o.config.quotas.namespaces["a"] = {.gpus = {.guaranteed = 0, .limit = 32}, .weight = 1};
  o.config.quotas.namespaces["b"] = {.gpus = {.guaranteed = 0, .limit = 32}, .weight = 3};
  auto r = RunReplay(t, {{"a", 2}, {"b", 2}}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->preemptions, 3);
  EXPECT_EQ(r->per_ns.at("b").quota_gpus, 0);  // its deserved quota, not its pool
}

TEST(Replay, SharedPoolBorrowsAndReclaims) {
  // VC a (1 node) is busy; VC b (1 node) idle until t=50, then reclaims.
  std::vector<Job> t = {J("a", 8, 0, 100), J("a", 8, 0, 100), J("b", 8, 50, 10)};
  ReplayOptions o{.policy = "gpusched"};
  o.config.reclaim.only_lower_priority = false;  // equal priorities: "anyBorrower"
  auto r = RunReplay(t, {{"a", 1}, {"b", 1}}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->preemptions, 1);  // the borrower gives the node back to b
  EXPECT_EQ(r->quota_violations, 0);
  EXPECT_DOUBLE_EQ(r->per_ns.at("b").avg_jct, 40);  // after the victim's 30 s termination
  EXPECT_EQ(r->per_ns.at("a").max_borrowed, 8);
}

// Every baseline records a timeline, sampled every 50 s as the state was
// just before that time's events. FIFO on one node: A runs 0..100, B (at
// 10) 100..150, C (at 20) 150..160.
TEST(Replay, BaselinesSampleUsageAndTheWaitOfQueuedJobs) {
  auto r = RunReplay(Trace(), {{"a", 1}}, {.policy = "fifo", .sample_every = 50});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->timeline.size(), 4u);  // 0, 50, 100, 150; nothing runs after 160
  const double used[] = {0, 8, 8, 8}, util[] = {0, 1, 1, 1};
  const double wait[] = {0, (40 + 30) / 2.0, (90 + 80) / 2.0, 130};  // B, C; then C alone
  for (size_t k = 0; k < 4; ++k) {
    const TimelinePoint& p = r->timeline[k];
    EXPECT_DOUBLE_EQ(p.t, 50.0 * static_cast<double>(k));
    EXPECT_DOUBLE_EQ(p.used_gpus.at("a"), used[k]) << k;
    EXPECT_DOUBLE_EQ(p.utilisation, util[k]) << k;
    EXPECT_DOUBLE_EQ(p.queue_wait.at("a"), wait[k]) << k;
  }
}

// Per VC each VC is a world of its own: b's ends at 30, and from then on
// holds nothing, so at 50 the two 8-GPU VCs are half in use.
TEST(Replay, PerVcTimelinesAddUpOverTheirWorlds) {
  auto r = RunReplay({J("a", 8, 0, 100), J("b", 8, 0, 30)}, {{"a", 1}, {"b", 1}},
                     {.policy = "fifo", .sample_every = 50});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->timeline.size(), 3u);  // 0, 50, 100
  EXPECT_DOUBLE_EQ(r->timeline[1].used_gpus.at("a"), 8);
  EXPECT_DOUBLE_EQ(r->timeline[1].used_gpus.at("b"), 0);
  EXPECT_DOUBLE_EQ(r->timeline[1].utilisation, 0.5);
}

// Every replay policy, baselines included, can be charted over time.
TEST(Replay, EveryPolicyHasATimeline) {
  for (const char* p : {"fifo", "sjf", "srtf", "fifo-pool", "sjf-pool", "srtf-pool", "las-pool",
                        "kueue-like", "kai-like", "gpusched"}) {
    auto r = RunReplay(Trace(), {{"a", 1}}, {.policy = p, .sample_every = 50});
    ASSERT_TRUE(r.ok()) << p << ": " << r.status();
    ASSERT_GE(r->timeline.size(), 3u) << p;
    EXPECT_DOUBLE_EQ(r->timeline[1].used_gpus.at("a"), 8) << p;  // A runs at 50
  }
}

}  // namespace
}  // namespace gpusched::sim
