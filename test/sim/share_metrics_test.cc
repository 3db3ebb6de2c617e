// The replay's work-conserving and fairness metrics on hand-computed cases:
// weighted fair shares (water-filling), Jain's index, the surplus fairness
// at one instant and ShareMetrics over a timeline.
#include "scheduler/sim/share_metrics.h"

#include "gtest/gtest.h"

namespace gpusched::sim {
namespace {

TEST(WeightedFairShares, GuaranteesFirstThenTheRestByWeight) {
  // 24 GPUs. a: guarantee 8, wants 20; b: guarantee 8, wants 4; c: no
  // guarantee, weight 2, wants 30. First 8, 4, 0; the 12 left go 1:2 to a
  // and c (b wants no more): 4 and 8.
  const std::vector<ShareSpec> ns = {
      {.guarantee = 8, .weight = 1, .limit = 24},
      {.guarantee = 8, .weight = 1, .limit = 24},
      {.guarantee = 0, .weight = 2, .limit = 24},
  };
  const std::vector<double> fair = WeightedFairShares(ns, {20, 4, 30}, 24);
  EXPECT_DOUBLE_EQ(fair[0], 12);
  EXPECT_DOUBLE_EQ(fair[1], 4);
  EXPECT_DOUBLE_EQ(fair[2], 8);
}

TEST(WeightedFairShares, WhatOneCannotTakeGoesToTheOthers) {
  // 24 GPUs, no guarantees, equal weights: a wants 2, so b could have 22,
  // but its limit is 16; 6 stay unallocated.
  const std::vector<ShareSpec> ns = {{.guarantee = 0, .weight = 1, .limit = 24},
                                     {.guarantee = 0, .weight = 1, .limit = 16}};
  const std::vector<double> fair = WeightedFairShares(ns, {2, 40}, 24);
  EXPECT_DOUBLE_EQ(fair[0], 2);
  EXPECT_DOUBLE_EQ(fair[1], 16);
}

TEST(WeightedFairShares, OverPromisedGuaranteesAreScaledAlike) {
  // Guarantees 8 + 8 on a pool of 10: each gets 10 x 8/16.
  const std::vector<ShareSpec> ns = {{.guarantee = 8, .limit = 16}, {.guarantee = 8, .limit = 16}};
  const std::vector<double> fair = WeightedFairShares(ns, {8, 12}, 10);
  EXPECT_DOUBLE_EQ(fair[0], 5);
  EXPECT_DOUBLE_EQ(fair[1], 5);
}

TEST(JainIndex, OneWhenEqualOneOverNWhenOneHasAll) {
  EXPECT_DOUBLE_EQ(JainIndex({1, 1, 1}), 1);
  EXPECT_DOUBLE_EQ(JainIndex({1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(JainIndex({1, 2, 3}), 36.0 / 42.0);
  EXPECT_DOUBLE_EQ(JainIndex({}), -1);
  EXPECT_DOUBLE_EQ(JainIndex({0, 0}), -1);
}

TEST(SurplusJain, EachSurplusAgainstItsWeightedFairSurplus) {
  // 16 GPUs; a and b guaranteed 4 each, both want 10: fair 8 and 8. a uses
  // 10 (surplus 6 of a fair 4: 1.5), b 6 (2 of 4: 0.5): (2)^2 / (2 x 2.5).
  std::vector<ShareSpec> ns = {{.guarantee = 4, .weight = 1, .limit = 16},
                               {.guarantee = 4, .weight = 1, .limit = 16}};
  EXPECT_DOUBLE_EQ(SurplusJain(ns, {10, 6}, {0, 4}, 16), 0.8);
  // b of weight 3: fair surpluses 2 and 6: 3 and 1/3.
  ns[1].weight = 3;
  EXPECT_DOUBLE_EQ(SurplusJain(ns, {10, 6}, {0, 4}, 16), 100.0 / 164.0);
  // b wants only 3, within its guarantee: a alone contends, nothing to
  // compare.
  EXPECT_DOUBLE_EQ(SurplusJain(ns, {10, 3}, {0, 0}, 16), -1);
}

TEST(ShareMetrics, UtilisationWhileWaitingAndTimeToGuarantee) {
  // 16 GPUs; a and b guaranteed 8 each. a holds all 16 with 8 more
  // waiting; at 100 b's 8 arrive (b owed); at 130 a has given 8 back (one
  // job terminating); at 160 b holds its 8; at 200 b is done, a holds 16
  // and nothing waits; the run ends at 300.
  ShareMetrics m({{.guarantee = 8, .limit = 16}, {.guarantee = 8, .limit = 16}}, 16);
  m.Observe(0, {16, 0}, {8, 0});
  m.Observe(100, {16, 0}, {8, 8});
  m.Observe(130, {8, 0}, {8, 8});
  m.Observe(160, {8, 8}, {8, 0});
  m.Observe(200, {16, 0}, {0, 0});
  m.Finish(300);
  // Waiting 0..200: 16 x 100 + 16 x 30 + 8 x 30 + 16 x 40 of 16 x 200.
  EXPECT_DOUBLE_EQ(m.WaitingSeconds(), 200);
  EXPECT_DOUBLE_EQ(m.UtilisationWhileWaiting(), 2960.0 / 3200.0);
  ASSERT_EQ(m.GuaranteeWaits().size(), 1u);
  EXPECT_DOUBLE_EQ(m.GuaranteeWaits()[0], 60);
  // Guarantees cover the pool: nobody is entitled to surplus.
  EXPECT_DOUBLE_EQ(m.MeanSurplusJain(), -1);
}

TEST(ShareMetrics, SurplusFairnessIsTimeWeighted) {
  // No guarantees, 16 GPUs. 0..50: a holds 16 while b waits for 8 (fair 8
  // and 8: x = 2 and 0, Jain 0.5); 50..150: 8 and 8 (Jain 1).
  ShareMetrics m({{.guarantee = 0, .limit = 16}, {.guarantee = 0, .limit = 16}}, 16);
  m.Observe(0, {16, 0}, {0, 8});
  m.Observe(50, {8, 8}, {0, 0});
  m.Finish(150);
  EXPECT_DOUBLE_EQ(m.MeanSurplusJain(), (0.5 * 50 + 1 * 100) / 150);
  EXPECT_DOUBLE_EQ(m.UtilisationWhileWaiting(), 1);
  EXPECT_TRUE(m.GuaranteeWaits().empty());  // nothing guaranteed, nothing owed
}

TEST(ShareMetrics, AnEpisodeStillOpenEndsWithTheRun) {
  ShareMetrics m({{.guarantee = 8, .limit = 8}}, 8);
  m.Observe(10, {0}, {8});
  m.Finish(25);
  ASSERT_EQ(m.GuaranteeWaits().size(), 1u);
  EXPECT_DOUBLE_EQ(m.GuaranteeWaits()[0], 15);
  EXPECT_DOUBLE_EQ(m.UtilisationWhileWaiting(), 0);
}

}  // namespace
}  // namespace gpusched::sim
