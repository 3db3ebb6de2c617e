// The commit rule (QueueManager::PlanCurrentLocked, docs/architecture.md
// "Plans and the commit"), fact by fact: a plan's basis is taken as a
// planner takes it (under the mutex, on the current planning view), the
// cluster or the queue changes as each row says, and the rule is asked
// whether the plan may still be recorded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "test/queue/harness.h"

namespace gpusched::queue {

// Reaches the rule (QueueManager befriends it): the basis of a plan made
// now, and the rule's answer for it later.
class CommitRuleProbe {
 public:
  struct Plan {
    std::string for_uid;  // the pod the plan is for
    bool heads_queue = false;
    std::optional<std::vector<std::string>> victims;
    // A gang reservation for the gang of `for_uid`: the (node, devices) it
    // picked for the missing members.
    bool gang = false;
    std::vector<std::pair<std::string, DeviceMask>> picks;
  };

  CommitRuleProbe(QueueManager& q, Plan plan) : q_(q), plan_(std::move(plan)) {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    q_.SyncLocked(q_.deps_.state->Snapshot());
    place_.view = q_.PlanningViewLocked();
    place_.queue_version = q_.queue_version_;
    if (!plan_.gang) return;
    const PodRequest& member = *q_.FindEntryLocked(plan_.for_uid)->pod;
    place_.pod = member;
    place_.missing = member.gang_size - q_.HeldGangMembersLocked(member);
    place_.placed = true;
    place_.picks = plan_.picks;
  }

  // Whether the rule records the plan now.
  bool Current() {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    q_.SyncLocked(q_.deps_.state->Snapshot());
    if (plan_.gang) return q_.PlanCurrentLocked(place_.Basis());
    const std::vector<std::string>* victims = plan_.victims ? &*plan_.victims : nullptr;
    return q_.PlanCurrentLocked(
        {place_.view->stamp, place_.queue_version, plan_.for_uid, plan_.heads_queue, victims});
  }

  // Another plan's commit evicts `uid` meanwhile.
  void MarkEvicted(const std::string& uid) {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    q_.MarkEvictedLocked(uid);
  }

 private:
  QueueManager& q_;
  Plan plan_;
  QueueManager::GangPlacement place_;
};

namespace {

using ::gpusched::testing::PodBuilder;
using testing::H100s;
using testing::Harness;
using testing::Quota;
using testing::Quotas;

struct Row {
  std::string name;
  QueueOptions options;
  std::vector<PodRequest> pods;  // the cluster when the plan is made
  CommitRuleProbe::Plan plan;
  std::function<void(Harness&, CommitRuleProbe&)> meanwhile;
  bool recorded = false;
};

void Bound(Harness& h, PodBuilder b, const std::string& node) {
  h.Submit(b.OnNode(node, 0xff).Build());
}

void RemovePod(Harness& h, const PodRequest& pod) {
  h.state().RemovePod(pod.uid);
  h.state().Commit();
}

// Reclaim and preemption plans: pod p of team-a (waiting) evicts v (team-z,
// on h0).
const PodRequest kPod = PodBuilder("p", "team-a").Gpus(8).Priority(100).Build();
const PodRequest kVictim = PodBuilder("v", "team-z").Gpus(8).OnNode("h0", 0xff).Build();

CommitRuleProbe::Plan Evicts(bool heads_queue) {
  return {kPod.uid, heads_queue, std::vector<std::string>{kVictim.uid}, false, {}};
}

std::vector<Row> VictimRows() {
  std::vector<Row> rows = {
      {"nothing moved", {}, {}, Evicts(true), [](Harness&, CommitRuleProbe&) {}, true},
      {"a pod of another namespace arrived",
       {},
       {},
       Evicts(true),
       [](Harness& h, CommitRuleProbe&) { h.Submit(PodBuilder("c", "team-c").Gpus(1).Build()); },
       true},
      {"config moved",
       {},
       {},
       Evicts(true),
       [](Harness& h, CommitRuleProbe&) { h.queue->SetOptions(h.options); },
       false},
      {"its pod is gone",
       {},
       {},
       Evicts(true),
       [](Harness& h, CommitRuleProbe&) { RemovePod(h, kPod); },
       false},
      {"its pod bound",
       {},
       {},
       Evicts(true),
       [](Harness& h, CommitRuleProbe&) { Bound(h, PodBuilder("p", "team-a").Gpus(8), "h1"); },
       false},
      {"its head changed",
       {},
       {},
       Evicts(true),
       [](Harness& h, CommitRuleProbe&) {
         h.Submit(PodBuilder("urgent", "team-a").Gpus(8).Priority(1000).Build());
       },
       false},
      {"its head changed, a plan that does not rest on it",
       {},
       {},
       Evicts(false),
       [](Harness& h, CommitRuleProbe&) {
         h.Submit(PodBuilder("urgent", "team-a").Gpus(8).Priority(1000).Build());
       },
       true},
      {"a victim is gone",
       {},
       {},
       Evicts(true),
       [](Harness& h, CommitRuleProbe&) { RemovePod(h, kVictim); },
       false},
      {"a victim is being evicted",
       {},
       {},
       Evicts(true),
       [](Harness&, CommitRuleProbe& p) { p.MarkEvicted(kVictim.uid); },
       false},
  };
  for (Row& r : rows) r.pods = {kPod, kVictim};
  return rows;
}

// A gang reservation: gang g of team-a (m0, m1: 2 x 8 GPUs) placed on h0
// and h1.
PodBuilder Member(const std::string& name) {
  return std::move(PodBuilder(name, "team-a").Gpus(8).Gang("g", 2));
}

CommitRuleProbe::Plan GangPlan() {
  return {Member("m0").Build().uid, false, std::nullopt, true, {{"h0", 0xff}, {"h1", 0xff}}};
}

QueueOptions WithQuota(NamespaceQuota team_a) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", std::move(team_a)}});
  return o;
}

// Room for the gang's 16 GPUs: 32 for the namespace, 16 of them H100s.
QueueOptions ModelQuota() {
  NamespaceQuota a = Quota(32, 32);
  a.models["H100"] = {16, 16};
  return WithQuota(a);
}

std::vector<Row> GangRows() {
  std::vector<Row> rows = {
      {"gang: nothing moved",
       ModelQuota(),
       {},
       GangPlan(),
       [](Harness&, CommitRuleProbe&) {},
       true},
      {"gang: a pod of another namespace bound elsewhere",
       ModelQuota(),
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) { Bound(h, PodBuilder("z", "team-z").Gpus(8), "h3"); },
       true},
      {"gang: config moved",
       {},
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) { h.queue->SetOptions(h.options); },
       false},
      {"gang: its member changed",
       {},
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) { h.Submit(Member("m0").Gpus(4).Build()); },
       false},
      {"gang: a reservation was made meanwhile",
       {},
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) {
         ASSERT_THAT(h.FilterOnly(Member("m1").Build()), ::testing::SizeIs(1));
       },
       false},
      {"gang: a reservation was made meanwhile, its holders dropped since",
       {},
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) {
         ASSERT_THAT(h.FilterOnly(Member("m1").Build()), ::testing::SizeIs(1));
         for (const std::string& uid : ::gpusched::testing::ReservationHolders(h.state())) {
           h.state().RemovePod(uid);
         }
         h.state().Commit();
       },
       false},
      {"gang: its members on nodes changed",
       {},
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) { Bound(h, Member("m1"), "h3"); },
       false},
      {"gang: the per-model quota refuses it now",
       ModelQuota(),
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) { Bound(h, PodBuilder("solo", "team-a").Gpus(8), "h2"); },
       false},
      {"gang: the namespace's quota refuses it now",
       WithQuota(Quota(16, 16)),
       {},
       GangPlan(),
       [](Harness& h, CommitRuleProbe&) { Bound(h, PodBuilder("solo", "team-a").Gpus(8), "h2"); },
       false},
  };
  for (Row& r : rows) r.pods = {Member("m0").Build(), Member("m1").Build()};
  return rows;
}

TEST(CommitRuleTest, RecordsAPlanOnlyWhileEveryFactItRestsOnHolds) {
  std::vector<Row> rows = VictimRows();
  for (Row& r : GangRows()) rows.push_back(std::move(r));
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Harness h(H100s(4), {}, row.options);
    for (const PodRequest& p : row.pods) h.Submit(p);
    CommitRuleProbe probe(*h.queue, row.plan);
    ASSERT_NO_FATAL_FAILURE(row.meanwhile(h, probe));
    EXPECT_EQ(probe.Current(), row.recorded);
  }
}

}  // namespace
}  // namespace gpusched::queue
