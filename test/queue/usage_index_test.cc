// UsageIndex against the walk over every pod (the from-scratch sums), after
// every change of a random sequence of binds and departures, and its shared
// tables: a table taken before later changes still shows the sums of its
// own snapshot (copy on write), which is what a ledger read without the
// queue mutex relies on.
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

}  // namespace
}  // namespace gpusched::queue
