// Model pressure (policy/model_pressure.h) and FragLookahead's pressure and
// CPU slack terms (policy/frag_lookahead.h). Table-driven; each case shows
// its arithmetic.
#include "policy/model_pressure.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "gpusched/policy/framework.h"
#include "policy/frag_lookahead.h"
#include "test/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::PodBuilder;

// Products "Big" (8 GPUs) and "Small" (2 GPUs): 10,000 milli in all.
const std::vector<std::string> kProducts = {"Big", "Small"};
const std::vector<int64_t> kCapacity = {8000, 2000};

FragmentationShape Shape(int32_t gpus, int32_t milli, std::vector<std::string> models,
                         double weight) {
  return FragmentationShape{8000, gpus, milli, std::move(models), weight};
}

TEST(ModelPressureTest, Table) {
  struct Case {
    const char* name;
    std::vector<FragmentationShape> target;
    std::vector<int64_t> capacity;
    double big, small;
  } cases[] = {
      {"unconstrained only", {Shape(1, 1000, {}, 1)}, kCapacity, 0, 0},
      // s = 0.1 of the demand; 0.1 * 10000 / 2000 = 0.5 on Small.
      {"one model", {Shape(1, 1000, {}, 0.9), Shape(1, 1000, {"Small"}, 0.1)}, kCapacity, 0, 0.5},
      // Spread by capacity: 0.1 * 10000 / 10000 = 0.1 on both.
      {"two models",
       {Shape(1, 1000, {}, 0.9), Shape(1, 1000, {"Big", "Small"}, 0.1)},
       kCapacity,
       0.1,
       0.1},
      // s = 0.5: 0.5 * 10000 / 2000 = 2.5, clipped to 1.
      {"clipped", {Shape(1, 1000, {}, 0.5), Shape(1, 1000, {"Small"}, 0.5)}, kCapacity, 0, 1},
      // Demand is weight x GPUs x milli: 0.05 x 2000 = 100 of 800 + 100;
      // s = 1/9: 10000 / 2000 / 9 = 0.5556.
      {"multi-GPU shape",
       {Shape(1, 1000, {}, 0.8), Shape(2, 1000, {"Small"}, 0.05)},
       kCapacity,
       0,
       5.0 / 9},
      // A shared shape: 0.2 x 500 = 100 of 900 + 100; s = 0.1 -> 0.5.
      {"shared shape", {Shape(1, 1000, {}, 0.9), Shape(1, 500, {"Small"}, 0.2)}, kCapacity, 0, 0.5},
      // A model the cluster lacks puts no pressure anywhere.
      {"absent model", {Shape(1, 1000, {}, 0.9), Shape(1, 1000, {"Other"}, 0.1)}, kCapacity, 0, 0},
      // CPU-only shapes ask for no GPU.
      {"cpu-only shape ignored",
       {Shape(0, 0, {"Small"}, 5), Shape(1, 1000, {"Small"}, 0.1), Shape(1, 1000, {}, 0.9)},
       kCapacity,
       0,
       0.5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<double> rho = ModelPressure(c.target, kProducts, c.capacity);
    ASSERT_EQ(rho.size(), 2u);
    EXPECT_NEAR(rho[0], c.big, 1e-9);
    EXPECT_NEAR(rho[1], c.small, 1e-9);
  }
}

TEST(ModelPressureTest, PenaltyTable) {
  const std::vector<double> rho = {0.1, 0.5};
  struct Case {
    const char* name;
    std::vector<int64_t> capacity;
    std::vector<uint8_t> allowed;
    uint16_t product;
    int64_t milli;
    double want;
  } cases[] = {
      // (0.5^2 - 0.1^2) * 1000 = 240.
      {"any pod on the pressed product", kCapacity, {}, 1, 1000, 240},
      {"any pod on the least pressed product", kCapacity, {}, 0, 1000, 0},
      // Scales with the GPU taken: 0.24 * 500.
      {"shared pod", kCapacity, {}, 1, 500, 120},
      {"pod that only takes the pressed product", kCapacity, {0, 1}, 1, 1000, 0},
      {"pod that takes both", kCapacity, {1, 1}, 1, 1000, 240},
      // A product without capacity is no alternative.
      {"only product with capacity", {0, 2000}, {}, 1, 1000, 0},
      {"unknown product id", kCapacity, {}, 7, 1000, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_NEAR(PressurePenalty(rho, c.capacity, c.allowed, c.product, c.milli), c.want, 1e-9);
  }
}

NodeSpec Node(const std::string& name, const std::string& product, int gpus) {
  NodeSpec n;
  n.name = name;
  n.product = product;
  n.gpu_count = gpus;
  n.gpu_allocatable = gpus;
  n.cpu_milli = 96000;
  n.memory_mib = 1 << 20;
  return n;
}

// v = FGD gain - stranded - 0.3 * slack - 2 * P (frag_lookahead.h) on an
// empty "Big" 8-GPU node, an empty "Small" 2-GPU node and a "Small" node
// whose 2 GPUs are taken (96 CPUs each); target: any 1 GPU (0.9) and 1 GPU
// on Small (0.1), 8 CPUs each, so r = 8. Capacity 8000 Big + 4000 Small:
// rho_Small = 0.1 * 12000 / 4000 = 0.3, rho_Big = 0.
TEST(ModelPressureTest, FragLookaheadValueTable) {
  auto state = gpusched::testing::MakeState(
      {Node("big", "Big", 8), Node("small", "Small", 2), Node("full", "Small", 2)},
      {PodBuilder("running").Gpus(2).OnNode("full", gpusched::testing::Devices({0, 1})).Build()});
  auto snap = state->Snapshot();
  auto fw = Framework::WithScorers({});
  auto target = std::make_shared<const std::vector<FragmentationShape>>(
      std::vector<FragmentationShape>{Shape(1, 1000, {}, 0.9), Shape(1, 1000, {"Small"}, 0.1)});
  auto plain = std::make_shared<const std::vector<FragmentationShape>>(
      std::vector<FragmentationShape>{Shape(1, 1000, {}, 1)});
  FragLookaheadScorer scorer(target, FragLookaheadParams{1000, 1, 0});
  FragLookaheadScorer unconstrained(plain, FragLookaheadParams{1000, 1, 0});
  FragLookaheadScorer no_guard(target, FragLookaheadParams{1000, 0, 0});
  PodRequest any = PodBuilder("any").Gpus(1).Build();
  any.cpu_milli = 8000;
  PodRequest small_only = PodBuilder("small-only").Gpus(1).Models({"Small"}).Build();
  small_only.cpu_milli = 8000;
  PodRequest cpu_only = PodBuilder("cpu").Build();
  cpu_only.cpu_milli = 8000;
  struct Case {
    const char* name;
    const FragLookaheadScorer* scorer;
    const PodRequest* pod;
    const char* node;
    double want;
  } cases[] = {
      // Big: the Small-only shape counts all idle milli as fragmented:
      // 0.1 * (8000 - 7000) = 100 gained; no pressure on Big.
      {"any pod on big", &scorer, &any, "big", 100},
      // Small: nothing fragments; P = 0.3^2 * 1000 = 90, times 2.
      {"any pod on small", &scorer, &any, "small", -180},
      // The pod can only go to Small: rho_min = rho_Small, P = 0.
      {"small-only pod on small", &scorer, &small_only, "small", 0},
      // Without constrained shapes there is no pressure term.
      {"unconstrained target", &unconstrained, &any, "small", 0},
      // A CPU-only pod: no pressure, S stays 0 (96 CPUs feed 12,000 milli),
      // slack min(2000 idle, 8000 / 8) = 1000: 0.3 * 1000.
      {"cpu-only pod on small", &scorer, &cpu_only, "small", -300},
      // Big: FGD's fragments do not change (idle stays 8000); slack 1000.
      {"cpu-only pod on big", &scorer, &cpu_only, "big", -300},
      // No idle GPU left to feed: no slack taken.
      {"cpu-only pod on full", &scorer, &cpu_only, "full", 0},
      // The slack term scales with cpu_guard.
      {"cpu-only pod, no guard", &no_guard, &cpu_only, "small", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const PodContext ctx = fw->Prepare(*c.pod, *snap);
    double v = 0;
    ASSERT_TRUE(c.scorer->Value(ctx, *snap->Find(c.node), &v));
    EXPECT_NEAR(v, c.want, 1e-9);
    EXPECT_EQ(c.scorer->Score(ctx, *snap->Find(c.node)),
              static_cast<int64_t>(100.0 / (1.0 + std::exp(-c.want / 1000))));
  }
}

}  // namespace
}  // namespace gpusched::policy
