// Table-driven tests of the GPU filters through the Framework, on canonical
// machines. Each case names the verdict and the exact user-visible reason.
#include <gtest/gtest.h>

#include "gpusched/policy/framework.h"
#include "test/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Devices;
using gpusched::testing::PodBuilder;

struct Case {
  std::string name;
  NodeSpec node;
  std::vector<PodRequest> running;
  PodRequest pod;
  Verdict want;
  std::string reason;  // exact, when non-empty
};

void RunCases(const std::vector<Case>& cases) {
  auto fw = *Framework::Create(ScoringConfig{});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto state = gpusched::testing::MakeState({c.node}, c.running);
    auto snap = state->Snapshot();
    PodContext ctx = fw->Prepare(c.pod, *snap);
    FilterResult r = fw->Filter(ctx, *snap->Find(c.node.name));
    EXPECT_EQ(r.verdict, c.want) << r.reason;
    if (!c.reason.empty()) {
      EXPECT_EQ(r.reason, c.reason);
    }
  }
}

TEST(FiltersTest, ModelMemoryCount) {
  NodeSpec t4_3 = gpusched::testing::Pcie4xT4("t4");
  t4_3.gpu_allocatable = 3;
  RunCases({
      {"no gpus wanted passes a cpu node",
       gpusched::testing::CpuOnly("c"),
       {},
       PodBuilder("p").Build(),
       Verdict::kFits,
       ""},
      {"cpu node",
       gpusched::testing::CpuOnly("c"),
       {},
       PodBuilder("p").Gpus(1).Build(),
       Verdict::kUnresolvable,
       "gpusched: node has no GPUs"},
      {"model mismatch",
       gpusched::testing::Pcie4xT4("t4"),
       {},
       PodBuilder("p").Gpus(1).Models({"A100"}).Build(),
       Verdict::kUnresolvable,
       "gpusched: GPU Tesla-T4 not in requested models [A100]"},
      {"model matches token",
       gpusched::testing::DgxA100("a"),
       {},
       PodBuilder("p").Gpus(1).Models({"H100", "A100"}).Build(),
       Verdict::kFits,
       ""},
      {"a10 does not match a100",
       gpusched::testing::DgxA100("a"),
       {},
       PodBuilder("p").Gpus(1).Models({"A10"}).Build(),
       Verdict::kUnresolvable,
       ""},
      {"memory too small",
       gpusched::testing::Pcie4xT4("t4"),
       {},
       PodBuilder("p").Gpus(1).MemoryMiB(40960).Build(),
       Verdict::kUnresolvable,
       "gpusched: GPU memory 15360 MiB per GPU, pod needs 40960 MiB"},
      {"more than healthy",
       t4_3,
       {},
       PodBuilder("p").Gpus(4).Build(),
       Verdict::kUnresolvable,
       "gpusched: node has 3 healthy GPUs, pod needs 4"},
      {"not enough free",
       gpusched::testing::Dgx1V100("v"),
       {PodBuilder("r").Gpus(6).OnNode("v", 0x3f).Build()},
       PodBuilder("p").Gpus(4).Build(),
       Verdict::kUnschedulable,
       "gpusched: 2 of 8 GPUs free, pod needs 4"},
      {"exact fit",
       gpusched::testing::Dgx1V100("v"),
       {PodBuilder("r").Gpus(4).OnNode("v", 0x0f).Build()},
       PodBuilder("p").Gpus(4).Build(),
       Verdict::kFits,
       ""},
      {"shared pod fits beside a share",
       gpusched::testing::Pcie4xT4("t4"),
       {PodBuilder("r").Gpus(4).OnNode("t4", 0x0f).Build()},
       PodBuilder("p").Gpus(1).Milli(500).Build(),
       Verdict::kUnschedulable,
       "gpusched: no GPU with 500 milli free (shared pod)"},
      {"shared pod on partly shared gpu",
       gpusched::testing::Pcie4xT4("t4"),
       {PodBuilder("r").Gpus(3).OnNode("t4", 0x07).Build(),
        PodBuilder("s").Gpus(1).Milli(400).OnNode("t4", 0x08).Build()},
       PodBuilder("p").Gpus(1).Milli(600).Build(),
       Verdict::kFits,
       ""},
  });
}

TEST(FiltersTest, Topology) {
  RunCases({
      {"nvlink-required on pcie box is unresolvable",
       gpusched::testing::Pcie4xT4("t4"),
       {},
       PodBuilder("p").Gpus(2).Topology(TopologyMode::kNvlinkRequired).Build(),
       Verdict::kUnresolvable,
       "gpusched: no all-NVLink set of 2 GPUs on this node"},
      {"nvlink-preferred on pcie box fits",
       gpusched::testing::Pcie4xT4("t4"),
       {},
       PodBuilder("p").Gpus(2).Build(),
       Verdict::kFits,
       ""},
      // DGX-1 V100 with 0,1,6,7 busy: free [2 3 4 5]; no 4-set of them is all-NVLink,
      // but the empty node has one (a quad) -> preemption could help.
      {"no all-nvlink among free",
       gpusched::testing::Dgx1V100("v"),
       {PodBuilder("r").Gpus(4).OnNode("v", Devices({0, 1, 6, 7})).Build()},
       PodBuilder("p").Gpus(4).Topology(TopologyMode::kNvlinkRequired).Build(),
       Verdict::kUnschedulable,
       "gpusched: no all-NVLink set of 4 among free GPUs [2 3 4 5]"},
      // 8 GPUs all-NVLink on a DGX-1 is impossible even when empty (0-5 is SYS).
      {"eight all-nvlink on dgx1 impossible",
       gpusched::testing::Dgx1V100("v"),
       {},
       PodBuilder("p").Gpus(8).Topology(TopologyMode::kNvlinkRequired).Build(),
       Verdict::kUnresolvable,
       "gpusched: no all-NVLink set of 8 GPUs on this node"},
      {"eight all-nvlink on h100",
       gpusched::testing::Hgx8H100("h"),
       {},
       PodBuilder("p").Gpus(8).Topology(TopologyMode::kNvlinkRequired).Build(),
       Verdict::kFits,
       ""},
      // Unresolvable wins over unschedulable: too few free AND impossible topology.
      {"unresolvable wins",
       gpusched::testing::Dgx1V100("v"),
       {PodBuilder("r").Gpus(7).OnNode("v", 0x7f).Build()},
       PodBuilder("p").Gpus(8).Topology(TopologyMode::kNvlinkRequired).Build(),
       Verdict::kUnresolvable,
       "gpusched: no all-NVLink set of 8 GPUs on this node"},
  });
}

// Contract for every filter: a node with no healthy GPUs never fits a GPU pod.
TEST(FiltersTest, NoHealthyGpusNeverFits) {
  auto fw = *Framework::Create(ScoringConfig{});
  NodeSpec dead = gpusched::testing::Hgx8H100("h");
  dead.gpu_allocatable = 0;
  auto state = gpusched::testing::MakeState({dead});
  auto snap = state->Snapshot();
  for (int g = 1; g <= 8; ++g) {
    PodRequest pod = PodBuilder("p").Gpus(g).Build();
    PodContext ctx = fw->Prepare(pod, *snap);
    EXPECT_FALSE(fw->Filter(ctx, *snap->Find("h")).fits());
    for (const auto& f : fw->filters()) EXPECT_FALSE(f->Name().empty());
  }
}

}  // namespace
}  // namespace gpusched::policy
