// DomainFit (policy/domain_fit.h): best fit applied to topology domains for
// single pods. Hand-computed scores on small rack clusters, the choice it
// changes (a pod goes to the partly used rack, not the whole one), the
// policy file's scoring.domainWeight, and that without levels the
// framework scores exactly as without DomainFit.
#include "policy/domain_fit.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "gpusched/model/topology_domains.h"
#include "gpusched/policy/framework.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/policy/registry.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/config_codec.h"
#include "test/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::PodBuilder;

constexpr char kBlock[] = "cloud.provider.com/topology-block";
constexpr char kRack[] = "cloud.provider.com/topology-rack";

// An 8-GPU H100 node in `rack` of `block` ("" leaves a label out).
NodeSpec Node(const std::string& name, const std::string& block, const std::string& rack) {
  NodeSpec n = gpusched::testing::Hgx8H100(name);
  NodeLabels labels = {{std::string(kHostnameLevel), name}};
  if (!block.empty()) labels.emplace_back(kBlock, block);
  if (!rack.empty()) labels.emplace_back(kRack, rack);
  std::sort(labels.begin(), labels.end());
  n.labels = std::make_shared<const NodeLabels>(std::move(labels));
  return n;
}

PodRequest Using(const std::string& node, int gpus) {
  DeviceMask m = 0;
  for (int d = 0; d < gpus; ++d) m |= DeviceMask{1} << d;
  return PodBuilder("on-" + node).Gpus(gpus).OnNode(node, m).Build();
}

// Racks r1, r2 (block b1) and r3 (block b2) of two nodes (16 GPUs each),
// and u0 with no rack or block label. In use: 4 GPUs of r1 (a0), none of
// r2, 10 of r3 (c0 full, 2 on c1).
std::unique_ptr<ClusterState> ThreeRacks() {
  return gpusched::testing::MakeState(
      {Node("a0", "b1", "r1"), Node("a1", "b1", "r1"), Node("b0", "b1", "r2"),
       Node("b1", "b1", "r2"), Node("c0", "b2", "r3"), Node("c1", "b2", "r3"), Node("u0", "", "")},
      {Using("a0", 4), Using("c0", 8), Using("c1", 2)});
}

TEST(DomainFitTest, ScoresTable) {
  auto state = ThreeRacks();
  auto snap = state->Snapshot();
  const PodRequest one = PodBuilder("p").Gpus(1).Build();
  const PodRequest cpu = PodBuilder("cpu").Build();
  const struct {
    const char* name;
    std::vector<std::string> levels;
    const PodRequest* pod;
    std::map<std::string, int64_t> want;
  } kCases[] = {
      // Racks: r1 16 healthy, 12 free -> 50 + 50*4/16 = 62; r2 whole -> 0;
      // r3 10 used -> 50 + 50*10/16 = 81; u0 in no rack -> 100.
      {"racks", {kRack}, &one, {{"a0", 62}, {"a1", 62}, {"b0", 0}, {"c1", 81}, {"u0", 100}}},
      {"hostname is not a level", {kRack, kHostnameLevel}, &one, {{"a0", 62}, {"b0", 0}}},
      // Blocks: b1 32 healthy, 4 used -> 50 + 50*4/32 = 56; b2 = r3 -> 81.
      {"blocks", {kBlock}, &one, {{"a0", 56}, {"b0", 56}, {"c1", 81}, {"u0", 100}}},
      // Both: the mean. a: (56 + 62)/2 = 59; b: (56 + 0)/2 = 28; c: 81.
      {"blocks and racks",
       {kBlock, kRack},
       &one,
       {{"a0", 59}, {"b1", 28}, {"c1", 81}, {"u0", 100}}},
      {"a pod without GPUs", {kBlock, kRack}, &cpu, {{"a0", 100}, {"b0", 100}}},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    ScoringSpec spec;
    spec.scorers.clear();
    spec.topology_levels = c.levels;
    spec.domain_weight = 1;
    auto fw = Framework::Create(spec);
    ASSERT_TRUE(fw.ok()) << fw.status();
    ASSERT_EQ((*fw)->scorers().size(), 1u);
    const PodContext ctx = (*fw)->Prepare(*c.pod, *snap);
    for (const auto& [node, want] : c.want) {
      EXPECT_EQ((*fw)->scorers()[0].scorer->Score(ctx, *snap->Find(node)), want) << node;
    }
  }
}

// The node scored may be a copy (preemption planning, a gang's members
// placed one after another): it scores as its domain does in the snapshot,
// found by its labels or, for labels the snapshot does not hold, by name.
TEST(DomainFitTest, CopiesOfANodeScoreAsItsDomain) {
  auto state = ThreeRacks();
  auto snap = state->Snapshot();
  const DomainFitScorer scorer({kBlock, kRack});
  const PodRequest one = PodBuilder("p").Gpus(1).Build();
  auto fw = Framework::WithScorers({});
  const PodContext ctx = fw->Prepare(one, *snap);  // no memo: built per call
  const NodeInfo& b0 = *snap->Find("b0");
  const NodeInfo busier = WithPod(b0, PodBuilder("x").Gpus(8).Build(), 0xff);
  EXPECT_EQ(scorer.Score(ctx, busier), 28);
  NodeInfo relabelled = b0;
  relabelled.labels = std::make_shared<const NodeLabels>(*b0.labels);
  EXPECT_EQ(scorer.Score(ctx, relabelled), 28);
  relabelled.labels = nullptr;
  EXPECT_EQ(scorer.Score(ctx, relabelled), 100);
}

// The shipped scoring (GpuTopology 10, FragLookahead 90): index of the node
// that scores best (ties: the first), as the extender's 0..10 answer ranks.
int32_t Best(const Framework& fw, const ClusterSnapshot& snap, const PodRequest& pod) {
  const PodContext ctx = fw.Prepare(pod, snap);
  FilterMemo memo(fw, ctx);
  int32_t best = -1;
  int64_t best_score = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(snap.nodes().size()); ++i) {
    if (!memo.Filter(snap.hot(i)).fits()) continue;
    const int64_t s = ExtenderScore(memo.Score(snap.hot(i)));
    if (s > best_score) best = i, best_score = s;
  }
  return best;
}

ScoringSpec Shipped(std::vector<std::string> levels, int domain_weight) {
  ScoringSpec spec;
  spec.scorers = {{"GpuTopology", 10, {}}, {"FragLookahead", 90, {}}};
  spec.topology_levels = std::move(levels);
  spec.domain_weight = domain_weight;
  return spec;
}

TEST(DomainFitTest, APodGoesToThePartlyUsedRackNotTheWholeOne) {
  // Rack r2 (first in node order) whole; rack r1: x0 full, x1 empty. Every
  // empty node is the same to the node scorers, so without DomainFit the
  // first, a0, wins and breaks the whole rack.
  auto state = gpusched::testing::MakeState(
      {Node("a0", "b", "r2"), Node("a1", "b", "r2"), Node("x0", "b", "r1"), Node("x1", "b", "r1")},
      {Using("x0", 8)});
  auto snap = state->Snapshot();
  const auto name = [&](int32_t i) { return i < 0 ? std::string("none") : snap->nodes()[i]->name; };
  for (int gpus : {8, 4, 1}) {
    SCOPED_TRACE(StrCat(gpus, " GPUs"));
    const PodRequest pod = PodBuilder("p").Gpus(gpus).Build();
    auto before = Framework::Create(Shipped({kRack}, 0));
    auto with = Framework::Create(Shipped({kRack}, kMeasuredDomainWeight));
    ASSERT_TRUE(before.ok() && with.ok());
    EXPECT_EQ(name(Best(**before, *snap, pod)), "a0");
    EXPECT_EQ(name(Best(**with, *snap, pod)), "x1");
  }
}

// A cluster of racks with random use; half the nodes labelled.
std::unique_ptr<ClusterState> RandomRacks(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<NodeSpec> nodes;
  std::vector<PodRequest> pods;
  for (int i = 0; i < 64; ++i) {
    const std::string n = StrCat("n", i);
    nodes.push_back(i % 9 == 8 ? Node(n, "", "")
                               : Node(n, StrCat("b", i / 32), StrCat("r", i / 8)));
    const int used = static_cast<int>(rng() % 9);
    if (used > 0 && rng() % 2 == 0) pods.push_back(Using(n, used));
  }
  return gpusched::testing::MakeState(nodes, pods);
}

// Without levels (none, or only the node) DomainFit is not in the
// framework: every score, and so every choice, is what the scorers alone
// give, whatever scoring.domainWeight says.
TEST(DomainFitTest, WithoutLevelsScoresAreUnchanged) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto state = RandomRacks(seed);
    auto snap = state->Snapshot();
    auto alone = Framework::Create(Shipped({}, 0));
    ASSERT_TRUE(alone.ok());
    for (const std::vector<std::string>& levels :
         {std::vector<std::string>{}, std::vector<std::string>{kHostnameLevel}}) {
      auto fw = Framework::Create(Shipped(levels, 100));
      ASSERT_TRUE(fw.ok());
      ASSERT_EQ((*fw)->scorers().size(), 2u);
      for (int gpus : {1, 2, 4, 8}) {
        const PodRequest pod = PodBuilder("p").Gpus(gpus).Build();
        const PodContext a = (*alone)->Prepare(pod, *snap), b = (*fw)->Prepare(pod, *snap);
        EXPECT_EQ(b.memo, nullptr);
        for (const NodeInfo* n : snap->nodes()) {
          if (!(*alone)->Filter(a, *n).fits()) continue;
          ASSERT_EQ((*fw)->Score(b, *n), (*alone)->Score(a, *n)) << seed << " " << n->name;
        }
        EXPECT_EQ(Best(**fw, *snap, pod), Best(**alone, *snap, pod));
      }
    }
  }
}

// FilterMemo caches the node scorers per GPU state and adds DomainFit per
// node: the same answer as Framework::Score on every node.
TEST(DomainFitTest, FilterMemoAnswersWhatTheFrameworkAnswers) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto state = RandomRacks(seed);
    auto snap = state->Snapshot();
    auto fw = Framework::Create(Shipped({kBlock, kRack}, kMeasuredDomainWeight));
    ASSERT_TRUE(fw.ok());
    ASSERT_EQ((*fw)->scorers().size(), 3u);
    for (int gpus : {1, 2, 4, 8}) {
      const PodRequest pod = PodBuilder("p").Gpus(gpus).Build();
      const PodContext ctx = (*fw)->Prepare(pod, *snap);
      FilterMemo memo(**fw, ctx);
      for (int32_t i = 0; i < static_cast<int32_t>(snap->nodes().size()); ++i) {
        if (!memo.Filter(snap->hot(i)).fits()) continue;
        ASSERT_EQ(memo.Score(snap->hot(i)), (*fw)->Score(ctx, *snap->hot(i).info)) << seed << i;
      }
    }
  }
}

TEST(DomainFitConfig, WeightDefaultsWithLevelsAndErrorsNameTheField) {
  auto on =
      codec::DecodeConfig(R"({"gang": {"topologyLevels": ["cloud.provider.com/topology-rack"]}})");
  ASSERT_TRUE(on.ok()) << on.status();
  // Off unless set (kDefaultDomainWeight); the levels reach the spec.
  EXPECT_EQ(on->scoring.domain_weight, 0);
  EXPECT_EQ(on->scoring.topology_levels, std::vector<std::string>{kRack});
  EXPECT_EQ((*Framework::Create(on->scoring))->scorers().size(), on->scoring.scorers.size());
  auto set = codec::DecodeConfig(
      R"({"scoring": {"domainWeight": 7},
          "gang": {"topologyLevels": ["cloud.provider.com/topology-rack"]}})");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->scoring.domain_weight, 7);
  auto set_fw = Framework::Create(set->scoring);
  ASSERT_TRUE(set_fw.ok());
  ASSERT_EQ((*set_fw)->scorers().size(), set->scoring.scorers.size() + 1);
  EXPECT_EQ((*set_fw)->scorers().back().scorer->Name(), "DomainFit");
  EXPECT_EQ((*set_fw)->scorers().back().weight, 7);
  auto off = codec::DecodeConfig(R"({"scoring": {"domainWeight": 0}})");
  ASSERT_TRUE(off.ok()) << off.status();
  auto none = codec::DecodeConfig("{}");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->scoring.topology_levels.empty());
  const struct {
    const char* config;
    const char* error;
  } kCases[] = {
      {R"({"scoring": {"domainWeight": 101}})",
       "scoring.domainWeight: must be in [0, 100], got 101"},
      {R"({"scoring": {"domainWeight": -1}})", "scoring.domainWeight: must be in [0, 100], got -1"},
      {R"({"scoring": {"domainWeight": "high"}})", "scoring.domainWeight: must be an integer"},
      {R"({"scoring": {"domainWeight": 5}})",
       "scoring.domainWeight: scores topology domains and needs gang.topologyLevels with a level "
       "above kubernetes.io/hostname (or set it to 0)"},
      {R"({"scoring": {"domainWeight": 5}, "gang": {"topologyLevels": ["kubernetes.io/hostname"]}})",
       "scoring.domainWeight: scores topology domains and needs gang.topologyLevels with a level "
       "above kubernetes.io/hostname (or set it to 0)"},
  };
  for (const auto& c : kCases) {
    auto config = codec::DecodeConfig(c.config);
    ASSERT_FALSE(config.ok()) << c.config;
    EXPECT_EQ(config.status().message(), c.error) << c.config;
  }
}

}  // namespace
}  // namespace gpusched::policy
