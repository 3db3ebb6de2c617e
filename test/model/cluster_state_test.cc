#include "gpusched/core/cluster_state.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <vector>

#include "gpusched/util/strings.h"
#include "test/testing/builders.h"

namespace gpusched {
namespace {

using testing::Devices;
using testing::MakeState;
using testing::PodBuilder;

TEST(ClusterStateTest, KnownIdsMarkDevicesUsed) {
  auto state = MakeState({testing::Dgx1V100("n1")},
                         {PodBuilder("a").Gpus(2).OnNode("n1", Devices({0, 3})).Build()});
  const NodeInfo* n = state->Snapshot()->Find("n1");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->free_count(), 6);
  EXPECT_EQ(n->whole_free & Devices({0, 3}), 0u);
  EXPECT_EQ(n->device_conflicts, 0);
}

TEST(ClusterStateTest, BoundPodWithoutIdsStillHoldsGpus) {
  auto state = MakeState({testing::Pcie4xT4("t4")},
                         {PodBuilder("a").Gpus(3).OnNodeUnknownIds("t4").Build()});
  const NodeInfo* n = state->Snapshot()->Find("t4");
  EXPECT_EQ(n->free_count(), 1);  // never counted as free
}

// HasPods answers each uid as FindPod does (known or not), in order,
// pending, bound and removed pods alike.
TEST(ClusterStateTest, HasPodsAnswersEachUidAsFindPod) {
  const PodRequest bound = PodBuilder("bound").Gpus(1).OnNode("h", 0x01).Build();
  const PodRequest waiting = PodBuilder("waiting").Gpus(1).Build();
  const PodRequest removed = PodBuilder("removed").Gpus(1).Build();
  auto state = MakeState({testing::Hgx8H100("h")}, {bound, waiting, removed});
  state->RemovePod(removed.uid);
  state->Commit();
  const std::vector<std::string_view> uids = {waiting.uid, removed.uid, "never", bound.uid,
                                              waiting.uid};
  const std::vector<bool> has = state->HasPods(uids);
  ASSERT_EQ(has.size(), uids.size());
  for (size_t i = 0; i < uids.size(); ++i) {
    EXPECT_EQ(has[i], state->FindPod(uids[i]).has_value()) << uids[i];
  }
  EXPECT_EQ(has, (std::vector<bool>{true, false, false, true, true}));
  EXPECT_TRUE(state->HasPods({}).empty());
}

TEST(ClusterStateTest, FinishedPodsReleaseGpus) {
  auto state =
      MakeState({testing::Hgx8H100("h")},
                {PodBuilder("done").Gpus(8).OnNode("h", 0xff).Phase(PodPhase::kSucceeded).Build(),
                 PodBuilder("failed").Gpus(8).OnNode("h", 0xff).Phase(PodPhase::kFailed).Build()});
  EXPECT_EQ(state->Snapshot()->Find("h")->free_count(), 8);
}

TEST(ClusterStateTest, UnhealthyDevicesNeverOffered) {
  NodeSpec spec = testing::Pcie4xT4("t4");
  spec.gpu_allocatable = 3;
  auto state = MakeState({spec});
  const NodeInfo* n = state->Snapshot()->Find("t4");
  EXPECT_EQ(n->gpu_count, 4);
  EXPECT_EQ(n->healthy_count(), 3);
  EXPECT_EQ(n->whole_free, Devices({0, 1, 2}));
}

TEST(ClusterStateTest, ConflictingClaimsFailClosed) {
  auto state = MakeState({testing::Pcie4xT4("t4")},
                         {PodBuilder("a").Gpus(1).OnNode("t4", Devices({1})).Build(),
                          PodBuilder("b").Gpus(1).OnNode("t4", Devices({1})).Build(),
                          PodBuilder("c").Gpus(1).OnNode("t4", Devices({7})).Build()});
  const NodeInfo* n = state->Snapshot()->Find("t4");
  EXPECT_EQ(n->device_conflicts, 2);  // device 1 twice; device 7 does not exist
  EXPECT_EQ(n->whole_free & Devices({1}), 0u);
  // Every claim holds a device: b and c are counted on free ones.
  EXPECT_EQ(n->free_count(), 1);
}

// Two running pods claiming the same four devices of an 8-GPU node: the
// node looks full (each claim counts), the conflict is described naming
// both pods, and it is logged once, not on every commit or relist.
TEST(ClusterStateTest, PodsClaimingTheSameDevicesFillTheNode) {
  const std::vector<PodRequest> pods = {
      PodBuilder("first").Gpus(4).OnNode("h", Devices({0, 1, 2, 3})).Build(),
      PodBuilder("second").Gpus(4).OnNode("h", Devices({0, 1, 2, 3})).Build()};
  auto state = MakeState({testing::Hgx8H100("h")});
  std::vector<std::string> logged;
  state->SetConflictLog([&logged](const std::string& node, const std::string& what) {
    logged.push_back(node + ": " + what);
  });
  state->Reset({testing::Hgx8H100("h")}, pods);
  state->Commit();
  const NodeInfo* n = state->Snapshot()->Find("h");
  EXPECT_EQ(n->free_count(), 0);
  EXPECT_EQ(n->device_conflicts, 1);
  EXPECT_EQ(state->Snapshot()->AllocatedGpuMilli(), 8000);
  const std::string what =
      "pods default/first and default/second both claim GPU 0; default/second is counted on "
      "other free devices";
  EXPECT_EQ(state->DeviceConflicts(),
            (std::vector<std::pair<std::string, std::string>>{{"h", what}}));
  ASSERT_EQ(logged, std::vector<std::string>{"h: " + what});

  // A relist with the same pods, and an unrelated change on the node.
  state->Reset({testing::Hgx8H100("h")}, pods);
  state->Commit();
  state->UpsertPod(PodBuilder("third").Gpus(0).OnNodeUnknownIds("h").Build());
  state->Commit();
  EXPECT_EQ(logged.size(), 1u);
  EXPECT_EQ(state->DeviceConflicts().size(), 1u);

  // The second pod leaves: no conflict.
  state->RemovePod(pods[1].uid);
  state->Commit();
  EXPECT_TRUE(state->DeviceConflicts().empty());
  EXPECT_EQ(state->Snapshot()->Find("h")->free_count(), 4);
}

TEST(ClusterStateTest, SharedDevicesAccumulateMilli) {
  auto state = MakeState({testing::Pcie4xT4("t4")},
                         {PodBuilder("a").Gpus(1).Milli(300).OnNode("t4", Devices({2})).Build(),
                          PodBuilder("b").Gpus(1).Milli(500).OnNode("t4", Devices({2})).Build()});
  const NodeInfo* n = state->Snapshot()->Find("t4");
  EXPECT_EQ(n->used_milli[2], 800);
  EXPECT_EQ(n->free_count(), 3);
}

TEST(ClusterStateTest, AssumeRejectsTakenDevicesAndChangesNothing) {
  auto state = MakeState({testing::Pcie4xT4("t4")},
                         {PodBuilder("a").Gpus(1).OnNode("t4", Devices({0})).Build()});
  auto before = state->Snapshot();
  PodRequest b = PodBuilder("b").Gpus(2).Build();
  EXPECT_FALSE(state->Assume(b, "t4", Devices({0, 1})).ok());
  EXPECT_FALSE(state->Assume(b, "nope", Devices({1, 2})).ok());
  EXPECT_FALSE(state->Assume(b, "t4", Devices({1})).ok());  // wrong count
  EXPECT_EQ(state->Snapshot()->Find("t4")->whole_free, before->Find("t4")->whole_free);
  ASSERT_TRUE(state->Assume(b, "t4", Devices({1, 2})).ok());
  EXPECT_EQ(state->Snapshot()->Find("t4")->whole_free, Devices({3}));
  // Binding again (to anywhere) is refused.
  EXPECT_FALSE(state->Assume(b, "t4", Devices({3})).ok());
}

TEST(ClusterStateTest, AssumeThenForgetRestoresThePendingPod) {
  auto state = MakeState({testing::Pcie4xT4("t4")});
  PodRequest p = PodBuilder("p").Gpus(2).Build();
  state->UpsertPod(p);  // the source shows it pending
  ASSERT_TRUE(state->Assume(p, "t4", Devices({0, 1})).ok());
  EXPECT_EQ(state->Snapshot()->Find("t4")->free_count(), 2);
  state->Forget(p.uid);
  EXPECT_EQ(state->Snapshot()->Find("t4")->free_count(), 4);
  auto known = state->FindPod(p.uid);
  ASSERT_TRUE(known.has_value());
  EXPECT_TRUE(known->node_name.empty());
}

TEST(ClusterStateTest, PodChangesReportEachChangedPodOnceThenNothing) {
  auto state = MakeState({testing::Pcie4xT4("t4")});
  auto pending = [](const PodRequest& p) { return !p.HoldsGpus(); };
  PodRequest a = PodBuilder("a").Gpus(1).Build();
  PodRequest b = PodBuilder("b").Gpus(1).Build();
  state->UpsertPod(a);
  state->UpsertPod(b);
  // The first read is a full one: every pod the filter keeps.
  ClusterState::PodChanges first = state->TakePodChanges(pending);
  EXPECT_TRUE(first.full);
  EXPECT_EQ(first.pods.size(), 2u);
  EXPECT_TRUE(state->TakePodChanges(pending).pods.empty());
  // Assumed (no longer kept: nullopt), removed (nullopt), changed (the pod).
  ASSERT_TRUE(state->Assume(a, "t4", Devices({0})).ok());
  state->RemovePod(b.uid);
  PodRequest c = PodBuilder("c").Gpus(2).Build();
  state->UpsertPod(c);
  c.priority = 7;
  state->UpsertPod(c);
  ClusterState::PodChanges next = state->TakePodChanges(pending);
  EXPECT_FALSE(next.full);
  std::map<std::string, std::shared_ptr<const PodRequest>> by_uid(next.pods.begin(),
                                                                  next.pods.end());
  ASSERT_EQ(by_uid.size(), 3u);
  EXPECT_EQ(by_uid[a.uid], nullptr);
  EXPECT_EQ(by_uid[b.uid], nullptr);
  ASSERT_NE(by_uid[c.uid], nullptr);
  EXPECT_EQ(by_uid[c.uid]->priority, 7);
  // A relist (Reset) makes the next read a full one again.
  state->Reset({testing::Pcie4xT4("t4")}, {c});
  ClusterState::PodChanges relisted = state->TakePodChanges(pending);
  EXPECT_TRUE(relisted.full);
  ASSERT_EQ(relisted.pods.size(), 1u);
  EXPECT_EQ(relisted.pods[0].first, c.uid);
}

// The change feed shares the state's PodRequest with its reader instead of
// copying it, so the state must never change one it has handed out: each
// change (assume, forget, upsert) stores a new object, and what the reader
// holds stays as it was when taken.
TEST(ClusterStateTest, PodsHandedToTheChangeFeedNeverChangeAfterwards) {
  auto state = std::make_shared<ClusterState>();
  state->Reset({testing::Pcie4xT4("t4")}, {});
  state->Commit();
  auto all = [](const PodRequest&) { return true; };
  state->TakePodChanges(all);
  PodRequest p = PodBuilder("p").Gpus(1).Build();
  state->UpsertPod(p);
  ClusterState::PodChanges pending = state->TakePodChanges(all);
  ASSERT_EQ(pending.pods.size(), 1u);
  std::shared_ptr<const PodRequest> held = pending.pods[0].second;
  ASSERT_NE(held, nullptr);

  ASSERT_TRUE(state->Assume(p, "t4", 0b1).ok());
  ClusterState::PodChanges bound = state->TakePodChanges(all);
  ASSERT_EQ(bound.pods.size(), 1u);
  EXPECT_EQ(bound.pods[0].second->node_name, "t4");
  EXPECT_TRUE(held->node_name.empty()) << "the assumption changed a PodRequest already handed out";
  EXPECT_FALSE(held->has_gpu_ids);

  std::shared_ptr<const PodRequest> was_bound = bound.pods[0].second;
  state->Forget(p.uid);
  ClusterState::PodChanges forgotten = state->TakePodChanges(all);
  ASSERT_EQ(forgotten.pods.size(), 1u);
  EXPECT_TRUE(forgotten.pods[0].second->node_name.empty());
  EXPECT_EQ(was_bound->node_name, "t4") << "Forget changed a PodRequest already handed out";
  EXPECT_EQ(was_bound->gpu_ids, DeviceMask{0b1});
}

// TakePodChanges answers "nothing changed" without the mutex: each kind of
// change alone, right after an empty read, must still be seen.
TEST(ClusterStateTest, EveryKindOfChangeAloneEndsAnEmptyStretch) {
  auto pending = [](const PodRequest& p) { return !p.HoldsGpus(); };
  const PodRequest a = PodBuilder("a").Gpus(1).Build();
  struct Case {
    const char* name;
    std::function<void(ClusterState&)> change;
    bool full;
  };
  const std::vector<Case> cases = {
      {"upsert", [](ClusterState& s) { s.UpsertPod(PodBuilder("n").Gpus(1).Build()); }, false},
      {"remove", [&a](ClusterState& s) { s.RemovePod(a.uid); }, false},
      {"assume", [&a](ClusterState& s) { ASSERT_TRUE(s.Assume(a, "t4", Devices({0})).ok()); },
       false},
      {"assume then forget",
       [&a](ClusterState& s) {
         ASSERT_TRUE(s.Assume(a, "t4", Devices({0})).ok());
         s.Forget(a.uid);
       },
       false},
      {"reset", [&a](ClusterState& s) { s.Reset({testing::Pcie4xT4("t4")}, {a}); }, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto state = MakeState({testing::Pcie4xT4("t4")});
    state->UpsertPod(a);
    ASSERT_TRUE(state->TakePodChanges(pending).full);
    ASSERT_TRUE(state->TakePodChanges(pending).pods.empty());
    ASSERT_TRUE(state->TakePodChanges(pending).pods.empty());
    c.change(*state);
    ClusterState::PodChanges next = state->TakePodChanges(pending);
    EXPECT_FALSE(next.pods.empty());
    EXPECT_EQ(next.full, c.full);
    EXPECT_TRUE(state->TakePodChanges(pending).pods.empty());
  }
}

TEST(ClusterStateTest, SnapshotsAreImmutable) {
  auto state = MakeState({testing::Pcie4xT4("t4"), testing::DgxA100("a")});
  auto s1 = state->Snapshot();
  ASSERT_TRUE(state->Assume(PodBuilder("x").Gpus(4).Build(), "t4", 0xf).ok());
  auto s2 = state->Snapshot();
  EXPECT_EQ(s1->Find("t4")->free_count(), 4);
  EXPECT_EQ(s2->Find("t4")->free_count(), 0);
  EXPECT_GT(s2->generation(), s1->generation());
  EXPECT_EQ(s1->Find("a"), s2->Find("a"));  // untouched node shared, not copied
}

TEST(ClusterStateTest, AssumeAllBindsEveryPodInOneCommitOrNone) {
  auto state = MakeState({testing::Pcie4xT4("t4"), testing::Pcie4xT4("t4b")},
                         {PodBuilder("held").Gpus(1).OnNode("t4b", Devices({3})).Build()});
  const uint64_t before = state->Snapshot()->generation();
  const PodRequest a = PodBuilder("a").Gpus(2).Build();
  const PodRequest b = PodBuilder("b").Gpus(2).Build();
  const PodRequest c = PodBuilder("c").Gpus(2).Build();
  // b overlaps a on t4 (against each other, not the cluster): none is bound.
  EXPECT_FALSE(state->AssumeAll({{a, "t4", Devices({0, 1})}, {b, "t4", Devices({1, 2})}}).ok());
  // c takes a device held on t4b: none is bound.
  EXPECT_FALSE(state->AssumeAll({{a, "t4", Devices({0, 1})}, {c, "t4b", Devices({2, 3})}}).ok());
  // The same pod twice, an unknown node: none is bound.
  EXPECT_FALSE(state->AssumeAll({{a, "t4", Devices({0, 1})}, {a, "t4b", Devices({0, 1})}}).ok());
  EXPECT_FALSE(state->AssumeAll({{a, "t4", Devices({0, 1})}, {b, "nope", Devices({0, 1})}}).ok());
  EXPECT_EQ(state->Snapshot()->generation(), before);
  EXPECT_EQ(state->Snapshot()->AllocatedGpuMilli(), 1000);
  EXPECT_FALSE(state->FindPod(a.uid).has_value());  // never bound, never seen

  ASSERT_TRUE(
      state
          ->AssumeAll(
              {{a, "t4", Devices({0, 1})}, {b, "t4", Devices({2, 3})}, {c, "t4b", Devices({0, 1})}})
          .ok());
  EXPECT_EQ(state->Snapshot()->generation(), before + 1);  // one commit
  EXPECT_EQ(state->Snapshot()->Find("t4")->free_count(), 0);
  EXPECT_EQ(state->Snapshot()->Find("t4b")->free_count(), 1);
  EXPECT_EQ(state->FindPod(c.uid)->node_name, "t4b");
}

TEST(ClusterStateTest, RemovePodsAndCommitPublishesOnce) {
  const PodRequest a = PodBuilder("a").Gpus(1).OnNode("t4", Devices({0})).Build();
  const PodRequest b = PodBuilder("b").Gpus(1).OnNode("t4", Devices({1})).Build();
  const PodRequest c = PodBuilder("c").Gpus(1).OnNode("t4", Devices({2})).Build();
  auto state = MakeState({testing::Pcie4xT4("t4")}, {a, b, c});
  const auto before = state->Snapshot();
  state->RemovePodsAndCommit({a.uid, c.uid, "unknown"});
  const auto after = state->Snapshot();
  EXPECT_EQ(after->generation(), before->generation() + 1);
  EXPECT_EQ(after->Find("t4")->free_count(), 3);
  EXPECT_EQ(before->Find("t4")->free_count(), 1);  // snapshots are immutable
  EXPECT_FALSE(state->FindPod(a.uid).has_value());
  EXPECT_TRUE(state->FindPod(b.uid).has_value());
}

// A burst of watch events: applied in order (a pod added then removed in
// the same burst is gone; one moved twice ends where the last says), with one
// commit, and the change feed names every pod touched.
TEST(ClusterStateTest, ApplyPodsAndCommitAppliesInOrderAndPublishesOnce) {
  const PodRequest a = PodBuilder("a").Gpus(1).OnNode("t4", Devices({0})).Build();
  const PodRequest b = PodBuilder("b").Gpus(1).OnNode("t4", Devices({1})).Build();
  auto state = MakeState({testing::Pcie4xT4("t4"), testing::Pcie4xT4("t4b")}, {a, b});
  state->TakePodChanges([](const PodRequest&) { return true; }, true);
  const auto before = state->Snapshot();
  const PodRequest c = PodBuilder("c").Gpus(2).OnNode("t4", Devices({2, 3})).Build();
  const PodRequest moved = PodBuilder("b").Gpus(1).OnNode("t4b", Devices({0})).Build();
  const PodRequest moved_again = PodBuilder("b").Gpus(1).OnNode("t4b", Devices({3})).Build();
  const PodRequest brief = PodBuilder("brief").Gpus(1).OnNode("t4b", Devices({1})).Build();
  state->ApplyPodsAndCommit({{c.uid, c},
                             {a.uid, std::nullopt},
                             {b.uid, moved},
                             {brief.uid, brief},
                             {b.uid, moved_again},
                             {brief.uid, std::nullopt}});
  const auto after = state->Snapshot();
  EXPECT_EQ(after->generation(), before->generation() + 1);
  EXPECT_EQ(after->Find("t4")->free_count(), 2);   // c only
  EXPECT_EQ(after->Find("t4b")->free_count(), 3);  // b on device 3
  EXPECT_EQ(state->FindPod(b.uid)->gpu_ids, Devices({3}));
  EXPECT_FALSE(state->FindPod(a.uid).has_value());
  EXPECT_FALSE(state->FindPod(brief.uid).has_value());
  EXPECT_EQ(before->Find("t4")->free_count(), 2);  // snapshots are immutable
  auto changes = state->TakePodChanges([](const PodRequest&) { return true; }, false);
  std::set<std::string> touched;
  for (const auto& [uid, pod] : changes.pods) touched.insert(uid);
  EXPECT_EQ(touched, (std::set<std::string>{a.uid, b.uid, c.uid, brief.uid}));
}

TEST(ClusterStateTest, AnnotationTopologyWinsOverTemplate) {
  NodeSpec spec = testing::Pcie4xT4("t4");
  spec.topology_codes = {{"X", "NV1", "SYS", "SYS"},
                         {"NV1", "X", "SYS", "SYS"},
                         {"SYS", "SYS", "X", "NV1"},
                         {"SYS", "SYS", "NV1", "X"}};
  NodeSpec bad = testing::Pcie4xT4("t4b");
  bad.topology_codes = {{"X"}};
  auto state = MakeState({spec, bad});
  EXPECT_EQ(state->Snapshot()->Find("t4")->topology->link(0, 1).nvlinks, 1);
  // A bad annotation falls back to the template and is reported.
  EXPECT_EQ(state->Snapshot()->Find("t4b")->topology->link(0, 1).pcie, 50);
  auto errors = state->TopologyErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].first, "t4b");
}

TEST(ClusterStateTest, NodeCacheIsSmall) {
  // Budget from the issue: <= 1.5 KiB of cache per GPU node.
  auto state = MakeState({testing::Dgx1V100("n1")},
                         {PodBuilder("a").Gpus(2).OnNode("n1", Devices({0, 3})).Build()});
  EXPECT_LE(state->Snapshot()->Find("n1")->MemoryBytes(), 1536u);
}

}  // namespace
}  // namespace gpusched

namespace gpusched {
namespace {

// The packed fields of every node, and what each node holds, as text.
std::string Describe(const ClusterSnapshot& s) {
  std::string out;
  for (size_t i = 0; i < s.nodes().size(); ++i) {
    const NodeInfo& n = *s.nodes()[i];
    const NodeHot& h = s.hot(static_cast<int32_t>(i));
    EXPECT_EQ(h.info, &n) << n.name;
    EXPECT_EQ(s.Find(n.name), &n) << n.name;
    EXPECT_EQ(h.state_hash, NodeHot::StateHash(n.topology.get(), n.product_id, n.gpu_memory_mib,
                                               n.healthy, n.whole_free))
        << n.name;
    EXPECT_EQ(h.topology, n.topology.get()) << n.name;
    out += StrCat(n.name, " free=", n.whole_free, "/", h.whole_free, " healthy=", n.healthy, "/",
                  h.healthy, " cpu=", n.cpu_milli - n.cpu_used_milli, "/", h.cpu_free_milli,
                  " product=", h.product_id, " pods=", n.pods.size(), "\n");
  }
  return out;
}

// Incremental snapshots (each commit patches the previous one) equal a
// snapshot built from scratch over the same pods, through random pod
// arrivals, binds, departures and node changes; and a snapshot taken
// earlier never changes. Over `count` nodes (several shared chunks when
// count > ClusterSnapshot::kChunk, the last one partly filled).
void CheckPatchedSnapshotsEqualAFullBuild(int count, int steps, unsigned seed) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < count; ++i) nodes.push_back(testing::Hgx8H100(StrCat("h", i)));
  auto state = MakeState(nodes);
  std::mt19937 rng(seed);
  std::map<std::string, PodRequest> pods;  // the pods the state holds
  auto old = state->Snapshot();
  const std::string old_text = Describe(*old);
  int seq = 0;
  for (int step = 0; step < steps; ++step) {
    const int action = static_cast<int>(rng() % 4);
    if (action == 3 && !pods.empty()) {
      auto it = std::next(pods.begin(), static_cast<long>(rng() % pods.size()));
      state->RemovePod(it->first);
      pods.erase(it);
    } else if (action == 2) {
      NodeSpec n = testing::Hgx8H100(StrCat("h", rng() % count));
      n.cpu_milli = 1000 * static_cast<int64_t>(64 + rng() % 64);
      state->UpsertNode(n);
      nodes[std::stoi(n.name.substr(1))] = n;
    } else {
      const std::string node = StrCat("h", rng() % count);
      const DeviceMask free = state->Snapshot()->Find(node)->whole_free;
      PodRequest p = PodBuilder(StrCat("p", ++seq)).Gpus(1).Build();
      if (free != 0)
        p = PodBuilder(StrCat("p", seq)).Gpus(1).OnNode(node, free & (~free + 1)).Build();
      state->UpsertPod(p);
      pods[p.uid] = p;
    }
    if (rng() % 3 != 0) continue;
    auto patched = state->Commit();
    std::vector<PodRequest> all;
    for (const auto& [uid, p] : pods) all.push_back(p);
    auto fresh = MakeState(nodes, all);
    ASSERT_EQ(Describe(*patched), Describe(*fresh->Snapshot())) << "step " << step;
  }
  EXPECT_EQ(Describe(*old), old_text);
}

TEST(ClusterStateTest, PatchedSnapshotsEqualAFullBuild) {
  CheckPatchedSnapshotsEqualAFullBuild(40, 600, 7);
}

TEST(ClusterStateTest, PatchedSnapshotsEqualAFullBuildAcrossChunks) {
  CheckPatchedSnapshotsEqualAFullBuild(2 * ClusterSnapshot::kChunk + 44, 300, 11);
}

// A commit that changes one node copies only that node's chunk: the new
// snapshot shares every other chunk with the one before, and the one
// before still shows the node as it was.
TEST(ClusterStateTest, PatchCopiesOnlyTheChangedChunk) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 3 * ClusterSnapshot::kChunk; ++i) {
    nodes.push_back(testing::Hgx8H100(StrCat("h", i)));
  }
  auto state = MakeState(nodes);
  auto before = state->Snapshot();
  const std::string node = StrCat("h", ClusterSnapshot::kChunk + 5);
  state->UpsertPod(PodBuilder("p").Gpus(1).OnNode(node, Devices({2})).Build());
  auto after = state->Commit();
  EXPECT_EQ(after->SharedChunks(*before), 2);
  EXPECT_EQ(after->Find(node)->whole_free, before->Find(node)->whole_free & ~Devices({2}));
  EXPECT_EQ(before->Find(node)->whole_free, 0xFFu);
  EXPECT_EQ(after->hot(after->FindIndex(node)).whole_free, 0xFFu & ~Devices({2}));
  EXPECT_EQ(before->hot(before->FindIndex(node)).whole_free, 0xFFu);
}

}  // namespace
}  // namespace gpusched
