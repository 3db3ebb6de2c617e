// The topology comparison's slowdown models (topo_slowdown.h): the levels
// model's factors on hand-computed placements of both cluster shapes, its
// defaults against the arithmetic of their sources, the span model, and
// the flags' parsing.
#include "scheduler/sim/topo_slowdown.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpusched::sim {
namespace {

TopoJob Gang(int pods, int per_pod, const char* level) {
  TopoJob j;
  j.gang = true;
  j.pods = pods;
  j.gpus_per_pod = per_pod;
  j.level = level;
  return j;
}

// Factors chosen so every ratio below is distinct.
constexpr LevelSlowdowns kHand{
    .nodes = 1.1, .racks = 1.3, .blocks = 2.0, .clique_nodes = 1.2, .cliques = 5.0};

struct Case {
  const char* what;
  TopoJob job;
  std::vector<int> nodes;
  double want;
};

// racks:2x2x2: blocks 0 (racks 0: nodes 0,1; 1: nodes 2,3) and 1 (racks 2:
// nodes 4,5; 3: nodes 6,7); racks of 16 GPUs, blocks of 32.
TEST(LevelSlowdown, RackClusterByHighestLevelCrossed) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));
  const SlowdownOptions o{.model = SlowdownModel::kLevels, .levels = kHand};
  TopoJob single;
  single.gpus_per_pod = 8;
  const Case cases[] = {
      // 16 GPUs must cross nodes (F 1.1): its best.
      {"16 in one rack", Gang(2, 8, kRackLabel), {0, 1}, 1.0},
      {"16 over two racks of a block", Gang(2, 8, kRackLabel), {0, 2}, 1.3 / 1.1},
      {"16 over two blocks", Gang(2, 8, kRackLabel), {0, 4}, 2.0 / 1.1},
      // 32 GPUs must cross racks (F 1.3).
      {"32 in one block", Gang(4, 8, kBlockLabel), {0, 1, 2, 3}, 1.0},
      {"32 over two blocks", Gang(4, 8, kBlockLabel), {0, 1, 2, 4}, 2.0 / 1.3},
      // 48 GPUs must cross blocks: at its best over two.
      {"48 over two blocks", Gang(6, 8, kBlockLabel), {0, 1, 2, 3, 4, 5}, 1.0},
      // Two 6-GPU members on one node: better than forced, never below 1.
      {"12 on one node", Gang(2, 6, kRackLabel), {3, 3}, 1.0},
      {"single pod", single, {5}, 1.0},
  };
  for (const Case& k : cases) {
    EXPECT_NEAR(GangSlowdown(c, k.job, k.nodes, o), k.want, 1e-12) << k.what;
  }
  EXPECT_EQ(HighestCrossed(c, {0, 1}), 2);  // hostname
  EXPECT_EQ(HighestCrossed(c, {0, 2}), 1);  // rack
  EXPECT_EQ(HighestCrossed(c, {3, 7}), 0);  // block
  EXPECT_EQ(HighestCrossed(c, {6, 6}), -1);
  EXPECT_EQ(ForcedCrossing(c, 8), -1);
  EXPECT_EQ(ForcedCrossing(c, 9), 2);
  EXPECT_EQ(ForcedCrossing(c, 17), 1);
  EXPECT_EQ(ForcedCrossing(c, 33), 0);
}

// cliques:2x3: cliques 0 (nodes 0-2) and 1 (nodes 3-5) of 12 GPUs.
TEST(LevelSlowdown, CliqueClusterNodesAndCliques) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("cliques:2x3"));
  const SlowdownOptions o{.model = SlowdownModel::kLevels, .levels = kHand};
  const Case cases[] = {
      {"8 in one clique", Gang(2, 4, kCliqueLabel), {0, 2}, 1.0},
      {"8 over two cliques", Gang(2, 4, kCliqueLabel), {0, 3}, 5.0 / 1.2},
      {"16 over two cliques (forced)", Gang(4, 4, kCliqueLabel), {0, 1, 2, 3}, 1.0},
  };
  for (const Case& k : cases) {
    EXPECT_NEAR(GangSlowdown(c, k.job, k.nodes, o), k.want, 1e-12) << k.what;
  }
  // The hostname level is an NVLink crossing here, an InfiniBand one on racks.
  EXPECT_DOUBLE_EQ(LevelFactor(c, kHand, 1), 1.2);
  EXPECT_DOUBLE_EQ(LevelFactor(MakeTopoCluster(*ParseTopoShape("racks:1x1x2")), kHand, 2), 1.1);
}

// The span model charges racks of one block as racks of two: what the
// levels model is for.
TEST(SpanSlowdown, OnePlusSPerExtraDomainBlindToBlocks) {
  struct SpanCase {
    double s;
    int domains;
    double want;
  };
  for (const SpanCase& k : {SpanCase{0.25, 1, 1.0}, SpanCase{0.25, 2, 1.25}, SpanCase{0.25, 3, 1.5},
                            SpanCase{1.0, 4, 4.0}, SpanCase{0.0, 5, 1.0}, SpanCase{0.25, 0, 1.0}}) {
    EXPECT_DOUBLE_EQ(SpanSlowdown(k.s, k.domains), k.want) << k.s << " " << k.domains;
  }
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));
  const SlowdownOptions span{.model = SlowdownModel::kSpan, .span = 0.25};
  EXPECT_DOUBLE_EQ(GangSlowdown(c, Gang(2, 8, kRackLabel), {0, 2}, span), 1.25);
  EXPECT_DOUBLE_EQ(GangSlowdown(c, Gang(2, 8, kRackLabel), {0, 4}, span), 1.25);
}

// F = 0.75 + 0.25 x bandwidth ratio: 470/425 = 1.105882...,
// 470 x 4/425 = 4.423529..., and 18 for the clique's scale-out.
TEST(LevelSlowdown, DefaultsFollowTheirSources) {
  const LevelSlowdowns d;
  EXPECT_NEAR(d.nodes, 1.0264705882, 1e-9);
  EXPECT_NEAR(d.racks, 1.0264705882, 1e-9);
  EXPECT_NEAR(d.blocks, 1.8558823529, 1e-9);
  EXPECT_DOUBLE_EQ(d.clique_nodes, 1.0);
  EXPECT_DOUBLE_EQ(d.cliques, 5.25);
}

TEST(LevelSlowdown, FlagsParseOverTheDefaultsAndNameTheFlag) {
  auto f = ParseLevelSlowdowns("racks=1.2,blocks=2,cliques=3");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ(f->racks, 1.2);
  EXPECT_DOUBLE_EQ(f->blocks, 2);
  EXPECT_DOUBLE_EQ(f->cliques, 3);
  EXPECT_DOUBLE_EQ(f->nodes, LevelSlowdowns{}.nodes);
  EXPECT_DOUBLE_EQ(f->clique_nodes, 1.0);
  ASSERT_TRUE(ParseLevelSlowdowns("").ok());
  for (const char* bad : {"rows=2", "racks=0.5", "racks=abc", "racks", "cliques=inf", "blocks=1e9",
                          "nodes=2,spine=3"}) {
    auto b = ParseLevelSlowdowns(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("--level-slowdown"), std::string::npos) << b.status();
  }
  EXPECT_EQ(*ParseSlowdownModel("span"), SlowdownModel::kSpan);
  EXPECT_EQ(*ParseSlowdownModel("levels"), SlowdownModel::kLevels);
  EXPECT_EQ(SlowdownModelName(SlowdownModel::kSpan), "span");
  auto bad = ParseSlowdownModel("tree");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--slowdown-model"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::sim
