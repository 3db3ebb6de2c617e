// FragLookahead (policy/frag_lookahead.h): its terms on hand-computed nodes,
// its score on a tiny cluster, and the config fields that select it.
#include "policy/frag_lookahead.h"

#include <cmath>

#include "gtest/gtest.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/sim_policy.h"

namespace gpusched::sim {
namespace {

using policy::FragLookaheadParams;
using policy::FragLookaheadScorer;
using policy::FragView;

std::shared_ptr<const std::vector<FragmentationShape>> OneShape(int64_t cpu, int32_t milli) {
  return std::make_shared<const std::vector<FragmentationShape>>(
      std::vector<FragmentationShape>{{cpu, 1, milli, {}, 1.0}});
}

FragView View(int64_t cpu, std::vector<int> free) {
  FragView v;
  v.cpu_free = cpu;
  for (int f : free) v.free_milli[v.ngpu++] = f;
  return v;
}

TEST(FragLookahead, TermsHandComputed) {
  struct Case {
    const char* what;
    int64_t target_cpu;
    int32_t target_milli;
    int64_t cpu;
    std::vector<int> free;
    double frag, stranded, capacity;
  };
  const Case cases[] = {
      // r = 10 CPU milli per GPU milli: 96 CPUs feed 9,600 milli >= 8,000 idle.
      {"cpu surplus",
       10000,
       1000,
       96000,
       {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000},
       0,
       0,
       8000},
      // 66 CPUs feed 6,600 milli: 1,400 stranded; 6 copies fit (CPU-bound).
      {"cpu short",
       10000,
       1000,
       66000,
       {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000},
       0,
       1400,
       6000},
      // Shape 1 GPU of 500 milli, 4 CPUs: r = 8. Device with 300 free is a
      // fragment; copies = 1000/500 + 300/500 = 2 (CPU allows 4) -> 2*500.
      {"shared", 4000, 500, 16000, {1000, 300}, 300, 0, 1000},
      // Not enough CPU for the shape: every idle milli is a fragment; r = 20,
      // 10 CPUs feed 500 of 1,300 idle milli; no copy fits.
      {"lacks cpu", 20000, 1000, 10000, {1000, 300}, 1300, 800, 0},
      // No idle GPU: nothing counts.
      {"full", 4000, 1000, 50000, {0, 0}, 0, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    FragLookaheadScorer s(OneShape(c.target_cpu, c.target_milli), FragLookaheadParams{1000, 1, 1});
    const policy::FragTerms t = s.Terms({1}, View(c.cpu, c.free));
    EXPECT_DOUBLE_EQ(t.frag, c.frag);
    EXPECT_DOUBLE_EQ(t.stranded, c.stranded);
    EXPECT_DOUBLE_EQ(t.capacity, c.capacity);
  }
}

constexpr char kNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,32000,65536,2,T4\n"
    "n1,32000,65536,4,V100M16\n"
    "n2,8000,16384,1,T4\n";

TEST(FragLookahead, CpuOnlyPodGoesWhereItStrandsFewestGpus) {
  auto nodes = ParseOpenbNodes(kNodes);
  ASSERT_TRUE(nodes.ok());
  auto cluster = SimCluster::Create(*nodes, {});
  ASSERT_TRUE(cluster.ok());
  // Target: 1 whole GPU with 8 CPUs, so r = 8 CPU milli per GPU milli.
  const std::vector<FragmentationShape> target = {{8000, 1, 1000, {}, 1.0}};
  FragLookaheadScorer s(std::make_shared<const std::vector<FragmentationShape>>(target),
                        FragLookaheadParams{1000, 1, 0});
  PodRequest pod;
  pod.cpu_milli = 24000;
  policy::PodContext ctx;
  ctx.pod = &pod;
  ctx.snapshot = &cluster->snapshot();
  struct Want {
    int node;
    double v;
  };
  // n0: 8 CPUs left feed 1,000 of 2,000 idle milli -> S 0 -> 1,000; frag
  // stays 0 (the shape still fits); slack min(2,000, 24,000 / 8) = 2,000,
  // 0.3 * 2,000 = 600. n1: 8 CPUs feed 1,000 of 4,000 -> S 3,000; slack
  // min(4,000, 3,000) * 0.3 = 900.
  for (Want w : {Want{0, -1600}, Want{1, -3900}}) {
    double v = 0;
    ASSERT_TRUE(s.Value(ctx, cluster->node(w.node), &v));
    EXPECT_DOUBLE_EQ(v, w.v) << w.node;
    EXPECT_EQ(s.Score(ctx, cluster->node(w.node)),
              static_cast<int64_t>(100.0 / (1.0 + std::exp(-w.v / 1000))));
  }
  // A whole-GPU pod on n2 (1 T4, 8 CPUs) uses it all: no change, score 50.
  PodRequest gpu_pod;
  gpu_pod.cpu_milli = 8000;
  gpu_pod.gpu.count = 1;
  gpu_pod.gpu.milli_per_gpu = 1000;
  ctx.pod = &gpu_pod;
  double v = 1;
  ASSERT_TRUE(s.Value(ctx, cluster->node(2), &v));
  EXPECT_DOUBLE_EQ(v, 0);
  EXPECT_EQ(s.Score(ctx, cluster->node(2)), 50);

  // Through the simulator's gpusched policy: the CPU-only pod lands on n0.
  SchedulerConfig cfg;
  cfg.scoring.scorers = {{"GpuTopology", 10, {}}, {"FragLookahead", 90, {}}};
  auto p = MakeSimPolicy("gpusched", cfg, target);
  ASSERT_TRUE(p.ok());
  std::mt19937_64 rng(1);
  Placer placer(*p, &*cluster, 1, &rng);
  DeviceMask d = 0;
  EXPECT_EQ(placer.Schedule(pod, 0, &d), 0);
}

TEST(FragLookahead, ConfigFieldsAreValidated) {
  auto ok = codec::DecodeConfig(
      R"({"scoring": {"fragmentationWeight": 90, "fragmentationPolicy": "lookahead",
          "fragmentationCpuGuard": 2, "fragmentationCapacity": 0.5}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  // The defaults GpuTopology 3 and GpuPacking 2, and the FragLookahead
  // scorer with the section's parameters.
  ASSERT_EQ(ok->scoring.scorers.size(), 3u);
  const policy::ScorerSpec& f = ok->scoring.scorers[2];
  EXPECT_EQ(f.name, "FragLookahead");
  EXPECT_EQ(f.weight, 90);
  EXPECT_DOUBLE_EQ(f.params.cpu_guard, 2);
  EXPECT_DOUBLE_EQ(f.params.capacity, 0.5);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"scoring": {"fragmentationPolicy": "best"}})", "scoring.fragmentationPolicy"},
      {R"({"scoring": {"fragmentationCpuGuard": -1}})", "scoring.fragmentationCpuGuard"},
      {R"({"scoring": {"fragmentationCapacity": "x"}})", "scoring.fragmentationCapacity"},
  };
  for (auto [text, field] : bad) {
    auto c = codec::DecodeConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status();
  }
}

}  // namespace
}  // namespace gpusched::sim
