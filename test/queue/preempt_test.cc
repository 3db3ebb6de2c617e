// The preempt verb through ExtenderService with the queue manager as gate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Devices;
using ::gpusched::testing::Dgx1V100;
using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::PodBuilder;
using ::testing::ElementsAre;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;
using ::testing::SizeIs;

PodRequest Running(const std::string& name, const std::string& ns, int gpus,
                   const std::string& node, DeviceMask ids, int32_t priority, int64_t start = 0,
                   const std::string& gang = "") {
  PodRequest p = PodBuilder(name, ns).Gpus(gpus).OnNode(node, ids).Priority(priority).Build();
  p.start_unix = start;
  if (!gang.empty()) {
    p.gang = gang;
    p.gang_size = 2;
  }
  return p;
}

PreemptionArgs Args(const PodRequest& pod,
                    std::vector<std::pair<std::string, std::vector<std::string>>> cands) {
  PreemptionArgs a;
  a.pod = pod;
  for (auto& [node, victims] : cands) a.candidates.push_back({node, victims, 0});
  return a;
}

TEST(PreemptTest, KeepsFewestLowerPriorityVictimsMostRecentFirst) {
  Harness h(
      {Hgx8H100("h0")},
      {Running("old", "t", 4, "h0", 0x0f, 1, 100), Running("new", "t", 4, "h0", 0xf0, 1, 200)},
      QueueOptions{});
  PodRequest p = PodBuilder("p", "t").Gpus(4).Priority(100).Build();
  PreemptionOutcome out = h.service->Preempt(Args(p, {{"h0", {"uid-t-old", "uid-t-new"}}}));
  ASSERT_THAT(out.nodes, SizeIs(1));
  EXPECT_THAT(out.nodes[0].victim_uids, ElementsAre("uid-t-new"));
}

// Evicting for a pod its queue still holds back frees GPUs it may not take:
// the preempt verb answers nothing for a pod behind an earlier one that can
// use the same nodes, and does preempt for that earlier one.
TEST(PreemptTest, NothingForAPodWaitingBehindAnEarlierOne) {
  QueueOptions o;
  o.quotas = Quotas({{"t", Quota(16, 16)}, {"u", Quota(8, 8)}});
  Harness h({Hgx8H100("h0")}, {Running("low", "u", 8, "h0", 0xff, 1)}, o);
  PodRequest first = PodBuilder("first", "t").Gpus(8).Priority(200).Build();
  PodRequest later = PodBuilder("later", "t").Gpus(8).Priority(100).Build();
  EXPECT_THAT(h.Filter(first), IsEmpty());
  EXPECT_THAT(h.Filter(later), IsEmpty());
  EXPECT_THAT(h.service->Preempt(Args(later, {{"h0", {"uid-u-low"}}})).nodes, IsEmpty());
  PreemptionOutcome out = h.service->Preempt(Args(first, {{"h0", {"uid-u-low"}}}));
  ASSERT_THAT(out.nodes, SizeIs(1));
  EXPECT_THAT(out.nodes[0].victim_uids, ElementsAre("uid-u-low"));
}

// A gang's admission needs quota for all its members: victims on one node
// that free quota for one member only are not worth evicting.
TEST(PreemptTest, GangPreemptsOnlyWhenTheVictimsFreeQuotaForTheWholeGang) {
  QueueOptions o;
  o.quotas = Quotas({{"t", Quota(8, 8)}});
  Harness h({Hgx8H100("h0"), Hgx8H100("h1")},
            {Running("l0", "t", 4, "h0", 0x0f, 1), Running("l1", "t", 4, "h1", 0x0f, 1)}, o);
  PodRequest m0 = PodBuilder("m0", "t").Gpus(4).Priority(100).Gang("g", 2).Build();
  std::string reason;
  EXPECT_THAT(h.Filter(m0, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("gang g needs 8"));
  // One node's victim leaves 4 of the 8 GPUs of quota the gang needs.
  EXPECT_THAT(h.service->Preempt(Args(m0, {{"h0", {"uid-t-l0"}}, {"h1", {"uid-t-l1"}}})).nodes,
              IsEmpty());
  // Without the other member the pod alone would have been enough.
  PodRequest solo = PodBuilder("solo", "t").Gpus(4).Priority(100).Build();
  EXPECT_THAT(h.service->Preempt(Args(solo, {{"h0", {"uid-t-l0"}}})).nodes, SizeIs(1));
}

// For a gang member the victims must be a step towards the whole gang: with
// them gone, and every lower-priority pod elsewhere (the other members'
// preemptions), all members must fit; a gang that can never start preempts
// nobody.
TEST(PreemptTest, GangMemberPreemptsOnlyWhenTheWholeGangCanStart) {
  QueueOptions o;
  o.quotas = Quotas({{"t", Quota(24, 24)}, {"u", Quota(16, 16)}});
  PodRequest m0 = PodBuilder("m0", "t").Gpus(8).Priority(100).Gang("g", 2).Build();
  Harness blocked({Hgx8H100("h0"), Hgx8H100("h1")},
                  {Running("l0", "u", 8, "h0", 0xff, 1), Running("top", "u", 8, "h1", 0xff, 1000)},
                  o);
  EXPECT_THAT(blocked.Filter(m0), IsEmpty());
  EXPECT_THAT(blocked.service->Preempt(Args(m0, {{"h0", {"uid-u-l0"}}})).nodes, IsEmpty());

  Harness stepwise({Hgx8H100("h0"), Hgx8H100("h1")},
                   {Running("l0", "u", 8, "h0", 0xff, 1), Running("l1", "u", 8, "h1", 0xff, 1)}, o);
  EXPECT_THAT(stepwise.Filter(m0), IsEmpty());
  PreemptionOutcome out = stepwise.service->Preempt(Args(m0, {{"h0", {"uid-u-l0"}}}));
  ASSERT_THAT(out.nodes, SizeIs(1));
  EXPECT_THAT(out.nodes[0].victim_uids, ElementsAre("uid-u-l0"));
}

TEST(PreemptTest, NeverEvictsEqualOrHigherPriority) {
  Harness h({Hgx8H100("h0")}, {Running("same", "t", 8, "h0", 0xff, 100)}, QueueOptions{});
  PodRequest p = PodBuilder("p", "t").Gpus(4).Priority(100).Build();
  EXPECT_THAT(h.service->Preempt(Args(p, {{"h0", {"uid-t-same"}}})).nodes, IsEmpty());
}

TEST(PreemptTest, PreemptionPolicyNeverReturnsEmptyMap) {
  Harness h({Hgx8H100("h0")}, {Running("low", "t", 8, "h0", 0xff, 1)}, QueueOptions{});
  PodRequest p = PodBuilder("p", "t").Gpus(4).Priority(100).Build();
  p.preempt_never = true;
  EXPECT_THAT(h.service->Preempt(Args(p, {{"h0", {"uid-t-low"}}})).nodes, IsEmpty());
}

TEST(PreemptTest, DropsNodeWhereFreedDevicesAreNotAnNvlinkSet) {
  // DGX-1 V100: GPUs 0 and 5 are not NVLink-connected.
  Harness h({Dgx1V100("v0")},
            {Running("x", "t", 2, "v0", Devices({0, 5}), 1),
             Running("y", "t", 6, "v0", Devices({1, 2, 3, 4, 6, 7}), 1000)},
            QueueOptions{});
  PodRequest p =
      PodBuilder("p", "t").Gpus(2).Priority(100).Topology(TopologyMode::kNvlinkRequired).Build();
  EXPECT_THAT(h.service->Preempt(Args(p, {{"v0", {"uid-t-x"}}})).nodes, IsEmpty());
  PodRequest any = PodBuilder("any", "t").Gpus(2).Priority(100).Build();
  EXPECT_THAT(h.service->Preempt(Args(any, {{"v0", {"uid-t-x"}}})).nodes, SizeIs(1));
}

TEST(PreemptTest, EmptyVictimPlaceholderPassesOnlyWhereThePodFits) {
  Harness h({Hgx8H100("free"), Hgx8H100("full")}, {Running("low", "t", 8, "full", 0xff, 1)},
            QueueOptions{});
  PodRequest p = PodBuilder("p", "t").Gpus(4).Priority(100).Build();
  PreemptionOutcome out = h.service->Preempt(Args(p, {{"free", {}}, {"full", {}}}));
  ASSERT_THAT(out.nodes, SizeIs(1));
  EXPECT_EQ(out.nodes[0].node, "free");
  EXPECT_THAT(out.nodes[0].victim_uids, IsEmpty());
}

TEST(PreemptTest, BorrowerNeverEvictsAnotherNamespaceWithinItsGuarantee) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 8, "r")}});
  Harness h({Hgx8H100("h0"), Hgx8H100("h1")},
            {Running("a0", "team-a", 8, "h0", 0xff, 1), Running("b0", "team-b", 8, "h1", 0xff, 1)},
            o);
  PodRequest p = PodBuilder("p", "team-a").Gpus(4).Priority(100).Build();
  PreemptionOutcome out =
      h.service->Preempt(Args(p, {{"h0", {"uid-team-a-a0"}}, {"h1", {"uid-team-b-b0"}}}));
  ASSERT_THAT(out.nodes, SizeIs(1));
  EXPECT_EQ(out.nodes[0].node, "h0");  // its own lower-priority pod frees its own quota
}

TEST(PreemptTest, GangsGoWholeOrNotAtAll) {
  Harness h(
      {Hgx8H100("h0"), Hgx8H100("h1")},
      {Running("g0", "t", 4, "h0", 0x0f, 1, 0, "local"),
       Running("g1", "t", 4, "h0", 0xf0, 1, 0, "local"),
       Running("s0", "t", 4, "h1", 0x0f, 1, 0, "spread"), Running("x", "t", 4, "h1", 0xf0, 5)},
      QueueOptions{});
  PodRequest p = PodBuilder("p", "t").Gpus(2).Priority(100).Build();
  auto out = h.service->Preempt(Args(p, {{"h0", {"uid-t-g0"}}, {"h1", {"uid-t-s0"}}}));
  // h0: the whole local gang (both members); h1: the spread gang has a member
  // elsewhere? No: its only member is here but gang-size 2 with one running,
  // so it is whole on h1 as well.
  ASSERT_THAT(out.nodes, SizeIs(2));
  EXPECT_THAT(out.nodes[0].victim_uids, SizeIs(2));
  EXPECT_THAT(out.nodes[1].victim_uids, ElementsAre("uid-t-s0"));
}

// A lower-priority gang spanning nodes is a victim only whole: the answer
// names its member on the node answered for (kube-scheduler evicts that one)
// and gpusched evicts the other once that one is going.
// Gang "wide" of namespace t: one 8-GPU member on each of h0 and h1,
// priority 1.
std::vector<PodRequest> WideGang() {
  return {Running("g0", "t", 8, "h0", 0xff, 1, 0, "wide"),
          Running("g1", "t", 8, "h1", 0xff, 1, 0, "wide")};
}

TEST(PreemptTest, GangSpanningNodesGoesWhole) {
  Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, WideGang(), QueueOptions{});
  PodRequest p = PodBuilder("p", "t").Gpus(2).Priority(100).Build();
  h.Submit(p);
  PreemptionOutcome out = h.service->Preempt(Args(p, {{"h0", {"uid-t-g0"}}}));
  ASSERT_THAT(out.nodes, SizeIs(1));
  EXPECT_THAT(out.nodes[0].victim_uids, ElementsAre("uid-t-g0"));
  EXPECT_EQ(h.queue->Tick(), 0);  // kube-scheduler has not evicted g0 yet
  PodRequest going = *h.state().FindPod("uid-t-g0");
  going.deleting = true;  // kube-scheduler's eviction: graceful deletion
  h.state().UpsertPod(going);
  h.state().Commit();
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_THAT(h.writer.evicted, ElementsAre("uid-t-g1"));
}

// One answer names the gang's member on each of two nodes; kube-scheduler
// evicts on the first node answered for: the member on the other node goes
// too (found by the randomised differential test: the second node's offer
// replaced the first's, and the gang kept running half).
TEST(PreemptTest, GangOfferedOnTwoNodesGoesWholeWhicheverNodeIsChosen) {
  for (const std::string chosen : {"h0", "h1"}) {
    SCOPED_TRACE(chosen);
    Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, WideGang(), QueueOptions{});
    PodRequest p = PodBuilder("p", "t").Gpus(2).Priority(100).Build();
    h.Submit(p);
    PreemptionOutcome out =
        h.service->Preempt(Args(p, {{"h0", {"uid-t-g0"}}, {"h1", {"uid-t-g1"}}}));
    ASSERT_THAT(out.nodes, SizeIs(2));
    const std::string victim = chosen == "h0" ? "uid-t-g0" : "uid-t-g1";
    const std::string other = chosen == "h0" ? "uid-t-g1" : "uid-t-g0";
    h.state().RemovePod(victim);  // kube-scheduler evicted it
    h.state().Commit();
    EXPECT_EQ(h.queue->Tick(), 1);
    EXPECT_THAT(h.writer.evicted, ElementsAre(other));
  }
}

// kube-scheduler chose another node: the gang whose member was offered is
// left alone, and the offer is forgotten after gang_followup_ms.
TEST(PreemptTest, OfferedGangNotEvictedIsLeftAlone) {
  Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, WideGang(), QueueOptions{});
  PodRequest p = PodBuilder("p", "t").Gpus(2).Priority(100).Build();
  h.Submit(p);
  ASSERT_THAT(h.service->Preempt(Args(p, {{"h0", {"uid-t-g0"}}})).nodes, SizeIs(1));
  h.now_ms += 61'000;
  EXPECT_EQ(h.queue->Tick(), 0);
  h.state().RemovePod("uid-t-g0");  // later, the gang's member finishes
  h.state().Commit();
  EXPECT_EQ(h.queue->Tick(), 0);
  EXPECT_THAT(h.writer.evicted, IsEmpty());
}

}  // namespace
}  // namespace gpusched::queue
