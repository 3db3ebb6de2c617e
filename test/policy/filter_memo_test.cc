// FilterMemo answers what Framework::Filter and Framework::Score answer, for
// every node of a randomly filled cluster and every scorer configuration:
// the memo's keys (GPU state, plus free CPU for the fragmentation scorers)
// must capture everything the policies read.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>

#include "gpusched/policy/framework.h"
#include "test/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::PodBuilder;

std::unique_ptr<ClusterState> RandomCluster(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<NodeSpec> nodes;
  std::vector<PodRequest> pods;
  for (int i = 0; i < 120; ++i) {
    const std::string name = "n" + std::to_string(i);
    switch (i % 4) {
      case 0:
        nodes.push_back(gpusched::testing::Dgx1V100(name));
        break;
      case 1:
        nodes.push_back(gpusched::testing::DgxA100(name));
        break;
      case 2:
        nodes.push_back(gpusched::testing::Hgx8H100(name));
        break;
      default:
        nodes.push_back(gpusched::testing::Pcie4xT4(name));
    }
    const int gpus = i % 4 == 3 ? 4 : 8;
    // Few distinct device states, many CPU loads: nodes share GPU state but
    // not free CPU, which the fragmentation scorers read.
    DeviceMask used = 0;
    const int busy = static_cast<int>(rng() % 3) * 2;
    for (int d = 0; d < busy; ++d) used |= DeviceMask{1} << d;
    if (used != 0) {
      PodRequest p = PodBuilder("p" + std::to_string(i)).Gpus(busy).OnNode(name, used).Build();
      p.cpu_milli = 1000 * static_cast<int64_t>(rng() % 40);
      pods.push_back(p);
    }
    if (rng() % 3 == 0) {
      PodRequest cpu = PodBuilder("c" + std::to_string(i)).Build();
      cpu.node_name = name;
      cpu.cpu_milli = 4000 * static_cast<int64_t>(1 + rng() % 8);
      pods.push_back(cpu);
    }
    if (gpus == 8 && rng() % 5 == 0) {
      // A shared device: the memo must not be used for this node.
      PodRequest half = PodBuilder("h" + std::to_string(i)).Milli(500).OnNode(name, 0x80).Build();
      pods.push_back(half);
    }
  }
  return gpusched::testing::MakeState(nodes, pods);
}

ScoringSpec Fragmentation(const std::string& scorer) {
  ScorerParams params;
  params.capacity = scorer == "FragLookahead" ? 0.5 : 0;
  ScoringSpec c;
  c.scorers = {{"GpuTopology", 10, params}, {scorer, 90, params}};
  return c;
}

TEST(FilterMemoTest, AnswersWhatTheFrameworkAnswers) {
  ScoringSpec spread;
  spread.scorers[1].params.spread = true;
  const std::vector<std::pair<std::string, ScoringSpec>> configs = {
      {"default", ScoringSpec{}},
      {"spread", spread},
      {"fgd", Fragmentation("Fgd")},
      {"lookahead", Fragmentation("FragLookahead")}};
  std::vector<PodRequest> pods = {PodBuilder("one").Gpus(1).Build(),
                                  PodBuilder("two").Gpus(2).Build(),
                                  PodBuilder("four").Gpus(4).Build(),
                                  PodBuilder("eight").Gpus(8).Build(),
                                  PodBuilder("a100").Gpus(2).Models({"A100"}).Build(),
                                  PodBuilder("quarter").Milli(250).Build()};
  pods[1].cpu_milli = 16000;
  pods[2].cpu_milli = 48000;
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto state = RandomCluster(seed);
    auto snap = state->Snapshot();
    for (const auto& [config_name, config] : configs) {
      auto fw = Framework::Create(config);
      ASSERT_TRUE(fw.ok()) << config_name;
      for (const PodRequest& pod : pods) {
        PodContext ctx = (*fw)->Prepare(pod, *snap);
        FilterMemo memo(**fw, ctx);
        int fits = 0;
        for (int32_t i = 0; i < static_cast<int32_t>(snap->nodes().size()); ++i) {
          const NodeHot& hot = snap->hot(i);
          const FilterResult want = (*fw)->Filter(ctx, *hot.info);
          const FilterResult& got = memo.Filter(hot);
          const std::string where =
              config_name + " seed " + std::to_string(seed) + " " + pod.name + " " + hot.info->name;
          ASSERT_EQ(got.verdict, want.verdict) << where;
          ASSERT_EQ(got.reason, want.reason) << where;
          if (!want.fits()) continue;
          ++fits;
          ASSERT_EQ(memo.Score(hot), (*fw)->Score(ctx, *hot.info)) << where;
        }
        EXPECT_GT(fits, 0) << config_name << " " << pod.name;
      }
    }
  }
}

// More node states than the memo's direct-mapped front slots: states that
// share a slot evict each other, and every node, asked again in another
// order, still gets its own state's answer and score.
TEST(FilterMemoTest, ManyNodeStatesSharingCacheSlotsKeepTheirOwnAnswers) {
  std::mt19937 rng(11);
  std::vector<NodeSpec> nodes;
  std::vector<PodRequest> pods;
  for (int i = 0; i < 400; ++i) {
    const std::string name = "n" + std::to_string(i);
    nodes.push_back(i % 2 == 0 ? gpusched::testing::Hgx8H100(name)
                               : gpusched::testing::DgxA100(name));
    const auto used = static_cast<DeviceMask>(rng() % 255);  // never all 8 busy
    if (used != 0) {
      pods.push_back(PodBuilder("p" + std::to_string(i))
                         .Gpus(std::popcount(static_cast<unsigned>(used)))
                         .OnNode(name, used)
                         .Build());
    }
  }
  auto state = gpusched::testing::MakeState(nodes, pods);
  auto snap = state->Snapshot();
  auto fw = Framework::Create(Fragmentation("FragLookahead"));
  ASSERT_TRUE(fw.ok());
  std::vector<int32_t> order(snap->nodes().size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  for (int gpus : {1, 2, 3}) {
    const PodRequest pod = PodBuilder("ask").Gpus(gpus).Build();
    PodContext ctx = (*fw)->Prepare(pod, *snap);
    FilterMemo memo(**fw, ctx);
    int fits = 0;
    for (int pass = 0; pass < 3; ++pass) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int32_t i : order) {
        const NodeHot& hot = snap->hot(i);
        const FilterResult want = (*fw)->Filter(ctx, *hot.info);
        const FilterResult& got = memo.Filter(hot);
        const std::string where = std::to_string(gpus) + " GPUs, " + hot.info->name;
        ASSERT_EQ(got.verdict, want.verdict) << where;
        ASSERT_EQ(got.reason, want.reason) << where;
        if (!want.fits()) continue;
        ++fits;
        ASSERT_EQ(memo.Score(hot), (*fw)->Score(ctx, *hot.info)) << where;
      }
    }
    EXPECT_GT(fits, 0) << gpus;
  }
}

}  // namespace
}  // namespace gpusched::policy
