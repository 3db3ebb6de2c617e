// A gang's failed placement answered again (QueueManager::FailedPlacement,
// docs/architecture.md "Plans and the commit"): a later member of the gang,
// or the same member again, gets the recorded answer without a placement
// while the planning view's stamp and every input of the placement are the
// same; and is placed again as soon as any of them moved. Placements are
// counted through QueueDeps::after_unlocked_placement.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/policy/framework.h"
#include "scheduler/queue/domain_placement.h"
#include "test/queue/harness.h"

namespace gpusched::queue {

// Reaches the key (QueueManager befriends it): a placement prepared now for
// a pending member, as ReserveStepLocked prepares it, and whether the
// recorded failure answers it after `change` altered a copy of it.
class FailedPlacementProbe {
 public:
  using Place = QueueManager::GangPlacement;
  explicit FailedPlacementProbe(QueueManager& q) : q_(q) {}

  bool Answers(const std::string& uid, const policy::Framework& fw,
               const std::function<void(Place&)>& change) {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    q_.SyncLocked(q_.deps_.state->Snapshot());
    Place place;
    if (!q_.ClaimOrPrepareLocked(*q_.FindEntryLocked(uid)->pod, &place).empty()) return false;
    change(place);
    return q_.FailedBeforeLocked(place, fw) != nullptr;
  }

  size_t Recorded() {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    return q_.failed_placements_.size();
  }

 private:
  QueueManager& q_;
};

namespace {

using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::PodBuilder;
using testing::Harness;
using ::testing::IsEmpty;

constexpr char kClique[] = "nvidia.com/gpu.clique";

// Two cliques of two 8-GPU nodes (a0 a1, b0 b1), levels configured, and a
// busy pod on b1: a gang of three 8-GPU members requiring one clique never
// fits.
std::vector<NodeSpec> TwoCliques() {
  std::vector<NodeSpec> out;
  for (const std::string name : {"a0", "a1", "b0", "b1"}) {
    NodeSpec n = Hgx8H100(name);
    n.labels = std::make_shared<NodeLabels>(NodeLabels{{kClique, name.substr(0, 1)}});
    out.push_back(std::move(n));
  }
  return out;
}

QueueOptions Levels() {
  QueueOptions o;
  o.gang.topology_levels = {kClique};
  return o;
}

PodRequest Member(const std::string& name) {
  PodRequest p = PodBuilder(name, "team-a").Gpus(8).Gang("g", 3).Build();
  p.topology_request = {TopologyRule::kRequired, kClique, 0, kAnnotationTopologyRequired, ""};
  return p;
}

std::string Reason(Harness& h, const PodRequest& pod) {
  std::string reason;
  EXPECT_THAT(h.Filter(pod, &reason), IsEmpty()) << pod.name;
  return reason.substr(0, reason.find("; position"));
}

struct Move {
  std::string name;
  // What happens between the first member's failed placement and the
  // next filter; returns the member filtered next.
  std::function<PodRequest(Harness&)> between;
  int placements;  // placements after both filters: 1 answered again, 2 placed again
};

TEST(FailedPlacementTest, AnsweredAgainOnlyWhileNothingThePlacementReadMoved) {
  const std::vector<Move> moves = {
      {"another member, nothing moved", [](Harness&) { return Member("m1"); }, 1},
      {"the same member again", [](Harness&) { return Member("m0"); }, 1},
      {"a pending pod of another namespace arrives",
       [](Harness& h) {
         h.Submit(PodBuilder("other", "team-z").Gpus(1).Build());
         return Member("m1");
       },
       1},
      {"GPUs freed",
       [](Harness& h) {
         h.state().RemovePod("uid-team-z-busy");
         h.state().Commit();
         return Member("m1");
       },
       2},
      {"GPUs taken elsewhere",
       [](Harness& h) {
         h.Submit(PodBuilder("solo", "team-z").Gpus(1).OnNode("a0", 0x01).Build());
         return Member("m1");
       },
       2},
      {"config reloaded",
       [](Harness& h) {
         h.queue->SetOptions(h.options);
         return Member("m1");
       },
       2},
      {"member asks other CPU",
       [](Harness&) {
         PodRequest m = Member("m1");
         m.cpu_milli = 2000;
         return m;
       },
       2},
      {"member asks other GPUs",
       [](Harness&) {
         PodRequest m = Member("m1");
         m.gpu.count = 7;
         return m;
       },
       2},
  };
  for (const Move& move : moves) {
    SCOPED_TRACE(move.name);
    Harness h(TwoCliques(), {PodBuilder("busy", "team-z").Gpus(8).OnNode("b1", 0xff).Build()},
              Levels());
    int placements = 0;
    h.after_unlocked_placement = [&](const auto&) { ++placements; };
    const std::string first = Reason(h, Member("m0"));
    EXPECT_THAT(first, ::testing::StartsWith("gpusched: gang g needs 24 GPUs (3 x 8) in one "));
    ASSERT_EQ(placements, 1);
    const PodRequest next = move.between(h);
    const std::string again = Reason(h, next);
    EXPECT_EQ(placements, move.placements);
    if (move.placements == 1) {
      EXPECT_EQ(again, first);
    }
  }
}

TEST(FailedPlacementTest, AnsweredAgainOnlyForTheSamePlacementInputs) {
  Harness h(TwoCliques(), {}, Levels());
  ASSERT_THAT(Reason(h, Member("m0")), ::testing::HasSubstr("in one nvidia.com/gpu.clique"));
  FailedPlacementProbe probe(*h.queue);
  ASSERT_EQ(probe.Recorded(), 1u);
  auto fw = h.service->framework();
  auto other_fw = policy::Framework::Create(ScoringConfig{});
  ASSERT_TRUE(other_fw.ok());
  using Place = FailedPlacementProbe::Place;
  struct Key {
    std::string name;
    std::function<void(Place&)> change;
    const policy::Framework* fw;
    bool answers;
  };
  const std::vector<Key> keys = {
      {"as placed", [](Place&) {}, fw.get(), true},
      {"another framework", [](Place&) {}, other_fw->get(), false},
      {"missing", [](Place& p) { --p.missing; }, fw.get(), false},
      {"by_scan", [](Place& p) { p.by_scan = !p.by_scan; }, fw.get(), false},
      {"topology level", [](Place& p) { p.topology.level = "example.com/rack"; }, fw.get(), false},
      {"topology rule", [](Place& p) { p.topology.rule = TopologyRule::kPreferred; }, fw.get(),
       false},
      {"memory", [](Place& p) { p.pod.memory_mib += 1; }, fw.get(), false},
      {"GPU memory", [](Place& p) { p.pod.gpu.min_memory_mib += 1; }, fw.get(), false},
      {"GPU models", [](Place& p) { p.pod.gpu.models = {"H100"}; }, fw.get(), false},
      {"priority", [](Place& p) { p.pod.priority += 1; }, fw.get(), false},
      {"gang size", [](Place& p) { p.pod.gang_size += 1; }, fw.get(), false},
      {"uid and name only", [](Place& p) { p.pod.uid = p.pod.name = "m9"; }, fw.get(), true},
  };
  for (const Key& key : keys) {
    EXPECT_EQ(probe.Answers(Member("m0").uid, *key.fw, key.change), key.answers) << key.name;
  }
  // The tick forgets a failure once the stamp moved.
  h.Submit(PodBuilder("solo", "team-z").Gpus(1).OnNode("a0", 0x01).Build());
  EXPECT_FALSE(probe.Answers(Member("m0").uid, *fw, [](Place&) {}));
  h.queue->Tick();
  EXPECT_EQ(probe.Recorded(), 0u);
}

// A preferred gang no domain or set of domains holds is placed anywhere
// over the usable nodes only (NodeRooms::usable): the same picks as the
// reference placement over every node, whether all, some or none fit.
TEST(FailedPlacementTest, AnywhereOverUsableNodesPicksAsOverEveryNode) {
  std::vector<NodeSpec> nodes = TwoCliques();
  for (const std::string name : {"u0", "u1", "u2", "u3"}) nodes.push_back(Hgx8H100(name));
  auto state = ::gpusched::testing::MakeState(
      nodes, {PodBuilder("x", "team-z").Gpus(8).OnNode("a0", 0xff).Build(),
              PodBuilder("y", "team-z").Gpus(6).OnNode("b0", 0x3f).Build(),
              PodBuilder("z", "team-z").Gpus(5).OnNode("u1", 0x1f).Build(),
              PodBuilder("w", "team-z").Gpus(2).OnNode("u3", 0x03).Build()});
  const auto snap = state->Snapshot();
  auto fw = policy::Framework::Create(ScoringConfig{});
  ASSERT_TRUE(fw.ok());
  const QuotaConfig no_quotas;
  const QuotaLedger ledger(no_quotas, *snap);
  PodRequest member = PodBuilder("m", "team-a").Gpus(4).Gang("g", 9).Build();
  member.topology_request = {TopologyRule::kPreferred, kClique, 0, "test", ""};
  const ResolvedTopology topology = ResolveTopology(member, {kClique});
  // Room for 4-GPU members: a1 2, b0 0, b1 2, u0 2, u1 0, u2 2, u3 1 (9).
  for (int32_t missing : {9, 10, 3}) {
    const TopologyPlacement fast =
        PlaceInDomains(*snap, **fw, member, ledger, missing, /*by_scan=*/false, topology);
    const TopologyPlacement reference =
        PlaceInDomains(*snap, **fw, member, ledger, missing, /*by_scan=*/true, topology);
    EXPECT_EQ(fast.picks, reference.picks) << missing;
    EXPECT_EQ(fast.picks.size(), std::min(missing, 9)) << missing;
  }
  EXPECT_EQ(RoomPerNode(*snap, **fw, member, 9).usable,
            (std::vector<int32_t>{1, 3, 4, 6, 7}));  // a1 b1 u0 u2 u3, by index
}

}  // namespace
}  // namespace gpusched::queue
