// RoomFinder places a gang's members exactly where the scan over every node
// places them (FindRoomByScan, the reference), on generated clusters of mixed
// servers with random busy and shared devices and CPU loads, for every
// scorer configuration, pod shape, per-model quota and gang size drawn: the
// incremental structure must not change a single pick.
#include "scheduler/queue/room_finder.h"

#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <random>

#include "gpusched/policy/preemption_planner.h"
#include "test/queue/harness.h"
#include "test/testing/builders.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::PodBuilder;
using testing::Quota;
using testing::Quotas;

std::unique_ptr<ClusterState> RandomCluster(std::mt19937& rng, int nodes) {
  std::vector<NodeSpec> specs;
  std::vector<PodRequest> pods;
  for (int i = 0; i < nodes; ++i) {
    const std::string name = "n" + std::to_string(i);
    const int kind = static_cast<int>(rng() % 4);
    specs.push_back(kind == 0   ? gpusched::testing::Dgx1V100(name)
                    : kind == 1 ? gpusched::testing::DgxA100(name)
                    : kind == 2 ? gpusched::testing::Hgx8H100(name)
                                : gpusched::testing::Pcie4xT4(name));
    const int gpus = kind == 3 ? 4 : 8;
    // A random set of busy devices (few states repeat: scores tie often).
    const DeviceMask busy = static_cast<DeviceMask>(rng() % (1u << gpus)) &
                            static_cast<DeviceMask>(rng() % (1u << gpus));
    if (busy != 0) {
      PodRequest p =
          PodBuilder("p" + std::to_string(i)).Gpus(std::popcount(busy)).OnNode(name, busy).Build();
      p.cpu_milli = 1000 * static_cast<int64_t>(rng() % 40);
      pods.push_back(p);
    }
    const int free_device = std::countr_one(busy);
    if (free_device < gpus && rng() % 6 == 0) {
      pods.push_back(PodBuilder("h" + std::to_string(i))
                         .Milli(500)
                         .OnNode(name, DeviceMask{1} << free_device)
                         .Build());
    }
  }
  return gpusched::testing::MakeState(specs, pods);
}

policy::ScoringSpec RandomScoring(std::mt19937& rng) {
  policy::ScoringSpec spec;
  switch (rng() % 4) {
    case 0:
      return spec;  // shipped
    case 1:
      spec.scorers[1].params.spread = true;
      return spec;
    default: {
      policy::ScorerParams params;
      const bool lookahead = rng() % 2 == 0;
      params.capacity = lookahead ? 0.5 : 0;
      spec.scorers = {{"GpuTopology", 10, params},
                      {lookahead ? "FragLookahead" : "Fgd", 90, params}};
      return spec;
    }
  }
}

PodRequest RandomMember(std::mt19937& rng) {
  static const std::vector<int> kCounts = {1, 1, 2, 4, 8};
  PodBuilder b("member");
  if (rng() % 5 == 0) {
    b.Milli(500);
  } else {
    b.Gpus(kCounts[rng() % kCounts.size()]);
  }
  if (rng() % 4 == 0) b.Models({rng() % 2 == 0 ? "H100" : "A100"});
  PodRequest pod = b.Build();
  pod.ns = "team-a";
  pod.cpu_milli = 1000 * static_cast<int64_t>(rng() % 16);
  return pod;
}

QuotaConfig RandomQuotas(std::mt19937& rng) {
  NamespaceQuota q = Quota(10'000, 10'000);
  if (rng() % 2 == 0) q.models["H100"] = {static_cast<int64_t>(rng() % 24), 24};
  if (rng() % 2 == 0) q.models["V100"] = {static_cast<int64_t>(rng() % 16), 16};
  return Quotas({{"team-a", q}}, Quota(0, 0));
}

TEST(RoomFinderTest, PlacesEveryMemberWhereTheScanOverAllNodesDoes) {
  int compared = 0, placed = 0, short_of_room = 0;
  for (uint32_t seed = 1; seed <= 120; ++seed) {
    std::mt19937 rng(seed);
    auto state = RandomCluster(rng, 20 + static_cast<int>(rng() % 300));
    auto snapshot = state->Snapshot();
    auto fw = policy::Framework::Create(RandomScoring(rng)).value();
    const QuotaConfig quotas = RandomQuotas(rng);
    const QuotaLedger ledger(quotas, *snapshot);
    for (int g = 0; g < 6; ++g) {
      const PodRequest member = RandomMember(rng);
      const int32_t missing = 1 + static_cast<int32_t>(rng() % 40);
      const auto reference = PlaceMembers(*snapshot, *fw, member, ledger, missing, true);
      const auto incremental = PlaceMembers(*snapshot, *fw, member, ledger, missing, false);
      ASSERT_EQ(incremental, reference) << "seed " << seed << " gang " << g;
      ++compared;
      placed += static_cast<int>(reference.size());
      if (static_cast<int32_t>(reference.size()) < missing) ++short_of_room;
      // No device twice on a node across the members.
      std::map<std::string, DeviceMask> taken;
      for (const auto& [node, devices] : incremental) {
        if (member.gpu.shared()) continue;
        EXPECT_EQ(taken[node] & devices, 0u) << node;
        taken[node] |= devices;
      }
    }
  }
  // The generator reaches both outcomes: gangs that fit and gangs that run out.
  EXPECT_EQ(compared, 720);
  EXPECT_GT(placed, 5000);
  EXPECT_GT(short_of_room, 20);
  EXPECT_LT(short_of_room, compared);
}

TEST(RoomFinderTest, BestAfterAChangeSeesTheNodeAsChanged) {
  auto state = gpusched::testing::MakeState(
      {gpusched::testing::Hgx8H100("a"), gpusched::testing::Hgx8H100("b")}, {});
  auto snapshot = state->Snapshot();
  auto fw = policy::Framework::Create(policy::ScoringSpec{}).value();
  const PodRequest pod = PodBuilder("p").Gpus(8).Build();
  const policy::PodContext ctx = fw->Prepare(pod, *snapshot);
  const QuotaConfig quotas = Quotas({}, Quota(100, 100));
  const QuotaLedger ledger(quotas, *snapshot);
  RoomFinder finder(pod, ctx, *snapshot, *fw);
  const Room first = finder.Best(ledger);
  ASSERT_TRUE(first.found());
  EXPECT_EQ(first.devices, DeviceMask{0xff});
  finder.Change(first.index, policy::WithPod(finder.View(first.index), pod, first.devices));
  const Room second = finder.Best(ledger);
  ASSERT_TRUE(second.found());
  EXPECT_NE(second.index, first.index);
  finder.Change(second.index, policy::WithPod(finder.View(second.index), pod, second.devices));
  EXPECT_FALSE(finder.Best(ledger).found());
}

}  // namespace
}  // namespace gpusched::queue
