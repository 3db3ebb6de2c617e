#include "gpusched/model/topology.h"

#include <gtest/gtest.h>

#include "test/testing/builders.h"

namespace gpusched {
namespace {

using testing::Devices;

std::shared_ptr<const GpuTopology> Dgx1() {
  return *GpuTopology::FromCodes(testing::Dgx1V100Codes());
}

TEST(TopologyTest, ParsesCodesAndPairScores) {
  auto t = Dgx1();
  ASSERT_EQ(t->size(), 8);
  EXPECT_EQ(t->link(0, 3).nvlinks, 2);
  EXPECT_EQ(t->PairScore(0, 3), 200);  // NV2: 100 per link
  EXPECT_EQ(t->PairScore(0, 1), 100);
  EXPECT_EQ(t->PairScore(0, 5), 10);  // SYS
  // Quad {0,1,2,3}: 0-1 100, 0-2 100, 0-3 200, 1-2 200, 1-3 100, 2-3 200 = 900.
  EXPECT_EQ(t->SetScore(Devices({0, 1, 2, 3})), 900);
  EXPECT_TRUE(t->AllNvlink(Devices({0, 1, 2, 3})));
  EXPECT_FALSE(t->AllNvlink(Devices({0, 1, 5})));
}

TEST(TopologyTest, RejectsBadMatrices) {
  EXPECT_FALSE(GpuTopology::FromCodes({}).ok());
  EXPECT_FALSE(GpuTopology::FromCodes({{"X", "NV1"}, {"NV2", "X"}}).ok());  // asymmetric
  EXPECT_FALSE(GpuTopology::FromCodes({{"X", "FOO"}, {"FOO", "X"}}).ok());
  EXPECT_FALSE(GpuTopology::FromCodes({{"NV1", "NV1"}, {"NV1", "X"}}).ok());  // diagonal
  EXPECT_FALSE(GpuTopology::FromCodes({{"X", "NV1"}, {"NV1"}}).ok());         // ragged
  EXPECT_TRUE(GpuTopology::FromCodes({{"X", "SOC"}, {"SOC", "X"}}).ok());     // legacy SYS
}

// Table: best device set for k GPUs among free devices on a DGX-1 V100.
TEST(TopologyTest, ChoosesBestSetDgx1) {
  auto t = Dgx1();
  struct Case {
    const char* name;
    DeviceMask free;
    int k;
    bool require;
    DeviceMask want;
  } cases[] = {
      // Two GPUs on an empty node: an NV2 pair. Candidates {0,3},{0,4},{1,2},{1,5},{2,3},
      // {4,7},{5,6},{6,7}; leftover connectivity breaks the tie, then lowest index.
      {"pair on empty node is NV2", 0xff, 2, false, 0},
      // One GPU with quad {0,1,2,3} and lone 5 free: take 5, keep the quad intact.
      {"single takes the lone GPU", Devices({0, 1, 2, 3, 5}), 1, false, Devices({5})},
      // Four with a full quad free: the quad (internal 900) beats any mixed set.
      {"quad when a quad is free", Devices({0, 1, 2, 3, 4, 6}), 4, false, Devices({0, 1, 2, 3})},
      // Required NVLink: {2,3,4,5} has no all-NVLink 4-set.
      {"no all-nvlink 4 among 2345", Devices({2, 3, 4, 5}), 4, true, 0},
      // Cross-socket 4-set that is all-NVLink: {0,3,4,7} (0-3,0-4,3-7,4-7, 0-7? SYS) -> not all.
      {"0347 is not all-nvlink", Devices({0, 3, 4, 7}), 4, true, 0},
      {"too few free", Devices({1}), 2, false, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    DeviceChoice got = t->Choose(c.free, c.k, c.require);
    if (std::string(c.name) == "pair on empty node is NV2") {
      ASSERT_EQ(PopCount(got.devices), 2);
      EXPECT_EQ(got.internal, 200);
      continue;
    }
    EXPECT_EQ(got.devices, c.want) << FormatMask(got.devices);
  }
}

TEST(TopologyTest, TableMatchesExhaustiveSearch) {
  // Property: the precomputed table returns a set of maximal internal score.
  auto t = Dgx1();
  for (DeviceMask free = 0; free < 256; ++free) {
    for (int k = 1; k <= PopCount(free); ++k) {
      DeviceChoice c = t->Choose(free, k, false);
      ASSERT_EQ(c.devices & ~free, 0u);
      ASSERT_EQ(PopCount(c.devices), k);
      int best = 0;
      for (DeviceMask sub = free; sub; sub = (sub - 1) & free) {
        if (PopCount(sub) == k) best = std::max(best, t->SetScore(sub));
      }
      ASSERT_EQ(c.internal, best) << "free " << FormatMask(free) << " k " << k;
    }
  }
}

TEST(TopologyTest, LargeNodeUsesSearch) {
  // 16 GPUs (DGX-2 style, all NV6): beyond the table size, still exact sets.
  auto t = GpuTopology::Uniform(16, Link{6, 0});
  DeviceChoice c = t->Choose(0xffff, 8, true);
  EXPECT_EQ(PopCount(c.devices), 8);
  EXPECT_TRUE(c.all_nvlink);
  EXPECT_EQ(t->BestInternal(2), 600);
}

TEST(ProductMatchTest, Tokens) {
  EXPECT_TRUE(ProductMatches("A100", "NVIDIA-A100-SXM4-80GB"));
  EXPECT_TRUE(ProductMatches("a100", "NVIDIA-A100-SXM4-80GB"));
  EXPECT_TRUE(ProductMatches("V100", "Tesla-V100-SXM2-32GB"));
  EXPECT_TRUE(ProductMatches("A100-SXM4", "NVIDIA-A100-SXM4-80GB"));
  EXPECT_FALSE(ProductMatches("A10", "NVIDIA-A100-SXM4-80GB"));
  EXPECT_FALSE(ProductMatches("SXM4-A100", "NVIDIA-A100-SXM4-80GB"));
  EXPECT_FALSE(ProductMatches("", "NVIDIA-A100-SXM4-80GB"));
  EXPECT_TRUE(ProductMatches("T4", "Tesla-T4"));
}

}  // namespace
}  // namespace gpusched
