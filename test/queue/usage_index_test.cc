// UsageIndex against the walk over every pod (the from-scratch sums), after
// every change of a random sequence of binds and departures, and its shared
// tables: a table taken before later changes still shows the sums of its
// own snapshot (copy on write), which is what a ledger read without the
// queue mutex relies on; the same for the gang sums planners read.
#include "scheduler/queue/usage_index.h"

#include <gtest/gtest.h>

#include <random>

#include "test/testing/builders.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::PodBuilder;

// The capacity a walk over every node gives, in total and per product.
GpuCapacity WalkCapacity(const ClusterSnapshot& snapshot) {
  GpuCapacity c;
  for (const auto& node : snapshot.nodes()) {
    const int64_t milli = NodeCapacityMilli(*node);
    if (milli == 0) continue;
    c.total += milli;
    c.by_product[snapshot.product(*node)] += milli;
  }
  return c;
}

// The sums a walk over every pod of every node gives.
std::map<std::string, NamespaceUse> Walk(const ClusterSnapshot& snapshot) {
  std::map<std::string, NamespaceUse> use;
  for (const auto& node : snapshot.nodes()) {
    for (const PodOnNode& p : node->pods) {
      NamespaceUse& u = use[p.ns];
      const int64_t milli = int64_t{p.gpus} * p.milli_per_gpu;
      u.total += milli;
      ++u.pods;
      u.by_product[snapshot.product(*node)] += milli;
    }
  }
  return use;
}

void ExpectSame(const UsageTable& table, const std::map<std::string, NamespaceUse>& want,
                const std::string& where) {
  ASSERT_EQ(table.rows().size(), want.size()) << where;
  for (const auto& [ns, w] : want) {
    const NamespaceUse* got = table.Find(ns);
    ASSERT_NE(got, nullptr) << where << " " << ns;
    EXPECT_EQ(got->ns, ns) << where;
    EXPECT_EQ(got->total, w.total) << where << " " << ns;
    EXPECT_EQ(got->pods, w.pods) << where << " " << ns;
    EXPECT_EQ(got->by_product, w.by_product) << where << " " << ns;
  }
}

TEST(UsageIndexTest, TablesKeepTheirSumsWhileTheIndexFollowsEveryChange) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::vector<NodeSpec> nodes;
    for (int i = 0; i < 12; ++i) {
      const std::string name = "n" + std::to_string(i);
      nodes.push_back(i % 3 == 0   ? gpusched::testing::Hgx8H100(name)
                      : i % 3 == 1 ? gpusched::testing::DgxA100(name)
                                   : gpusched::testing::Pcie4xT4(name));
    }
    auto state = gpusched::testing::MakeState(nodes, {});
    UsageIndex index;
    std::vector<std::pair<std::shared_ptr<const UsageTable>, std::map<std::string, NamespaceUse>>>
        kept;
    std::vector<std::string> bound;
    for (int step = 0; step < 150; ++step) {
      if (bound.empty() || rng() % 3 != 0) {
        const int node = static_cast<int>(rng() % nodes.size());
        const int devices = node % 3 == 2 ? 4 : 8;
        PodRequest p = PodBuilder("p" + std::to_string(step))
                           .Gpus(1)
                           .OnNode(nodes[node].name, DeviceMask{1} << (rng() % devices))
                           .Build();
        p.ns = "ns-" + std::to_string(rng() % 6);
        if (rng() % 4 == 0) p.gpu.count = 0;  // holds no GPU: not in the sums either way
        state->UpsertPod(p);
        bound.push_back(p.uid);
      } else {
        const size_t k = rng() % bound.size();
        state->RemovePod(bound[k]);
        bound.erase(bound.begin() + static_cast<std::ptrdiff_t>(k));
      }
      if (rng() % 10 == 0) {  // a node is cordoned or uncordoned: its capacity moves
        NodeSpec& n = nodes[rng() % nodes.size()];
        n.unschedulable = !n.unschedulable;
        state->UpsertNode(n);
      }
      auto snapshot = state->Commit();
      index.Update(snapshot);
      const auto want = Walk(*snapshot);
      ExpectSame(*index.Table(), want, "seed " + std::to_string(seed));
      EXPECT_EQ(index.Table()->capacity(), WalkCapacity(*snapshot)) << "seed " << seed;
      if (rng() % 4 == 0) kept.emplace_back(index.Table(), want);
    }
    ASSERT_FALSE(kept.empty());
    for (const auto& [table, want] : kept) ExpectSame(*table, want, "kept table");
  }
}

TEST(UsageIndexTest, TableIsSharedUntilSomethingChanges) {
  auto state = gpusched::testing::MakeState({gpusched::testing::Hgx8H100("a")},
                                            {PodBuilder("p").Gpus(2).OnNode("a", 0b11).Build()});
  UsageIndex index;
  index.Update(state->Snapshot());
  auto first = index.Table();
  EXPECT_EQ(index.Table(), first);  // no copy while nothing changes
  state->UpsertPod(PodBuilder("q").Gpus(1).OnNode("a", 0b100).Build());
  index.Update(state->Commit());
  auto second = index.Table();
  EXPECT_NE(second, first);
  ASSERT_EQ(first->rows().size(), 1u);
  EXPECT_EQ(first->rows()[0]->total, 2000);
  EXPECT_EQ(second->rows()[0]->total, 3000);
}

// Gang sums a walk over every pod of every node gives: "ns/gang" -> node ->
// pods there.
using GangWalk = std::map<std::string, std::map<std::string, int32_t>>;
GangWalk WalkGangs(const ClusterSnapshot& snapshot) {
  GangWalk out;
  for (const auto& node : snapshot.nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (!p.gang.empty()) ++out[p.ns + "/" + p.gang][node->name];
    }
  }
  return out;
}

// The pods of gang `gang` of `ns` the walk found on all nodes.
int32_t WalkHeld(const GangWalk& want, const std::string& ns, const std::string& gang) {
  auto it = want.find(ns + "/" + gang);
  int32_t held = 0;
  if (it != want.end()) {
    for (const auto& [node, pods] : it->second) held += pods;
  }
  return held;
}

void ExpectSameGangs(const GangUsage& got, const GangWalk& want, const std::string& where) {
  EXPECT_EQ(got.size(), want.size()) << where;
  for (int g = 0; g < 4; ++g) {
    for (int n = 0; n < 3; ++n) {
      const std::string ns = "ns-" + std::to_string(n), gang = "g" + std::to_string(g);
      auto it = want.find(ns + "/" + gang);
      EXPECT_EQ(got.Held(ns, gang), WalkHeld(want, ns, gang)) << where << " " << ns << "/" << gang;
      const auto* nodes = got.Nodes(ns, gang);
      if (it == want.end()) {
        EXPECT_EQ(nodes, nullptr) << where;
        continue;
      }
      ASSERT_NE(nodes, nullptr) << where << " " << ns << "/" << gang;
      std::map<std::string, int32_t> sorted(nodes->begin(), nodes->end());
      EXPECT_EQ(sorted, it->second) << where << " " << ns << "/" << gang;
    }
  }
}

// A gang table handed to planners keeps its counts while the index goes on
// changing the gangs in place (copy on write); the index's own table always
// equals the walk.
TEST(UsageIndexTest, PublishedGangTablesKeepTheirCountsWhileTheIndexChanges) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::vector<NodeSpec> nodes;
    for (int i = 0; i < 6; ++i)
      nodes.push_back(gpusched::testing::DgxA100("n" + std::to_string(i)));
    auto state = gpusched::testing::MakeState(nodes, {});
    UsageIndex index;
    std::vector<std::pair<std::shared_ptr<const GangUsage>, GangWalk>> kept;
    std::vector<std::string> bound;
    std::map<std::string, DeviceMask> used;  // node -> devices taken
    for (int step = 0; step < 200; ++step) {
      const std::string& node = nodes[rng() % nodes.size()].name;
      const DeviceMask free = ~used[node] & 0xff;
      if (free != 0 && (bound.empty() || rng() % 3 != 0)) {
        const DeviceMask device = free & -free;
        PodRequest p = PodBuilder("p" + std::to_string(step))
                           .Gpus(1)
                           .Gang("g" + std::to_string(rng() % 4), 4)
                           .OnNode(node, device)
                           .Build();
        p.ns = "ns-" + std::to_string(rng() % 3);
        used[node] |= device;
        state->UpsertPod(p);
        bound.push_back(p.uid);
      } else if (!bound.empty()) {
        const size_t k = rng() % bound.size();
        auto gone = state->FindPod(bound[k]);
        ASSERT_TRUE(gone.has_value());
        used[gone->node_name] &= ~gone->gpu_ids;
        state->RemovePod(bound[k]);
        bound.erase(bound.begin() + static_cast<std::ptrdiff_t>(k));
      }
      auto snapshot = state->Commit();
      index.Update(snapshot);
      const GangWalk want = WalkGangs(*snapshot);
      const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      if (rng() % 3 == 0) {
        kept.emplace_back(index.Gangs(), want);
        ExpectSameGangs(*kept.back().first, want, where);
      }
      for (int g = 0; g < 4; ++g) {
        for (int n = 0; n < 3; ++n) {
          const std::string ns = "ns-" + std::to_string(n), gang = "g" + std::to_string(g);
          ASSERT_EQ(index.GangHeld(ns, gang), WalkHeld(want, ns, gang)) << where;
        }
      }
    }
    ASSERT_GT(kept.size(), 10u);
    for (size_t i = 0; i < kept.size(); ++i) {
      ExpectSameGangs(*kept[i].first, kept[i].second, "kept table " + std::to_string(i));
    }
  }
}

TEST(UsageIndexTest, GangTableIsSharedUntilAGangChanges) {
  auto state = gpusched::testing::MakeState(
      {gpusched::testing::DgxA100("a"), gpusched::testing::DgxA100("b")},
      {PodBuilder("p").Gpus(1).Gang("g", 2).OnNode("a", 0b1).Build()});
  UsageIndex index;
  index.Update(state->Snapshot());
  auto first = index.Gangs();
  EXPECT_EQ(index.Gangs(), first);  // nothing changed: the same table
  // A node without gang pods changes: the table is not copied.
  state->UpsertPod(PodBuilder("q").Gpus(1).OnNode("b", 0b1).Build());
  index.Update(state->Commit());
  EXPECT_EQ(index.Gangs(), first) << "a change without gang pods copied the gang table";
  // A member joins: a new table; the first one still shows one member.
  state->UpsertPod(PodBuilder("r").Gpus(1).Gang("g", 2).OnNode("b", 0b10).Build());
  index.Update(state->Commit());
  auto second = index.Gangs();
  EXPECT_NE(second, first);
  EXPECT_EQ(first->Held("default", "g"), 1);
  EXPECT_EQ(second->Held("default", "g"), 2);
}

}  // namespace
}  // namespace gpusched::queue
