// Queue manager: quota ledger, admission messages, queue order and backfill,
// bind correctness, gangs, reclaim and hot reload.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/queue/queue_wiring.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Devices;
using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::Pcie4xT4;
using ::gpusched::testing::PodBuilder;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using testing::H100s;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;
using ::testing::SizeIs;

QueueOptions ResearchCohort() {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(16, 24, "research")}, {"team-b", Quota(8, 8, "research")}});
  return o;
}

PodRequest Running(const std::string& name, const std::string& ns, int gpus,
                   const std::string& node, DeviceMask ids, int32_t priority = 0) {
  return PodBuilder(name, ns).Gpus(gpus).OnNode(node, ids).Priority(priority).Build();
}

TEST(QuotaLedgerTest, LendsEveryIdleGpuButTheBorrowersOwnIdleGuarantee) {
  auto state = gpusched::testing::MakeState(
      H100s(3), {Running("a", "team-a", 8, "h0", 0xff), Running("c", "team-c", 8, "h1", 0xff)});
  QuotaConfig q = Quotas(
      {{"team-a", Quota(4, 24, "r")}, {"team-b", Quota(8, 8, "r")}, {"team-c", Quota(8, 8, "r")}});
  QuotaLedger ledger(q, *state->Snapshot());
  // 24 GPUs, 16 held: 8 idle, all of them team-b's idle guarantee.
  EXPECT_EQ(ledger.Capacity(), 24000);
  EXPECT_EQ(ledger.Idle(), 8000);
  EXPECT_EQ(ledger.Usage("team-a"), 8000);
  EXPECT_EQ(ledger.Borrowed("team-a"), 4000);
  EXPECT_EQ(ledger.Lendable("team-a"), 8000);        // every idle GPU
  EXPECT_EQ(ledger.Lendable("team-b"), 0);           // the idle ones are its own guarantee
  EXPECT_EQ(ledger.CohortLendable("team-a"), 8000);  // b: 8 idle, c: 0
  EXPECT_EQ(ledger.CohortLendable("team-b"), 0);     // c: 0, a: -4 (borrowing)
  EXPECT_TRUE(ledger.Check("team-a", 4000).ok);
  EXPECT_TRUE(ledger.Check("team-a", 8000).ok);   // every idle GPU
  EXPECT_FALSE(ledger.Check("team-a", 9000).ok);  // limit 24 ok, but 9 > 8 idle
  EXPECT_FALSE(ledger.Check("team-a", 9000).over_limit);
  EXPECT_TRUE(ledger.Check("team-a", 17000).over_limit);
  EXPECT_TRUE(ledger.Check("team-b", 8000).ok);  // within guarantee: always
}

// GPUs no guarantee covers are lent to every namespace, cohort or not, up
// to its limit; a refusal by the limit says so.
TEST(QuotaLedgerTest, LendsUnguaranteedGpusToEveryNamespaceUpToItsLimit) {
  auto state = gpusched::testing::MakeState(H100s(4), {Running("a", "team-a", 8, "h0", 0xff, 0)});
  QuotaConfig q = Quotas({{"team-a", Quota(8, 32, "c")}}, Quota(0, 4, "c"));
  QuotaLedger ledger(q, *state->Snapshot());
  EXPECT_EQ(ledger.GuaranteedTotal(), 8000);
  EXPECT_EQ(ledger.Lendable("team-a"), 24000);
  EXPECT_EQ(ledger.CohortLendable("team-a"), 0);  // the cohort lends nothing: 24 GPUs no one's
  EXPECT_TRUE(ledger.Check("team-a", 8000).ok);
  EXPECT_TRUE(ledger.Check("default", 1000).ok);
  EXPECT_TRUE(ledger.Check("no-cohort-ns", 0).ok);
  QuotaVerdict v = ledger.Check("default", 8000);
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(v.over_limit);
  EXPECT_EQ(QuotaMessage("default", "c", v),
            "gpusched: namespace default at its limit: holds 0 of limit 4 GPUs (0 guaranteed)");
  // A namespace with no cohort borrows the same idle GPUs.
  QuotaConfig alone = Quotas({{"team-a", Quota(8, 32)}, {"solo", Quota(0, 16)}});
  QuotaLedger l2(alone, *state->Snapshot());
  EXPECT_TRUE(l2.Check("solo", 16000).ok);
  EXPECT_FALSE(l2.Check("solo", 17000).ok);
}

// An unset limit reads "no limit" in messages.
TEST(QuotaLedgerTest, MessageNamesIdleGpusAndAnUnsetLimit) {
  auto state = gpusched::testing::MakeState(H100s(1), {Running("a", "team-a", 8, "h0", 0xff)});
  QuotaConfig q = Quotas({{"team-a", Quota(8, 8)}}, Quota(0, kUnlimitedGpus));
  QuotaLedger ledger(q, *state->Snapshot());
  QuotaVerdict v = ledger.Check("default", 1000);
  EXPECT_FALSE(v.ok);
  EXPECT_FALSE(v.over_limit);
  EXPECT_EQ(QuotaMessage("default", "", v),
            "gpusched: namespace default at quota: 0/0 GPUs guaranteed, no limit, 0 idle GPUs it "
            "may borrow");
}

// Claims held back per cohort are cached in the ledger (Claimed is read on
// every filter); adding usage to a claiming namespace must move them exactly
// as a ledger built afresh with the same usage and claims says.
TEST(QuotaLedgerTest, ClaimedFollowsUsageAddedToAClaimingNamespace) {
  auto state = gpusched::testing::MakeState(H100s(4), {Running("a", "team-a", 2, "h0", 0x03)});
  QuotaConfig q = Quotas({{"team-a", Quota(8, 16, "r")},
                          {"team-b", Quota(8, 16, "r")},
                          {"team-c", Quota(4, 8, "r")},
                          {"team-d", Quota(8, 8, "other")}});
  const std::map<std::string, int64_t> claims = {
      {"team-a", 4000}, {"team-c", 3000}, {"team-d", 8000}};
  QuotaLedger ledger(q, *state->Snapshot());
  ledger.SetClaims(claims);
  // Every claim holds back, whatever the cohort.
  EXPECT_EQ(ledger.Claimed("team-b"), 4000 + 3000 + 8000);  // a: 6 idle, holds 4; c: 3; d: 8
  EXPECT_EQ(ledger.Claimed("team-a"), 3000 + 8000);         // not its own
  EXPECT_EQ(ledger.Claimed("team-d"), 4000 + 3000);
  // team-a takes 4 GPUs more: 2 idle left, so it holds back 2, not 4.
  ledger.Add("team-a", "NVIDIA-H100-80GB-HBM3", 4000);
  ledger.Add("team-c", "NVIDIA-H100-80GB-HBM3", 2000);  // c: 2 idle, holds 2
  EXPECT_EQ(ledger.Claimed("team-b"), 2000 + 2000 + 8000);
  auto after = gpusched::testing::MakeState(
      H100s(4), {Running("a", "team-a", 6, "h0", 0x3f), Running("c", "team-c", 2, "h1", 0x03)});
  QuotaLedger fresh(q, *after->Snapshot());
  fresh.SetClaims(claims);
  for (const std::string ns : {"team-a", "team-b", "team-c", "team-d", "team-e"}) {
    EXPECT_EQ(ledger.Claimed(ns), fresh.Claimed(ns)) << ns;
    EXPECT_EQ(ledger.Lendable(ns), fresh.Lendable(ns)) << ns;
    EXPECT_EQ(ledger.CohortLendable(ns), fresh.CohortLendable(ns)) << ns;
    for (int64_t demand : {1000, 4000, 9000}) {
      EXPECT_EQ(ledger.Check(ns, demand).ok, fresh.Check(ns, demand).ok) << ns << " " << demand;
    }
  }
}

TEST(QueueTest, InadmissiblePodFailsEveryNodeWithOneMessage) {
  Harness h(H100s(4),
            {Running("a0", "team-a", 8, "h0", 0xff), Running("a1", "team-a", 8, "h1", 0xff),
             Running("b0", "team-b", 8, "h2", 0xff), Running("x0", "other", 8, "h3", 0xff)},
            ResearchCohort());
  PodRequest p1 = PodBuilder("p1", "team-a").Gpus(4).Created(1).Build();
  PodRequest p2 = PodBuilder("p2", "team-a").Gpus(4).Created(2).Build();
  PodRequest p3 = PodBuilder("p3", "team-a").Gpus(4).Created(3).Build();
  std::string reason;
  h.Filter(p2);
  h.Filter(p3);
  EXPECT_THAT(h.Filter(p1, &reason), IsEmpty());
  EXPECT_EQ(reason,
            "gpusched: namespace team-a at quota: 16/16 GPUs guaranteed, limit 24, 0 idle GPUs it "
            "may borrow; pod needs 4; position 1 in queue");
  h.Filter(p3, &reason);
  EXPECT_EQ(reason,
            "gpusched: namespace team-a at quota: 16/16 GPUs guaranteed, limit 24, 0 idle GPUs it "
            "may borrow; pod needs 4; 2 earlier in queue need 8; position 3 in queue");
}

TEST(QueueTest, BorrowsIdleGuaranteeOfCohortUpToLimit) {
  Harness h(H100s(4),
            {Running("a0", "team-a", 8, "h0", 0xff), Running("a1", "team-a", 8, "h1", 0xff)},
            ResearchCohort());
  PodRequest p = PodBuilder("p", "team-a").Gpus(8).Build();
  EXPECT_THAT(h.Filter(p), SizeIs(2));
  ASSERT_EQ(h.Bind(p, "h2"), "");
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("q", "team-a").Gpus(1).Build(), &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("at its limit: holds 24 of limit 24 GPUs (16 guaranteed)"));
}

TEST(QueueTest, NoQuotasSectionMeansNoEnforcement) {
  Harness h(H100s(1), {}, QueueOptions{});
  EXPECT_THAT(h.Filter(PodBuilder("p", "anyone").Gpus(8).Build()), ElementsAre("h0"));
}

TEST(QueueTest, StrictPriorityBlocksLaterPodOnSharedNodesButBackfillsDisjointOnes) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(32, 32)}});
  Harness h({Hgx8H100("h0"), Pcie4xT4("t0")}, {Running("run", "team-a", 4, "h0", 0x0f)}, o);
  PodRequest big = PodBuilder("big", "team-a").Gpus(8).Priority(100).Created(5).Build();
  PodRequest small = PodBuilder("small", "team-a").Gpus(2).Priority(10).Created(1).Build();
  PodRequest t4 = PodBuilder("t4", "team-a").Gpus(2).Models({"T4"}).Priority(10).Build();
  std::string reason;
  EXPECT_THAT(h.Filter(big, &reason), IsEmpty());  // waits for GPUs, not quota
  EXPECT_THAT(reason, HasSubstr("GPUs free"));
  EXPECT_THAT(h.Filter(small, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("waiting behind big (priority 100, needs 8 GPUs)"));
  EXPECT_THAT(reason, HasSubstr("position 2 in queue"));
  // big cannot use a 4-GPU T4 node at all, so a T4 pod cannot delay it.
  EXPECT_THAT(h.Filter(t4), ElementsAre("t0"));
}

TEST(QueueTest, BestEffortFifoLetsALaterPodPassOneThatCannotStart) {
  // As above, the 8-GPU pod cannot start (4 GPUs in use); under StrictFIFO
  // the 2-GPU pod waits behind it, under BestEffortFIFO it starts, and the
  // quota of the earlier pod is not set aside either.
  for (QueueingStrategy s : {QueueingStrategy::kStrictFifo, QueueingStrategy::kBestEffortFifo}) {
    SCOPED_TRACE(static_cast<int>(s));
    QueueOptions o;
    o.quotas = Quotas({{"team-a", Quota(12, 12)}});
    o.quotas.namespaces["team-a"].queueing = s;
    Harness h({Hgx8H100("h0")}, {Running("run", "team-a", 4, "h0", 0x0f)}, o);
    PodRequest big = PodBuilder("big", "team-a").Gpus(8).Priority(100).Created(1).Build();
    PodRequest small = PodBuilder("small", "team-a").Gpus(2).Created(2).Build();
    std::string reason;
    EXPECT_THAT(h.Filter(big), IsEmpty());
    if (s == QueueingStrategy::kStrictFifo) {
      // 4 used + 8 ahead + 2 > 12: quota held for big first.
      EXPECT_THAT(h.Filter(small, &reason), IsEmpty());
      EXPECT_THAT(reason, HasSubstr("1 earlier in queue need 8"));
    } else {
      EXPECT_THAT(h.Filter(small, &reason), ElementsAre("h0")) << reason;
      ASSERT_EQ(h.Bind(small, "h0"), "");
      // Priority order stays: big is still first in the queue.
      EXPECT_THAT(h.Filter(big, &reason), IsEmpty());
      EXPECT_THAT(reason, HasSubstr("position 1 in queue"));
    }
  }
}

TEST(QueueTest, StalePendingPodStopsBlocking) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(32, 32)}});
  Harness h({Hgx8H100("h0")}, {Running("run", "team-a", 4, "h0", 0x0f)}, o);
  PodRequest big = PodBuilder("big", "team-a").Gpus(8).Priority(100).Build();
  PodRequest small = PodBuilder("small", "team-a").Gpus(2).Build();
  h.Filter(big);
  EXPECT_THAT(h.Filter(small), IsEmpty());
  h.now_ms += o.stale_after_ms + 1;
  EXPECT_THAT(h.Filter(small), ElementsAre("h0"));
}

// What counts ahead of a pod is kept per namespace between requests (the
// UnitIndex); it must follow every change that does not touch the queue's
// entries. FilterOnly asks without the source changing anything.
TEST(QueueIndexTest, FollowsFirstAskAndStaleness) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(32, 32)}});
  Harness h({Hgx8H100("h0")}, {Running("run", "team-a", 4, "h0", 0x0f)}, o);
  PodRequest big = PodBuilder("big", "team-a").Gpus(8).Priority(100).Build();
  PodRequest small = PodBuilder("small", "team-a").Gpus(2).Build();
  h.Submit(big);
  h.Submit(small);
  std::string reason;
  // big was never asked about: it holds quota but no nodes.
  EXPECT_THAT(h.FilterOnly(small), ElementsAre("h0"));
  EXPECT_THAT(h.FilterOnly(big), IsEmpty());  // first ask
  EXPECT_THAT(h.FilterOnly(small, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("waiting behind big"));
  h.now_ms += o.stale_after_ms + 1;  // big not asked since: stale
  EXPECT_THAT(h.FilterOnly(small), ElementsAre("h0"));
  EXPECT_THAT(h.FilterOnly(big), IsEmpty());  // asked again
  EXPECT_THAT(h.FilterOnly(small, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("waiting behind big"));
}

TEST(QueueIndexTest, FollowsAGangsMembersPlacedWithoutAQueueChange) {
  // Gang g of 2 x 4 GPUs, one member running: the pending one needs 4
  // (<= the limit of 6, so it counts ahead of later pods). Once the running
  // member is gone the gang needs 8, more than the limit: it can never run
  // and stops counting. No pending entry changed in between.
  QueueOptions o;
  o.quotas = Quotas({{"team-b", Quota(6, 6)}});
  PodRequest g0 = PodBuilder("g0", "team-b").Gpus(4).Gang("g", 2).OnNode("h0", 0x0f).Build();
  Harness h(H100s(2), {g0}, o);
  PodRequest g1 = PodBuilder("g1", "team-b").Gpus(4).Gang("g", 2).Priority(100).Build();
  PodRequest s = PodBuilder("s", "team-b").Gpus(2).Build();
  h.Submit(g1);
  h.Submit(s);
  std::string reason;
  EXPECT_THAT(h.FilterOnly(g1), IsEmpty());  // 4 used + 4 > 6
  EXPECT_THAT(h.FilterOnly(s, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("1 earlier in queue need 4"));
  h.state().RemovePod(g0.uid);
  h.state().Commit();
  EXPECT_THAT(h.FilterOnly(s, &reason), SizeIs(2)) << reason;
}

TEST(BindTest, RejectsUnknownBoundAndMisfitPodsWithoutChangingAnything) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 8)}});
  Harness h(H100s(2), {Running("full", "team-x", 8, "h1", 0xff)}, o);
  PodRequest p = PodBuilder("p", "team-a").Gpus(4).Build();
  EXPECT_THAT(h.Bind(p, "h0"), HasSubstr("not in the cluster view"));
  ASSERT_THAT(h.Filter(p), ElementsAre("h0"));
  auto before = h.state().Snapshot()->generation();
  EXPECT_THAT(h.Bind(p, "h1"), HasSubstr("GPUs free"));  // misfit node
  EXPECT_EQ(h.state().Snapshot()->generation(), before);
  EXPECT_FALSE(h.state().FindPod(p.uid)->HoldsGpus());
  EXPECT_EQ(h.Bind(p, "h0"), "");
  EXPECT_EQ(h.Bind(p, "h0"), "");  // idempotent retry
  EXPECT_THAT(h.Bind(p, "h1"), HasSubstr("already bound to h0"));
  EXPECT_EQ(h.state().FindPod(p.uid)->node_name, "h0");
}

TEST(BindTest, RechecksQuotaAtBind) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 8)}});
  Harness h(H100s(2), {}, o);
  PodRequest p = PodBuilder("p", "team-a").Gpus(8).Created(1).Build();
  PodRequest q = PodBuilder("q", "team-a").Gpus(8).Created(2).Build();
  ASSERT_THAT(h.Filter(p), SizeIs(2));
  h.now_ms += o.stale_after_ms + 1;  // p stops blocking q (as if kube lost interest)
  ASSERT_THAT(h.Filter(q), SizeIs(2));
  EXPECT_EQ(h.Bind(q, "h0"), "");
  EXPECT_THAT(h.Bind(p, "h1"), HasSubstr("bind rejected: namespace team-a at its limit"));
  EXPECT_FALSE(h.state().FindPod(p.uid)->HoldsGpus());
}

// A bind whose write-back to the cluster fails is taken back by Bind itself:
// the pod is pending again, its devices free, still in its queue.
TEST(BindTest, FailedWriteBackRollsTheAssumptionBack) {
  Harness h(H100s(1), {}, QueueOptions{});
  std::string fail = "gpusched: binding refused by the API server";
  h.service->SetBindWriteBack([&fail](const BindingArgs&, DeviceMask) { return fail; });
  PodRequest p = PodBuilder("p", "team-a").Gpus(8).Build();
  ASSERT_THAT(h.Filter(p), SizeIs(1));
  EXPECT_EQ(h.Bind(p, "h0"), fail);
  EXPECT_FALSE(h.state().FindPod(p.uid)->HoldsGpus());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 0);
  EXPECT_THAT(h.queue->Report({"team-a", 10}).namespaces.at(0).queue, SizeIs(1));
  fail.clear();
  EXPECT_EQ(h.Bind(p, "h0"), "");
  EXPECT_TRUE(h.state().FindPod(p.uid)->HoldsGpus());
}

TEST(GangTest, ReservesDevicesForAllMembersBeforeTheFirstPasses) {
  Harness h(H100s(2), {}, QueueOptions{});
  PodRequest m0 = PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build();
  PodRequest m1 = PodBuilder("m1", "team-a").Gpus(8).Gang("g", 2).Build();
  auto n0 = h.Filter(m0);
  ASSERT_THAT(n0, SizeIs(1));
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), SizeIs(2));
  // A non-gang pod cannot take the reserved devices.
  EXPECT_THAT(h.Filter(PodBuilder("other", "team-a").Gpus(1).Build()), IsEmpty());
  auto n1 = h.Filter(m1);
  ASSERT_THAT(n1, SizeIs(1));
  EXPECT_NE(n0[0], n1[0]);
  EXPECT_THAT(h.Bind(m0, n1[0]), HasSubstr("reserved GPUs"));
  EXPECT_EQ(h.Bind(m0, n0[0]), "");
  EXPECT_EQ(h.Bind(m1, n1[0]), "");
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 16000);
}

TEST(GangTest, UnlockedPlacementIsRedoneWhenTheClusterChangedBeforeItsCommit) {
  Harness h(H100s(3), {}, QueueOptions{});
  int placements = 0;
  std::string taken;
  h.after_unlocked_placement = [&](const auto& picks) {
    if (placements++ > 0) return;
    ASSERT_THAT(picks, SizeIs(2));
    // Meanwhile another namespace's pod binds on the first node picked.
    taken = picks.front().first;
    h.Submit(PodBuilder("intruder", "team-z").Gpus(8).OnNode(taken, 0xff).Build());
  };
  ASSERT_THAT(h.Filter(PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build()), SizeIs(1));
  EXPECT_EQ(placements, 2);  // placed again on the changed cluster, then committed
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), SizeIs(2));
  for (const auto& node : h.state().Snapshot()->nodes()) {
    if (node->name != taken) continue;
    for (const PodOnNode& p : node->pods) EXPECT_FALSE(p.reservation) << p.uid;
  }
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 24000);  // no device twice
}

// Gang g of team-a, 2 x 8 GPUs, is refused because only one member fits
// now; nothing is reserved and only the 8 GPUs taken meanwhile are in use.
void ExpectGangOfTwoRefusedWithOneFit(Harness& h) {
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build(), &reason),
              IsEmpty());
  EXPECT_THAT(reason, HasSubstr("gang g needs 2 x 8 GPUs at once; only 1 fit now"));
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 8000);
}

TEST(GangTest, UnlockedPlacementThatLosesItsNodesCommitsNothing) {
  Harness h(H100s(2), {}, QueueOptions{});
  int placements = 0;
  h.after_unlocked_placement = [&](const auto& picks) {
    if (placements++ > 0) return;
    h.Submit(PodBuilder("intruder", "team-z").Gpus(8).OnNode(picks.back().first, 0xff).Build());
  };
  ExpectGangOfTwoRefusedWithOneFit(h);
}

TEST(GangTest, UnlockedPlacementStandsWhenTheClusterChangedElsewhere) {
  Harness h(H100s(3), {}, QueueOptions{});
  int placements = 0;
  h.after_unlocked_placement = [&](const auto& picks) {
    ++placements;
    // A pod binds on a node the placement did not pick.
    for (const NodeSpec& n : h.nodes) {
      if (n.name != picks[0].first && n.name != picks[1].first) {
        h.Submit(PodBuilder("other", "team-z").Gpus(1).OnNode(n.name, 0x01).Build());
      }
    }
  };
  ASSERT_THAT(h.Filter(PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build()), SizeIs(1));
  EXPECT_EQ(placements, 1);  // committed as placed
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), SizeIs(2));
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 17000);
}

TEST(GangTest, UnlockedPlacementOverAModelQuotaThatFilledMeanwhileIsNotCommitted) {
  QueueOptions o;
  NamespaceQuota a = Quota(32, 32);
  a.models["H100"] = {16, 16};
  o.quotas = Quotas({{"team-a", a}});
  Harness h(H100s(4), {}, o);
  int placements = 0;
  h.after_unlocked_placement = [&](const auto& picks) {
    if (placements++ > 0) return;
    // Meanwhile a pod of the same namespace takes 8 of its 16 H100s, on a
    // node the placement did not pick: the picks would overrun the quota.
    for (const NodeSpec& n : h.nodes) {
      if (n.name == picks[0].first || n.name == picks[1].first) continue;
      h.Submit(PodBuilder("solo", "team-a").Gpus(8).OnNode(n.name, 0xff).Build());
      return;
    }
  };
  ExpectGangOfTwoRefusedWithOneFit(h);
}

// The namespace's own quota, not only a per-model one: with BestEffortFIFO
// two gangs of a namespace pass admission side by side, and the second
// must not commit once the first has taken the room (the concurrency test
// saw a namespace at twice its limit this way).
TEST(GangTest, UnlockedPlacementOverANamespaceQuotaThatFilledMeanwhileIsNotCommitted) {
  QueueOptions o;
  NamespaceQuota a = Quota(16, 16);
  a.queueing = QueueingStrategy::kBestEffortFifo;
  o.quotas = Quotas({{"team-a", a}});
  Harness h(H100s(4), {}, o);
  h.after_unlocked_placement = [&](const auto& picks) {
    // Meanwhile a pod of the same namespace binds 8 GPUs on a node the
    // placement did not pick: the gang's 16 would take team-a to 24.
    for (const NodeSpec& n : h.nodes) {
      if (n.name == picks[0].first || n.name == picks[1].first) continue;
      h.Submit(PodBuilder("solo", "team-a").Gpus(8).OnNode(n.name, 0xff).Build());
      return;
    }
  };
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build(), &reason),
              IsEmpty());
  EXPECT_THAT(reason, HasSubstr("gang g needs 16"));
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 8000);
}

// Nothing is placed under the queue mutex: a gang whose placements the
// cluster keeps changing under is placed again without it (three times),
// then answered with a curable reason and counted; kube-scheduler's retry
// reserves once the cluster settles. With eight nodes, a placement made
// after the third conflict (with the mutex or without) would have found room.
TEST(GangTest, PlacementsThatKeepConflictingAreAnsweredToRetryNeverPlacedUnderTheMutex) {
  Harness h(H100s(8), {}, QueueOptions{});
  Metrics metrics;
  h.metrics = &metrics;
  h.Restart();
  std::set<std::string> taken;
  h.after_unlocked_placement = [&](const auto& picks) {
    // Every placement loses its first node before its commit.
    const std::string node = picks.front().first;
    taken.insert(node);
    h.Submit(PodBuilder("intruder-" + node, "team-z").Gpus(8).OnNode(node, 0xff).Build());
  };
  const PodRequest m0 = PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build();
  std::string reason;
  EXPECT_THAT(h.Filter(m0, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("gang g: the cluster changed under each of its last 3 placements"));
  EXPECT_THAT(reason, HasSubstr("kube-scheduler retries the pod"));
  EXPECT_THAT(taken, SizeIs(3));  // each placement saw the cluster as the last one left it
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 24000);
  EXPECT_EQ(
      metrics.CounterValue("gpusched_gang_reservation_conflicts_total", {{"namespace", "team-a"}}),
      1);
  // The retry, with the cluster quiet: reserved.
  h.after_unlocked_placement = nullptr;
  ASSERT_THAT(h.Filter(m0), SizeIs(1));
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), SizeIs(2));
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 40000);  // no device twice
}

TEST(GangTest, ReservationExpiresAndReleasesDevices) {
  Harness h(H100s(2), {}, QueueOptions{});
  PodRequest m0 = PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build();
  ASSERT_THAT(h.Filter(m0), SizeIs(1));
  h.now_ms += 119'000;
  h.queue->Tick();
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), SizeIs(2));
  h.now_ms += 2'000;
  h.queue->Tick();
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 0);
  EXPECT_THAT(h.Bind(m0, "h0"), HasSubstr("holds no reservation"));
}

TEST(GangTest, GangThatCannotFitWholeReservesNothing) {
  Harness h(H100s(2), {}, QueueOptions{});
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("m0", "team-a").Gpus(8).Gang("g", 3).Build(), &reason),
              IsEmpty());
  EXPECT_THAT(reason, HasSubstr("gang g needs 3 x 8 GPUs at once; only 2 fit now"));
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 0);
}

TEST(GangTest, QuotaIsForTheWholeGang) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 8)}});
  Harness h(H100s(2), {}, o);
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build(), &reason),
              IsEmpty());
  EXPECT_THAT(reason, HasSubstr("gang g needs 16"));
}

// Also: the tick waits for evictions still in the writer's hands before
// each of its holds of the queue mutex (the file source commits them under
// the state's mutex, which the hold's sync would otherwise wait for inside).
TEST(ReclaimTest, NamespaceBelowGuaranteeEvictsLowerPriorityBorrowers) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 16, "r")}});
  Harness h(
      H100s(2),
      {Running("a0", "team-a", 4, "h0", 0x0f, -1), Running("a1", "team-a", 4, "h0", 0xf0, -1),
       Running("a2", "team-a", 4, "h1", 0x0f, -1), Running("a3", "team-a", 4, "h1", 0xf0, -1)},
      o);
  PodRequest b = PodBuilder("b", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
  ASSERT_THAT(h.writer.evicted, SizeIs(1));
  EXPECT_EQ(h.writer.calls,
            (std::vector<std::string>{"await", "evict " + h.writer.evicted[0], "await"}));
  h.writer.calls.clear();
  EXPECT_THAT(h.Filter(b), SizeIs(1));
  EXPECT_EQ(h.queue->Tick(), 0);  // team-a is back at its guarantee
  EXPECT_EQ(h.writer.calls, (std::vector<std::string>{"await"}));  // nothing sent: one wait
}

// A namespace whose last reclaim's victims are still in the cluster (a pod
// terminating through its grace period) plans no new reclaim: the tick's
// sync asks the state once for every reclaim's victims, and the choice
// reads that answer. team-a (guarantee 0) holds all 16 GPUs; team-b's b (8 GPUs, within
// its guarantee of 8) reclaims a0 and a1 on h0. a0 is shown again (still
// terminating): b still has no room, and a2 and a3 on h1 could make it,
// but the next tick evicts nothing more; once a0 is gone, b fits.
TEST(ReclaimTest, NoNewReclaimWhileTheLastVictimsAreStillThere) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(0, 16)}, {"team-b", Quota(8, 16)}});
  o.reclaim.only_lower_priority = false;
  const PodRequest a0 = Running("a0", "team-a", 4, "h0", 0x0f);
  Harness h(H100s(2),
            {a0, Running("a1", "team-a", 4, "h0", 0xf0), Running("a2", "team-a", 4, "h1", 0x0f),
             Running("a3", "team-a", 4, "h1", 0xf0)},
            o);
  PodRequest b = PodBuilder("b", "team-b").Gpus(8).Build();
  EXPECT_THAT(h.Filter(b), IsEmpty());
  h.queue->Tick();
  ASSERT_THAT(h.writer.evicted, ::testing::UnorderedElementsAre(a0.uid, "uid-team-a-a1"));
  h.Submit(a0);  // still terminating on h0
  EXPECT_THAT(h.Filter(b), IsEmpty());
  h.now_ms += 1000;
  h.queue->Tick();
  EXPECT_THAT(h.writer.evicted, SizeIs(2));
  h.state().RemovePod(a0.uid);
  h.state().Commit();
  h.now_ms += 1000;
  h.queue->Tick();
  EXPECT_THAT(h.writer.evicted, SizeIs(2));
  EXPECT_THAT(h.Filter(b), ::testing::ElementsAre("h0"));
}

// The scheduling policy of each of this process's threads (field 41 of
// /proc/self/task/<tid>/stat).
std::vector<int> ThreadPolicies() {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t comm_end = stat.rfind(')');
    if (comm_end == std::string::npos) continue;
    std::istringstream fields(stat.substr(comm_end + 2));  // from field 3 (state)
    std::string field;
    for (int i = 3; i <= 41 && fields >> field; ++i) {
      if (i == 41) out.push_back(std::stoi(field));
    }
  }
  return out;
}

// The reclaim planner runs as SCHED_IDLE: a request's thread that wakes
// takes the core from it at once.
TEST(ReclaimTest, PlannerThreadRunsAtIdlePriority) {
  std::thread t([] {
    LowerToIdlePriority();
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
  });
  t.join();
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);  // only the thread that asked

  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")}});
  Harness h(H100s(1), {}, o);
  auto idle_threads = [] {
    auto p = ThreadPolicies();
    return std::count(p.begin(), p.end(), SCHED_IDLE);
  };
  const auto before = idle_threads();
  {
    ReclaimPlannerThread planner(h.queue.get());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (idle_threads() == before && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(idle_threads(), before + 1);
  }
  EXPECT_EQ(idle_threads(), before);
}

// AwaitSent returns once the batch in flight is sent, and no later than
// asked while the wrapped writer is still busy.
TEST(ReclaimTest, AsyncWriterAwaitSentIsBounded) {
  struct Stuck final : ClusterWriter {
    absl::Status Evict(const PodRequest&, const std::string&) override {
      absl::MutexLock l(&mu);
      mu.Await(absl::Condition(&release));
      return absl::OkStatus();
    }
    absl::Mutex mu;
    bool release = false;
  } stuck;
  AsyncClusterWriter async(&stuck);
  EXPECT_TRUE(async.AwaitSent(std::chrono::milliseconds(0)));  // nothing handed over
  EXPECT_TRUE(async.Evict(PodBuilder("a0", "team-a").Gpus(1).Build(), "test").ok());
  EXPECT_FALSE(async.AwaitSent(std::chrono::milliseconds(20)));
  {
    absl::MutexLock l(&stuck.mu);
    stuck.release = true;
  }
  EXPECT_TRUE(async.AwaitSent(std::chrono::minutes(1)));
}

// Two H100 nodes filled by team-a, which borrows all of team-b's guarantee
// (both 8 guaranteed, 16 limit, cohort r): a 4-GPU pod of team-b reclaims.
QueueOptions BorrowingOptions() {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 16, "r")}});
  return o;
}

std::vector<PodRequest> BorrowedH100s() {
  return {Running("a0", "team-a", 4, "h0", 0x0f, -1), Running("a1", "team-a", 4, "h0", 0xf0, -1),
          Running("a2", "team-a", 4, "h1", 0x0f, -1), Running("a3", "team-a", 4, "h1", 0xf0, -1)};
}

// With a planner attached (serving), the tick hands reclaim planning over
// and commits the plan at the next tick: the same victims as when the tick
// plans itself; a plan made under an older config is dropped, not applied.
TEST(ReclaimTest, BackgroundPlanningCommitsTheSamePlanAtTheNextTick) {
  const QueueOptions o = BorrowingOptions();
  auto running = BorrowedH100s;
  PodRequest b = PodBuilder("b", "team-b").Gpus(4).Build();
  Harness inline_plan(H100s(2), running(), o);
  EXPECT_THAT(inline_plan.Filter(b), IsEmpty());
  ASSERT_EQ(inline_plan.queue->Tick(), 1);

  Harness h(H100s(2), running(), o);
  h.queue->AttachPlanner(true);
  EXPECT_THAT(h.Filter(b), IsEmpty());
  EXPECT_FALSE(h.queue->PlanReclaims(absl::ZeroDuration()));  // nothing handed over yet
  EXPECT_EQ(h.queue->Tick(), 0);                              // handed over, not planned
  EXPECT_EQ(h.queue->Tick(), 0);  // still waiting for the planner: nothing new chosen
  ASSERT_TRUE(h.queue->PlanReclaims(absl::ZeroDuration()));
  EXPECT_THAT(h.writer.evicted, IsEmpty());  // planned, not yet committed
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_EQ(h.writer.evicted, inline_plan.writer.evicted);
  EXPECT_THAT(h.Filter(b), SizeIs(1));

  // A config change between planning and commit drops the plan.
  Harness c(H100s(2), running(), o);
  c.queue->AttachPlanner(true);
  c.Filter(b);
  c.queue->Tick();
  ASSERT_TRUE(c.queue->PlanReclaims(absl::ZeroDuration()));
  c.queue->SetOptions(o);
  EXPECT_EQ(c.queue->Tick(), 0);
  EXPECT_THAT(c.writer.evicted, IsEmpty());
  // Detached, the tick plans itself again.
  c.queue->AttachPlanner(false);
  EXPECT_EQ(c.queue->Tick(), 1);
}

// The commit rule (QueueManager::PlanCurrentLocked): a plan made on an older
// state commits only while the facts it rests on hold. A head passed by a
// pod that goes first drops the plan (its namespace plans again later); a
// change elsewhere (a pod of another namespace submitted) does not.
TEST(ReclaimTest, APlanCommitsOnlyWhileTheFactsItRestsOnHold) {
  const QueueOptions o = BorrowingOptions();
  auto running = BorrowedH100s;
  PodRequest b = PodBuilder("b", "team-b").Gpus(4).Build();
  auto planned = [&](Harness& h) {
    h.queue->AttachPlanner(true);
    EXPECT_THAT(h.Filter(b), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), 0);  // handed over
    EXPECT_TRUE(h.queue->PlanReclaims(absl::ZeroDuration()));
  };
  // What the plan evicts when nothing moves.
  Harness ref(H100s(2), running(), o);
  planned(ref);
  ASSERT_EQ(ref.queue->Tick(), 1);
  ASSERT_EQ(ref.writer.evicted.size(), 1u);
  const std::string victim = ref.writer.evicted[0];

  // A pod of team-b that goes first arrives between planning and commit:
  // the planned head no longer heads its queue, nothing is evicted.
  Harness passed(H100s(2), running(), o);
  planned(passed);
  passed.Submit(PodBuilder("urgent", "team-b").Gpus(4).Priority(1000).Build());
  EXPECT_EQ(passed.queue->Tick(), 0);
  EXPECT_THAT(passed.writer.evicted, IsEmpty());

  // Something else moves (the state's stamp changes), the facts hold:
  // committed as planned.
  Harness moved(H100s(2), running(), o);
  planned(moved);
  moved.Submit(PodBuilder("c", "team-c").Gpus(1).Build());
  EXPECT_EQ(moved.queue->Tick(), 1);
  EXPECT_EQ(moved.writer.evicted, ref.writer.evicted);
}

// Evictions handed to the asynchronous writer all reach the wrapped one, in
// order; the tick that hands them over does not wait for them.
TEST(ReclaimTest, AsyncWriterSendsEveryEvictionInOrder) {
  auto pod = [](const std::string& uid) {
    PodRequest p = PodBuilder(uid, "team-a").Gpus(1).Build();
    p.uid = uid;
    return p;
  };
  struct Recorder final : ClusterWriter {
    absl::Status Evict(const PodRequest& pod, const std::string&) override {
      absl::MutexLock l(&mu);
      uids.push_back(pod.uid);
      return absl::OkStatus();
    }
    absl::Mutex mu;
    std::vector<std::string> uids;
  } recorder;
  {
    AsyncClusterWriter async(&recorder);
    for (const char* uid : {"a0", "a1", "a2", "a3"})
      EXPECT_TRUE(async.Evict(pod(uid), "test").ok());
    async.Drain();
    absl::MutexLock l(&recorder.mu);
    EXPECT_EQ(recorder.uids, (std::vector<std::string>{"a0", "a1", "a2", "a3"}));
  }
  // Destruction sends what is still queued.
  {
    AsyncClusterWriter async(&recorder);
    EXPECT_TRUE(async.Evict(pod("a0"), "again").ok());
  }
  absl::MutexLock l(&recorder.mu);
  EXPECT_EQ(recorder.uids.size(), 5u);
}

// Evictions handed over while the writer is busy go to the wrapped writer
// together, in order (one commit for a writer that applies them itself).
TEST(ReclaimTest, AsyncWriterHandsOverWhatQueuedMeanwhileAsOneBatch) {
  struct Recorder final : ClusterWriter {
    absl::Status Evict(const PodRequest&, const std::string&) override {
      return absl::InternalError("EvictAll expected");
    }
    void EvictAll(const std::vector<std::pair<PodRequest, std::string>>& pods) override {
      absl::MutexLock l(&mu);
      std::vector<std::string> uids;
      for (const auto& [pod, reason] : pods) uids.push_back(pod.uid);
      batches.push_back(uids);
      mu.Await(absl::Condition(&release));  // busy until the test says so
    }
    absl::Mutex mu;
    bool release = false;
    std::vector<std::vector<std::string>> batches;
  } recorder;
  auto pod = [](const std::string& uid) {
    PodRequest p = PodBuilder(uid, "team-a").Gpus(1).Build();
    p.uid = uid;
    return p;
  };
  AsyncClusterWriter async(&recorder);
  EXPECT_TRUE(async.Evict(pod("a0"), "first").ok());
  {
    absl::MutexLock l(&recorder.mu);
    auto started = [&] { return !recorder.batches.empty(); };
    recorder.mu.Await(absl::Condition(&started));
  }
  for (const char* uid : {"a1", "a2", "a3"}) EXPECT_TRUE(async.Evict(pod(uid), "more").ok());
  {
    absl::MutexLock l(&recorder.mu);
    recorder.release = true;
  }
  async.Drain();
  absl::MutexLock l(&recorder.mu);
  EXPECT_EQ(recorder.batches, (std::vector<std::vector<std::string>>{{"a0"}, {"a1", "a2", "a3"}}));
}

// The GPUs reclaim frees for a namespace below its guarantee are held for
// it: another borrower may not take them first (its idle guarantee is
// claimed, not lendable), until the pod they are for binds or goes away.
TEST(ReclaimTest, FreedGpusAreNotLentToAnotherBorrowerFirst) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")},
                     {"team-b", Quota(8, 16, "r")},
                     {"team-c", Quota(0, 16, "r")}});
  Harness h(H100s(2),
            {Running("a0", "team-a", 8, "h0", 0xff), Running("c0", "team-c", 4, "h1", 0x0f, -1),
             Running("c1", "team-c", 4, "h1", 0xf0, -1)},
            o);
  PodRequest b = PodBuilder("b", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);  // one of team-c's borrowers goes
  PodRequest c2 = PodBuilder("c2", "team-c").Gpus(4).Priority(5).Build();
  std::string reason;
  EXPECT_THAT(h.Filter(c2, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("0 idle GPUs it may borrow, 4 more held for pods of namespaces "
                                "below their guarantee"));
  EXPECT_THAT(h.Filter(b), ElementsAre("h1"));
  // The pod the claim was for is deleted: the guarantee is lendable again.
  h.state().RemovePod(b.uid);
  h.state().Commit();
  EXPECT_THAT(h.Filter(c2, &reason), ElementsAre("h1")) << reason;
}

// Reclaim takes only what a namespace borrows: a victim whose eviction would
// leave its namespace below its guarantee would come straight back within it
// and take the GPUs again.
TEST(ReclaimTest, NeverTakesAVictimsNamespaceBelowItsGuarantee) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(12, 24, "r")}, {"team-b", Quota(8, 8, "r")}});
  Harness h(
      H100s(2),
      {Running("a0", "team-a", 8, "h0", 0xff, -1), Running("a1", "team-a", 8, "h1", 0xff, -1)}, o);
  EXPECT_THAT(h.Filter(PodBuilder("b", "team-b").Gpus(8).Build()), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 0);  // team-a borrows 4: no 8-GPU pod of it is reclaimable
  o.quotas.namespaces["team-a"].gpus.guaranteed = 8;
  h.queue->SetOptions(o);
  EXPECT_EQ(h.queue->Tick(), 1);
}

// team-a (priority -1) borrows all of team-b's guarantee on two 8-GPU
// nodes; team-c has its own 8 GPUs in no cohort.
QueueOptions ThreeTeams() {
  QueueOptions o;
  o.quotas = Quotas(
      {{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 16, "r")}, {"team-c", Quota(8, 8)}});
  return o;
}
std::vector<PodRequest> TeamABorrowsTwoNodes() {
  return {Running("a0", "team-a", 4, "h0", 0x0f, -1), Running("a1", "team-a", 4, "h0", 0xf0, -1),
          Running("a2", "team-a", 4, "h1", 0x0f, -1), Running("a3", "team-a", 4, "h1", 0xf0, -1)};
}

// The node reclaim freed GPUs on is held for the pod they were freed for:
// a pod of no higher priority of another namespace, even within its own
// guarantee, does not pass filter there before it binds.
TEST(ReclaimTest, FreedNodeIsHeldForThePodItWasFreedFor) {
  const QueueOptions o = ThreeTeams();
  Harness h(H100s(2), TeamABorrowsTwoNodes(), o);
  PodRequest b = PodBuilder("b", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
  PodRequest c = PodBuilder("c", "team-c").Gpus(4).Build();
  std::string reason;
  EXPECT_THAT(h.Filter(c, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("by reclaim are held for team-b/b until it binds"));
  // A request that claims a higher priority for c does not lift the hold:
  // the source's pod decides.
  PodRequest claimed = c;
  claimed.priority = 10;
  EXPECT_THAT(h.FilterOnly(claimed, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("by reclaim are held for team-b/b until it binds"));
  auto nodes = h.Filter(b);
  ASSERT_THAT(nodes, SizeIs(1));
  // A pod of higher priority is not held back.
  EXPECT_THAT(h.Filter(PodBuilder("urgent", "team-c").Gpus(4).Priority(10).Build()), SizeIs(1));
  EXPECT_EQ(h.Bind(b, nodes[0]), "");
}

// A hold lasts stale_after_ms at most: the same filter that was held back
// passes once that much time has gone by with the pod it was for still
// waiting (what filters read is cached; time alone must end the hold).
TEST(ReclaimTest, FreedNodeHoldEndsWhenTheReclaimGoesStale) {
  const QueueOptions o = ThreeTeams();
  Harness h(H100s(2), TeamABorrowsTwoNodes(), o);
  PodRequest b = PodBuilder("b", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b), IsEmpty());
  ASSERT_EQ(h.queue->Tick(), 1);
  PodRequest c = PodBuilder("c", "team-c").Gpus(4).Build();
  std::string reason;
  EXPECT_THAT(h.Filter(c, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("by reclaim are held for team-b/b until it binds"));
  // FilterOnly: no pod changes between these calls, only the clock.
  h.now_ms += o.stale_after_ms - 1;  // still current
  EXPECT_THAT(h.FilterOnly(c, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("held for team-b/b"));
  h.now_ms += 1;  // stale now: nothing held, nothing claimed
  EXPECT_THAT(h.FilterOnly(c), SizeIs(1));
}

// The hold is per node, not per GPU product: a node of the same product
// that reclaim did not free stays open to everyone (filter asks the gate's
// per-model answer once per product, so a hold answered there would have
// closed every H100 node, or none, depending on node order).
TEST(ReclaimTest, HoldIsPerNodeNotPerProduct) {
  QueueOptions o;
  o.quotas = Quotas(
      {{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 16, "r")}, {"team-c", Quota(8, 8)}});
  // team-a borrows team-b's guarantee on h0 and h1; h2 has 4 GPUs free.
  Harness h(H100s(3),
            {Running("a0", "team-a", 4, "h0", 0x0f, -1), Running("a1", "team-a", 4, "h0", 0xf0, -1),
             Running("a2", "team-a", 4, "h1", 0x0f, -1), Running("a3", "team-a", 4, "h1", 0xf0, -1),
             Running("c0", "team-c", 4, "h2", 0x0f, -1)},
            o);
  PodRequest b = PodBuilder("b", "team-b").Gpus(8).Build();
  EXPECT_THAT(h.Filter(b), IsEmpty());  // no node has 8 free GPUs
  ASSERT_EQ(h.queue->Tick(), 2);        // one node of team-a's freed for b
  const std::vector<std::string> freed = h.Filter(b);
  ASSERT_THAT(freed, ElementsAre(AnyOf("h0", "h1")));
  // c fits on the freed node and on h2; only the freed node is held.
  PodRequest c = PodBuilder("c", "team-c").Gpus(4).Build();
  std::string reason;
  EXPECT_THAT(h.Filter(c, &reason), ElementsAre("h2")) << reason;
  EXPECT_EQ(h.Bind(c, "h2"), "");
  EXPECT_EQ(h.Bind(b, freed[0]), "");
}

TEST(ReclaimTest, LowerPriorityPolicyKeepsEqualPriorityBorrowers) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 16, "r")}});
  Harness h(H100s(2),
            {Running("a0", "team-a", 8, "h0", 0xff), Running("a1", "team-a", 8, "h1", 0xff)}, o);
  h.Filter(PodBuilder("b", "team-b").Gpus(4).Build());
  EXPECT_EQ(h.queue->Tick(), 0);
  o.reclaim.only_lower_priority = false;
  h.queue->SetOptions(o);
  EXPECT_EQ(h.queue->Tick(), 1);
}

TEST(HotReloadTest, LoweringALimitBlocksNewPodsAndEvictsOnlyWhenAsked) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 8, "r")}});
  Harness h(H100s(3),
            {Running("a0", "team-a", 4, "h0", 0x0f), Running("a1", "team-a", 4, "h0", 0xf0),
             Running("a2", "team-a", 4, "h1", 0x0f)},
            o);
  o.quotas.namespaces["team-a"].gpus = {4, 8};
  h.queue->SetOptions(o);
  EXPECT_EQ(h.queue->Tick(), 0);
  EXPECT_THAT(h.Filter(PodBuilder("new", "team-a").Gpus(1).Build()), IsEmpty());
  o.reclaim.evict_over_limit = true;
  h.queue->SetOptions(o);
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_EQ(h.queue->Tick(), 0);
}

// A gang whose size annotation is invalid is refused with that reason,
// never admitted, and does not hold back its namespace's later pods (it
// used to wait "for an object not read yet" at the head of the queue).
TEST(GangTest, InvalidGangSizeNamesTheAnnotationAndBlocksNoOne) {
  Harness h(H100s(2), {}, ResearchCohort());
  PodRequest bad = PodBuilder("bad-0", "team-b").Gpus(8).Created(100).Build();
  bad.gang = "kueue/grp";
  bad.gang_size = kGangSizeUnknown;
  bad.gang_size_reason =
      "annotation kueue.x-k8s.io/pod-group-total-count: 'abc' is not a member count (1..100000)";
  std::string reason;
  EXPECT_THAT(h.Filter(bad, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("gang kueue/grp: annotation "
                                "kueue.x-k8s.io/pod-group-total-count: 'abc' is not a member"));
  // team-b may hold 8 GPUs: the later 8-GPU pod is not behind the bad one.
  PodRequest later = PodBuilder("later", "team-b").Gpus(8).Created(200).Build();
  EXPECT_THAT(h.Filter(later, &reason), SizeIs(2)) << reason;
  auto explained = h.queue->ExplainPod("team-b", "bad-0");
  ASSERT_TRUE(explained.has_value());
  EXPECT_EQ(explained->reason, bad.UnknownGangSizeReason());
  EXPECT_THAT(explained->reason, ::testing::Not(HasSubstr("admissible")));
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
}

// A member of a gang of unknown size gets no preemption: it could not take
// the GPUs freed for it. The same pod alone would.
TEST(GangTest, UnknownGangSizeGetsNoPreemption) {
  Harness h(H100s(1), {Running("low", "team-a", 8, "h0", 0xff)}, ResearchCohort());
  PodRequest bad = PodBuilder("bad-0", "team-b").Gpus(8).Priority(10).Build();
  bad.gang = "lws/k";
  bad.gang_size = kGangSizeUnknown;
  bad.gang_size_reason =
      "annotation leaderworkerset.sigs.k8s.io/size: '99999999999' is not a "
      "member count (1..100000)";
  EXPECT_THAT(h.Filter(bad), IsEmpty());
  PreemptionArgs args;
  args.pod = bad;
  args.candidates.push_back({"h0", {"uid-team-a-low"}, 0});
  EXPECT_THAT(h.service->Preempt(args).nodes, IsEmpty());
  PodRequest alone = PodBuilder("alone", "team-b").Gpus(8).Priority(10).Build();
  EXPECT_THAT(h.Filter(alone), IsEmpty());
  args.pod = alone;
  EXPECT_THAT(h.service->Preempt(args).nodes, SizeIs(1));
}

TEST(ExplainTest, ReportsQueueAndWhyAPodWaits) {
  Harness h(H100s(4),
            {Running("a0", "team-a", 8, "h0", 0xff), Running("a1", "team-a", 8, "h1", 0xff),
             Running("b0", "team-b", 8, "h2", 0xff), Running("x0", "other", 8, "h3", 0xff)},
            ResearchCohort());
  PodRequest p = PodBuilder("p", "team-a").Gpus(4).Priority(5).Build();
  h.Filter(p);
  QueueReport r = h.queue->Report();
  ASSERT_THAT(r.namespaces, SizeIs(3));  // other, team-a, team-b
  EXPECT_EQ(r.namespaces[1].ns, "team-a");
  EXPECT_EQ(r.namespaces[1].usage_milli, 16000);
  ASSERT_THAT(r.namespaces[1].queue, SizeIs(1));
  EXPECT_THAT(r.namespaces[1].queue[0].reason, HasSubstr("at quota"));
  auto pod = h.queue->ExplainPod("team-a", "p");
  ASSERT_TRUE(pod.has_value());
  EXPECT_EQ(pod->state, "pending");
  EXPECT_EQ(pod->position, 1);
  EXPECT_FALSE(h.queue->ExplainPod("team-a", "nope").has_value());
}

}  // namespace
}  // namespace gpusched::queue

namespace gpusched::queue {
namespace {

// Each pod's wait (first sight to bind) is observed into a Prometheus
// histogram per namespace.
TEST(QueueMetricsTest, WaitIsAHistogramObservedAtBind) {
  QueueOptions o;
  o.quotas = testing::Quotas({{"team-a", testing::Quota(8, 8)}});
  testing::Harness h({gpusched::testing::Hgx8H100("h0")}, {}, o);
  PodRequest p = gpusched::testing::PodBuilder("p", "team-a").Gpus(4).Build();
  ASSERT_EQ(h.Filter(p).size(), 1u);
  h.now_ms += 7'000;
  ASSERT_EQ(h.Bind(p, "h0"), "");
  Metrics metrics;
  metrics.AddCollector([&h](GaugeWriter& w) { h.queue->CollectMetrics(w); });
  const std::string text = metrics.Render();
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE gpusched_queue_wait_seconds histogram\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "gpusched_queue_wait_seconds_bucket{namespace=\"team-a\",le=\"5\"} 0\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "gpusched_queue_wait_seconds_bucket{namespace=\"team-a\",le=\"10\"} 1\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr(
                  "gpusched_queue_wait_seconds_bucket{namespace=\"team-a\",le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("gpusched_queue_wait_seconds_sum{namespace=\"team-a\"} 7\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("gpusched_queue_wait_seconds_count{namespace=\"team-a\"} 1\n"));
}

// An elastic gang (minMember 2, three pods) starts when two members can:
// the third waits while both reserved device sets are claimed, then runs on
// its own once the gang holds its minimum.
TEST(GangTest, ElasticGangStartsAtMinMemberAndTheRestRunAlone) {
  Harness h(H100s(2), {}, ResearchCohort());
  auto member = [](int i) {
    return PodBuilder("w" + std::to_string(i), "team-a").Gpus(4).Gang("g", 2).Build();
  };
  for (int i = 0; i < 3; ++i) h.Submit(member(i));
  auto n0 = h.Filter(member(0));
  ASSERT_THAT(n0, SizeIs(1));
  auto n1 = h.Filter(member(1));
  ASSERT_THAT(n1, SizeIs(1));
  std::string reason;
  EXPECT_THAT(h.Filter(member(2), &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("claimed by other members"));
  EXPECT_EQ(h.Bind(member(0), n0[0]), "");
  EXPECT_EQ(h.Bind(member(1), n1[0]), "");
  auto n2 = h.Filter(member(2), &reason);
  ASSERT_FALSE(n2.empty()) << reason;
  EXPECT_EQ(h.Bind(member(2), n2[0]), "");
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 12000);
}

// A framework gang whose size its owning object declares waits until that
// object is read: never admitted alone, with a reason naming the object.
TEST(GangTest, GangOfUnknownSizeWaitsForItsSize) {
  Harness h(H100s(2), {}, ResearchCohort());
  PodRequest p = PodBuilder("worker-0", "team-a").Gpus(8).Build();
  p.gang = "pg/train";
  p.gang_size = kGangSizeUnknown;
  p.gang_owner = {GangOwnerKind::kPodGroup, "train"};
  std::string reason;
  EXPECT_THAT(h.Filter(p, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("size is not known yet (declared by train)"));
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  p.gang_size = 1;  // the object is read: a gang of one runs at once
  EXPECT_THAT(h.Filter(p), SizeIs(2));
}

}  // namespace
}  // namespace gpusched::queue
