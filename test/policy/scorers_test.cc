// Table-driven scorer tests. Each case shows its arithmetic (see
// policy/gpu_scorers.h for the formulas).
#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "gpusched/policy/framework.h"
#include "gpusched/policy/placement.h"
#include "gpusched/policy/registry.h"
#include "test/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Devices;
using gpusched::testing::PodBuilder;

int64_t ScoreOf(const ScorePolicy& s, const NodeSpec& node, const std::vector<PodRequest>& running,
                const PodRequest& pod) {
  auto state = gpusched::testing::MakeState({node}, running);
  auto snap = state->Snapshot();
  auto fw = Framework::WithScorers({});
  PodContext ctx = fw->Prepare(pod, *snap);
  return s.Score(ctx, *snap->Find(node.name));
}

TEST(ScorersTest, TopologyTable) {
  auto topo = *MakeScorer("GpuTopology", ScorerParams{});
  PodRequest four = PodBuilder("p").Gpus(4).Build();
  struct Case {
    const char* name;
    NodeSpec node;
    std::vector<PodRequest> running;
    PodRequest pod;
    int64_t want;
  } cases[] = {
      // H100 all NV18: nvl 6/6 -> 70; internal 6*1800 / (6*1800) -> 30. = 100.
      {"h100 four", gpusched::testing::Hgx8H100("h"), {}, four, 100},
      // DGX-1 quad {0,1,2,3}: 70 + 30*900/(6*200) = 70 + 22 = 92.
      {"dgx1 quad", gpusched::testing::Dgx1V100("v"), {}, four, 92},
      // DGX-1 with 1,2,5,6 busy: free {0,3,4,7}: pairs 0-3 NV2, 0-4 NV2, 3-7 NV1, 4-7 NV2,
      // 0-7 SYS, 3-4 SYS: nvl 4/6 -> 46; internal 200+200+100+200+10+10 = 720 ->
      // 30*720/1200 = 18. = 64.
      {"dgx1 cross-socket",
       gpusched::testing::Dgx1V100("v"),
       {PodBuilder("r").Gpus(4).OnNode("v", Devices({1, 2, 5, 6})).Build()},
       four,
       64},
      // 4xT4: PIX pairs 0-1, 2-3 (50), SYS otherwise (10): internal 50+50+4*10 = 140;
      // best pair 50: 0 + 30*140/(6*50) = 14.
      {"t4 four", gpusched::testing::Pcie4xT4("t"), {}, four, 14},
      {"one gpu is neutral",
       gpusched::testing::Pcie4xT4("t"),
       {},
       PodBuilder("p").Gpus(1).Build(),
       100},
      {"topology none is neutral",
       gpusched::testing::Pcie4xT4("t"),
       {},
       PodBuilder("p").Gpus(4).Topology(TopologyMode::kNone).Build(),
       100},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ScoreOf(*topo, c.node, c.running, c.pod), c.want);
  }
}

TEST(ScorersTest, PackingPrefersFullerNodes) {
  auto pack = *MakeScorer("GpuPacking", ScorerParams{});
  PodRequest one = PodBuilder("p").Gpus(1).Build();
  // Empty 8-GPU H100: fill 80*1000/8000 = 10; keep: all-NV18 node, taking one GPU
  // keeps 21 of 28 pairs -> 20*21/28 = 15. = 25.
  EXPECT_EQ(ScoreOf(*pack, gpusched::testing::Hgx8H100("h"), {}, one), 25);
  // Six busy: fill 80*7000/8000 = 70; free {6,7} pair, taking one leaves no pair: keep 0.
  EXPECT_EQ(ScoreOf(*pack, gpusched::testing::Hgx8H100("h"),
                    {PodBuilder("r").Gpus(6).OnNode("h", 0x3f).Build()}, one),
            70);
  ScorerParams spread;
  spread.spread = true;
  auto sp = *MakeScorer("GpuPacking", spread);
  // Spread inverts the fill: empty node 80 - 10 = 70 (+15 keep) beats the busy one (10 + 0).
  EXPECT_GT(ScoreOf(*sp, gpusched::testing::Hgx8H100("h"), {}, one),
            ScoreOf(*sp, gpusched::testing::Hgx8H100("h"),
                    {PodBuilder("r").Gpus(6).OnNode("h", 0x3f).Build()}, one));
}

TEST(ScorersTest, KeepsNvlinkQuadForBigJobs) {
  // DGX-1 V100 with GPUs 4,6,7 busy: free {0,1,2,3,5}. A 1-GPU pod must take 5 and
  // leave the quad {0,1,2,3} intact.
  auto state = gpusched::testing::MakeState(
      {gpusched::testing::Dgx1V100("v")},
      {PodBuilder("r").Gpus(3).OnNode("v", Devices({4, 6, 7})).Build()});
  auto p = ChoosePlacement(PodBuilder("p").Gpus(1).Build().gpu, *state->Snapshot()->Find("v"));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->devices, Devices({5}));
}

TEST(ScorersTest, SharedPodBestFit) {
  // Device 3 has 400 used, device 2 has 700 used, 0 and 1 free: a 300-milli pod goes
  // to device 2 (least free that fits), keeping whole GPUs whole.
  auto state = gpusched::testing::MakeState(
      {gpusched::testing::Pcie4xT4("t")},
      {PodBuilder("a").Gpus(1).Milli(400).OnNode("t", Devices({3})).Build(),
       PodBuilder("b").Gpus(1).Milli(700).OnNode("t", Devices({2})).Build()});
  auto p = ChoosePlacement(PodBuilder("p").Gpus(1).Milli(300).Build().gpu,
                           *state->Snapshot()->Find("t"));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->devices, Devices({2}));
}

// Contract for every registered scorer: built under its own name, in range,
// deterministic, identical nodes score identically, for whole, shared and
// CPU-only pods.
TEST(ScorersTest, Contract) {
  std::set<std::string_view> names;
  for (const ScorerEntry& entry : RegisteredScorers()) {
    SCOPED_TRACE(entry.name);
    EXPECT_TRUE(names.insert(entry.name).second) << "registered twice";
    auto made = MakeScorer(entry.name, ScorerParams{});
    ASSERT_TRUE(made.ok()) << made.status();
    const ScorePolicy& s = **made;
    EXPECT_EQ(s.Name(), entry.name);
    auto state = gpusched::testing::MakeState(
        {gpusched::testing::Dgx1V100("a"), gpusched::testing::Dgx1V100("b"),
         gpusched::testing::Pcie4xT4("t"), gpusched::testing::DgxA100("x")},
        {PodBuilder("r").Gpus(3).OnNode("x", 0x7).Build()});
    auto snap = state->Snapshot();
    auto fw = Framework::WithScorers({});
    std::vector<PodRequest> pods;
    for (int g = 1; g <= 8; ++g) pods.push_back(PodBuilder("p").Gpus(g).Build());
    pods.push_back(PodBuilder("half").Milli(500).Build());
    pods.push_back(PodBuilder("cpu").Gpus(0).Build());
    for (const PodRequest& pod : pods) {
      SCOPED_TRACE(pod.name);
      PodContext ctx = fw->Prepare(pod, *snap);
      for (const auto& n : snap->nodes()) {
        int64_t v = s.Score(ctx, *n);
        EXPECT_GE(v, kMinNodeScore);
        EXPECT_LE(v, kMaxNodeScore);
        EXPECT_EQ(v, s.Score(ctx, *n));
      }
      EXPECT_EQ(s.Score(ctx, *snap->Find("a")), s.Score(ctx, *snap->Find("b")));
    }
  }
  EXPECT_EQ(names.size(), 10u);
  auto unknown = MakeScorer("NoSuchScorer", ScorerParams{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::IsNotFound(unknown.status()));
  EXPECT_NE(unknown.status().message().find("BestFit"), std::string_view::npos);
}

// Every registered scorer can be the whole pipeline.
TEST(ScorersTest, FrameworkBuildsEveryRegisteredScorer) {
  for (const ScorerEntry& entry : RegisteredScorers()) {
    ScoringSpec spec;
    spec.scorers = {{std::string(entry.name), 1, {}}};
    auto fw = Framework::Create(spec);
    ASSERT_TRUE(fw.ok()) << entry.name << ": " << fw.status();
    ASSERT_EQ((*fw)->scorers().size(), 1u);
    EXPECT_EQ((*fw)->scorers()[0].scorer->Name(), entry.name);
  }
  ScoringSpec negative;
  negative.scorers[0].weight = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(Framework::Create(negative).status()));
  ScoringSpec zero;
  zero.scorers[0].weight = 0;
  auto fw = Framework::Create(zero);
  ASSERT_TRUE(fw.ok());
  ASSERT_EQ((*fw)->scorers().size(), 1u);
  EXPECT_EQ((*fw)->scorers()[0].scorer->Name(), "GpuPacking");
}

TEST(ScorersTest, ExtenderScoreRoundsHalfUpToTenths) {
  const std::pair<int64_t, int64_t> kCases[] = {{0, 0},  {4, 0},  {5, 1},   {44, 4},
                                                {45, 5}, {94, 9}, {95, 10}, {100, 10}};
  for (auto [score, want] : kCases) EXPECT_EQ(ExtenderScore(score), want) << score;
}

}  // namespace
}  // namespace gpusched::policy
