// The topology domains cache (CachedDomainsAt, one per snapshot labels
// epoch): equal to a recomputation on every snapshot, through random pod,
// node, label and node-set changes; shared while only pods or unlabelled
// node fields change; new after a label or node-set change.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpusched/core/cluster_state.h"
#include "gpusched/model/topology_domains.h"
#include "gpusched/util/strings.h"
#include "test/testing/builders.h"

namespace gpusched {
namespace {

using testing::Hgx8H100;
using testing::MakeState;
using testing::PodBuilder;

constexpr const char* kBlock = testing::kBlockLabel;
constexpr const char* kRack = testing::kRackLabel;
constexpr auto Labelled = &testing::Hgx8H100InRack;

void ExpectEqual(const TopologyDomains& a, const TopologyDomains& b, int step) {
  EXPECT_EQ(a.level, b.level) << "step " << step;
  EXPECT_EQ(a.names, b.names) << "step " << step;
  EXPECT_EQ(a.nodes, b.nodes) << "step " << step;
  EXPECT_EQ(a.domain_of, b.domain_of) << "step " << step;
  EXPECT_EQ(a.unlabelled, b.unlabelled) << "step " << step;
}

TEST(DomainsCacheTest, EqualsARecomputationThroughRandomChanges) {
  std::mt19937 rng(30);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  auto random_node = [&](const std::string& name) {
    const std::string rack = pick(6) == 0 ? "" : StrCat("r", pick(5));
    return Labelled(name, rack, pick(6) == 0 ? "" : StrCat("b", pick(2)));
  };
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 20; ++i) nodes.push_back(random_node(StrCat("n", i)));
  auto state = MakeState(nodes);
  int seq = 0, hits = 0, misses = 0;
  std::shared_ptr<const ClusterSnapshot> last = state->Snapshot();
  for (int step = 0; step < 400; ++step) {
    const int action = pick(10);
    const std::string name = StrCat("n", pick(24));  // n20..n23: added, removed
    bool labels_may_change = true;
    if (action < 5) {
      PodRequest p = PodBuilder(StrCat("p", ++seq)).Gpus(1).OnNode(name, 1u << pick(8)).Build();
      state->UpsertPod(p);
      labels_may_change = false;
    } else if (action < 7) {
      // The same labels in a new object, another CPU figure: not a label change.
      const NodeInfo* now = state->Snapshot()->Find(name);
      if (now == nullptr) continue;
      NodeSpec n = Hgx8H100(name);
      n.cpu_milli = 1000 * (32 + pick(64));
      if (now->labels != nullptr) n.labels = std::make_shared<const NodeLabels>(*now->labels);
      state->UpsertNode(n);
      labels_may_change = false;
    } else if (action < 9) {
      state->UpsertNode(random_node(name));
    } else {
      state->RemoveNode(name);
    }
    auto snap = state->Commit();
    const bool same_epoch = &snap->labels_epoch() == &last->labels_epoch();
    if (!labels_may_change) {
      EXPECT_TRUE(same_epoch) << "step " << step;
    }
    for (const char* level : {kBlock, kRack, kHostnameLevel}) {
      const auto before = snap->labels_epoch().domains.load();
      auto cached = CachedDomainsAt(*snap, level);
      const bool hit = before != nullptr && before == snap->labels_epoch().domains.load();
      (hit ? hits : misses) += 1;
      ExpectEqual(*cached, DomainsAt(*snap, level), step);
      // Asked again: the same object.
      EXPECT_EQ(CachedDomainsAt(*snap, level).get(), cached.get()) << "step " << step;
    }
    last = snap;
  }
  // The cache was used, and recomputed after changes.
  EXPECT_GE(hits, 300);
  EXPECT_GE(misses, 100);
}

TEST(DomainsCacheTest, ALabelChangeStartsANewEpochAndOlderSnapshotsKeepTheirs) {
  auto state = MakeState({Labelled("a", "r1", "b1"), Labelled("b", "r1", "b1")});
  auto before = state->Snapshot();
  auto old = CachedDomainsAt(*before, kRack);
  ASSERT_EQ(old->names, (std::vector<std::string>{"r1"}));
  state->UpsertPod(PodBuilder("p").Gpus(1).OnNode("a", 1).Build());
  auto pods_only = state->Commit();
  EXPECT_EQ(CachedDomainsAt(*pods_only, kRack).get(), old.get());
  state->UpsertNode(Labelled("b", "r2", "b1"));
  auto relabelled = state->Commit();
  EXPECT_EQ(CachedDomainsAt(*relabelled, kRack)->names, (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(CachedDomainsAt(*before, kRack).get(), old.get());
  EXPECT_EQ(CachedDomainsAt(*pods_only, kRack)->names, (std::vector<std::string>{"r1"}));
}

}  // namespace
}  // namespace gpusched
