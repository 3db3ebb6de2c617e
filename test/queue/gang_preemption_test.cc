// Whole-gang preemption and reclaim: a gang preempts as one plan across
// nodes, each member's preempt call answers from it, victim gangs go whole,
// and a namespace below its guarantee reclaims for a gang at its head.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <random>
#include <set>

#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::PodBuilder;
using ::testing::ElementsAre;
using testing::H100s;
using testing::Harness;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

PodRequest Running(const std::string& name, const std::string& ns, const std::string& node,
                   int32_t priority, const std::string& gang = "", int32_t gang_size = 0) {
  PodRequest p = PodBuilder(name, ns).Gpus(8).OnNode(node, 0xff).Priority(priority).Build();
  p.gang = gang;
  p.gang_size = gang_size;
  return p;
}

// kube-scheduler's candidates: every node, with its pods of lower priority.
PreemptionArgs AllNodes(Harness& h, const PodRequest& pod) {
  PreemptionArgs a;
  a.pod = pod;
  for (const auto& node : h.state().Snapshot()->nodes()) {
    PreemptionArgs::Candidate c{node->name, {}, 0};
    for (const PodOnNode& p : node->pods) {
      if (p.priority < pod.priority) c.victim_uids.push_back(p.uid);
    }
    if (!c.victim_uids.empty()) a.candidates.push_back(std::move(c));
  }
  return a;
}

// kube-scheduler evicts the victims of the node it picks.
void EvictAnswer(Harness& h, const PreemptionOutcome::NodeVictims& nv) {
  for (const std::string& uid : nv.victim_uids) h.state().RemovePod(uid);
  h.state().Commit();
}

// Two members, three nodes each full with a lower-priority pod: the plan
// takes the two lowest-priority victims; each member is answered for its
// own node, the same node every time it asks.
TEST(GangPreemptionTest, MembersAreAnsweredFromOnePlan) {
  Harness h(H100s(3),
            {Running("l0", "u", "h0", 5), Running("l1", "u", "h1", 1), Running("l2", "u", "h2", 3)},
            QueueOptions{});
  PodRequest m0 = PodBuilder("m0", "t").Gpus(8).Priority(100).Gang("g", 2).Build();
  PodRequest m1 = PodBuilder("m1", "t").Gpus(8).Priority(100).Gang("g", 2).Build();
  EXPECT_THAT(h.Filter(m0), IsEmpty());
  EXPECT_THAT(h.Filter(m1), IsEmpty());
  PreemptionOutcome a0 = h.service->Preempt(AllNodes(h, m0));
  PreemptionOutcome a1 = h.service->Preempt(AllNodes(h, m1));
  ASSERT_THAT(a0.nodes, SizeIs(1));
  ASSERT_THAT(a1.nodes, SizeIs(1));
  EXPECT_NE(a0.nodes[0].node, a1.nodes[0].node);
  std::set<std::string> victims = {a0.nodes[0].victim_uids[0], a1.nodes[0].victim_uids[0]};
  EXPECT_THAT(victims, UnorderedElementsAre("uid-u-l1", "uid-u-l2"));
  PreemptionOutcome again = h.service->Preempt(AllNodes(h, m0));
  ASSERT_THAT(again.nodes, SizeIs(1));
  EXPECT_EQ(again.nodes[0].node, a0.nodes[0].node);
  // Its victims gone, m0 has nothing more to preempt; m1 is still answered.
  EvictAnswer(h, a0.nodes[0]);
  EXPECT_THAT(h.service->Preempt(AllNodes(h, m0)).nodes, IsEmpty());
  ASSERT_THAT(h.service->Preempt(AllNodes(h, m1)).nodes, SizeIs(1));
  EvictAnswer(h, a1.nodes[0]);
  // Both victims gone: the gang reserves and both members pass filter.
  EXPECT_THAT(h.Filter(m0), SizeIs(1));
  EXPECT_THAT(h.Filter(m1), SizeIs(1));
}

// A member whose planned node is not among its candidates takes another
// free step that is; with none, it gets no answer rather than a node off
// the plan.
TEST(GangPreemptionTest, AnswersOnlyNodesOfThePlan) {
  Harness h(
      H100s(3),
      {Running("l0", "u", "h0", 1), Running("l1", "u", "h1", 1), Running("top", "u", "h2", 500)},
      QueueOptions{});
  PodRequest m0 = PodBuilder("m0", "t").Gpus(8).Priority(100).Gang("g", 2).Build();
  h.Submit(m0);
  h.Submit(PodBuilder("m1", "t").Gpus(8).Priority(100).Gang("g", 2).Build());
  PreemptionArgs only_h2 = AllNodes(h, m0);
  only_h2.candidates = {{"h2", {"uid-u-top"}, 0}};
  EXPECT_THAT(h.service->Preempt(only_h2).nodes, IsEmpty());
  PreemptionArgs only_h1 = AllNodes(h, m0);
  only_h1.candidates = {{"h1", {"uid-u-l1"}, 0}};
  PreemptionOutcome out = h.service->Preempt(only_h1);
  ASSERT_THAT(out.nodes, SizeIs(1));
  EXPECT_THAT(out.nodes[0].victim_uids, ElementsAre("uid-u-l1"));
}

// A high-priority gang displaces a lower-priority gang spanning nodes: the
// victim gang goes whole, no member of it keeps running.
TEST(GangPreemptionTest, GangDisplacesAGangSpanningNodes) {
  Harness h(H100s(2),
            {Running("w0", "u", "h0", 1, "wide", 2), Running("w1", "u", "h1", 1, "wide", 2)},
            QueueOptions{});
  PodRequest m0 = PodBuilder("m0", "t").Gpus(8).Priority(100).Gang("g", 2).Build();
  PodRequest m1 = PodBuilder("m1", "t").Gpus(8).Priority(100).Gang("g", 2).Build();
  h.Submit(m0);
  h.Submit(m1);
  PreemptionOutcome a0 = h.service->Preempt(AllNodes(h, m0));
  ASSERT_THAT(a0.nodes, SizeIs(1));
  EvictAnswer(h, a0.nodes[0]);
  EXPECT_EQ(h.queue->Tick(), 1);  // the victim gang's other member
  EXPECT_THAT(h.state().Snapshot()->AllocatedGpuMilli(), 0);
  EXPECT_THAT(h.Filter(m0), SizeIs(1));
  EXPECT_THAT(h.Filter(m1), SizeIs(1));
}

// The victims of a gang plan leave quota for the whole gang, not for one
// member: with quota for only one member after every possible eviction, no
// member gets an answer.
TEST(GangPreemptionTest, PlanLeavesQuotaForTheWholeGang) {
  QueueOptions o;
  o.quotas = Quotas({{"t", Quota(16, 16)}});
  Harness h(
      H100s(3),
      {Running("own", "t", "h0", 1), Running("mine", "t", "h1", 500), Running("u0", "u", "h2", 1)},
      o);
  PodRequest m0 = PodBuilder("m0", "t").Gpus(8).Priority(100).Gang("g", 2).Build();
  h.Submit(m0);
  h.Submit(PodBuilder("m1", "t").Gpus(8).Priority(100).Gang("g", 2).Build());
  // t holds 16 of 16: only evicting its own low-priority pod frees quota,
  // 8 GPUs, and the gang needs 16.
  EXPECT_THAT(h.service->Preempt(AllNodes(h, m0)).nodes, IsEmpty());
}

// A namespace below its guarantee reclaims for a gang at its head: the
// borrowers' pods for every member go in one tick, then nothing more.
TEST(GangReclaimTest, NamespaceBelowGuaranteeReclaimsForItsGang) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 24, "r")}, {"team-b", Quota(16, 16, "r")}});
  Harness h(H100s(3),
            {Running("a0", "team-a", "h0", -1), Running("a1", "team-a", "h1", -1),
             Running("a2", "team-a", "h2", -1)},
            o);
  PodRequest b0 = PodBuilder("b0", "team-b").Gpus(8).Gang("g", 2).Build();
  PodRequest b1 = PodBuilder("b1", "team-b").Gpus(8).Gang("g", 2).Build();
  EXPECT_THAT(h.Filter(b0), IsEmpty());
  EXPECT_THAT(h.Filter(b1), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 2);
  EXPECT_THAT(h.writer.evicted, SizeIs(2));
  // team-a keeps its guarantee; team-b's gang starts; no further eviction.
  EXPECT_THAT(h.Filter(b0), SizeIs(1));
  EXPECT_THAT(h.Filter(b1), SizeIs(1));
  ASSERT_EQ(h.Bind(b0, h.Filter(b0)[0]), "");
  ASSERT_EQ(h.Bind(b1, h.Filter(b1)[0]), "");
  h.now_ms += 60'000;
  EXPECT_EQ(h.queue->Tick(), 0);
  EXPECT_THAT(h.writer.evicted, SizeIs(2));
}

// Reclaim takes a borrowing gang spanning nodes whole.
TEST(GangReclaimTest, BorrowingGangSpanningNodesIsReclaimedWhole) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(0, 16, "r")}, {"team-b", Quota(8, 8, "r")}});
  Harness h(
      H100s(2),
      {Running("w0", "team-a", "h0", -1, "wide", 2), Running("w1", "team-a", "h1", -1, "wide", 2)},
      o);
  EXPECT_THAT(h.Filter(PodBuilder("b", "team-b").Gpus(8).Build()), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 2);
  EXPECT_THAT(h.writer.evicted, UnorderedElementsAre("uid-team-a-w0", "uid-team-a-w1"));
}

// Random clusters of four 8-GPU nodes, each half (4 GPUs) empty, a single
// pod or a member of a 2-pod gang (often spanning nodes), priorities mixed;
// a priority-100 gang of 2-3 x 4 GPUs asks to preempt member by member and
// kube-scheduler evicts the victims of the first node answered, then the
// tick runs. Invariants: victims are of lower priority and on the node
// answered; no device is allocated twice; a victim gang has no member left
// after the tick; and once the preemptor was answered, after every member
// has asked, the whole gang fits (every member passes filter).
TEST(GangPreemptionTest, RandomClustersKeepGangsWholeAndPlansComplete) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const int32_t kPriorities[] = {1, 5, 50, 500};
  int answered_rounds = 0, victim_gangs = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::pair<std::string, DeviceMask>> halves;
    for (int n = 0; n < 4; ++n) {
      halves.push_back({"h" + std::to_string(n), 0x0f});
      halves.push_back({"h" + std::to_string(n), 0xf0});
    }
    std::shuffle(halves.begin(), halves.end(), rng);
    std::vector<PodRequest> pods;
    for (size_t i = 0; i < halves.size();) {
      const int kind = pick(10);
      const int32_t priority = kPriorities[pick(4)];
      const std::string id = std::to_string(i);
      if (kind == 0) {
        ++i;  // left empty
      } else if (kind < 5 && i + 1 < halves.size()) {
        for (int m = 0; m < 2; ++m, ++i) {
          PodRequest p = PodBuilder("w" + id + "-" + std::to_string(m), "u")
                             .Gpus(4)
                             .OnNode(halves[i].first, halves[i].second)
                             .Priority(priority)
                             .Build();
          p.gang = "v" + id;
          p.gang_size = 2;
          pods.push_back(p);
        }
      } else {
        pods.push_back(PodBuilder("s" + id, "u")
                           .Gpus(4)
                           .OnNode(halves[i].first, halves[i].second)
                           .Priority(priority)
                           .Build());
        ++i;
      }
    }
    Harness h(H100s(4), pods, QueueOptions{});
    const int size = 2 + pick(2);
    std::vector<PodRequest> members;
    for (int m = 0; m < size; ++m) {
      members.push_back(
          PodBuilder("m" + std::to_string(m), "t").Gpus(4).Priority(100).Gang("g", size).Build());
      h.Submit(members.back());
    }
    bool answered = false;
    for (int pass = 0; pass < 2; ++pass) {
      for (const PodRequest& m : members) {
        PreemptionOutcome out = h.service->Preempt(AllNodes(h, m));
        if (out.nodes.empty()) continue;
        answered = true;
        const auto& nv = out.nodes[0];
        std::set<std::string> hit;
        for (const std::string& uid : nv.victim_uids) {
          auto v = h.state().FindPod(uid);
          ASSERT_TRUE(v.has_value()) << "round " << round << ": unknown victim " << uid;
          ASSERT_LT(v->priority, 100) << "round " << round;
          ASSERT_EQ(v->node_name, nv.node) << "round " << round;
          if (!v->gang.empty()) hit.insert(v->gang);
        }
        EvictAnswer(h, nv);
        h.queue->Tick();
        for (const auto& node : h.state().Snapshot()->nodes()) {
          ASSERT_EQ(node->device_conflicts, 0) << "round " << round;
          for (const PodOnNode& p : node->pods) {
            ASSERT_FALSE(p.ns == "u" && hit.contains(p.gang))
                << "round " << round << ": gang " << p.gang << " left partly running";
          }
        }
        victim_gangs += static_cast<int>(hit.size());
      }
    }
    if (!answered) continue;
    ++answered_rounds;
    for (const PodRequest& m : members) {
      ASSERT_FALSE(h.Filter(m).empty())
          << "round " << round << ": " << m.name << " does not fit after its gang's preemptions";
    }
  }
  // The scenarios exercised preemption and whole victim gangs.
  std::cout << answered_rounds << " rounds answered, " << victim_gangs << " victim gangs\n";
  EXPECT_GE(answered_rounds, 100);
  EXPECT_GE(victim_gangs, 50);
}

}  // namespace
}  // namespace gpusched::queue
