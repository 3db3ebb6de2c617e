// What-if answers on a two-node cluster computed by hand: h0 (8 H100s) is
// full with team-b's b0 (8 GPUs, ends at 2000 s); h1 has team-b's b1
// (4 GPUs, ends at 1500 s) and 4 free GPUs. team-a (guarantee and limit 8)
// holds nothing; team-b (no guarantee, limit 16) borrows 12.
#include "scheduler/queue/what_if.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test/queue/harness.h"
#include "test/testing/builders.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::kA100;
using gpusched::testing::kH100;
using gpusched::testing::MakeState;
using gpusched::testing::PodBuilder;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Quota;
using testing::Quotas;

class WhatIfTest : public ::testing::Test {
 protected:
  WhatIfTest() {
    PodRequest b0 = PodBuilder("b0", "team-b").Gpus(8).OnNode("h0", 0xff).Priority(5).Build();
    PodRequest b1 = PodBuilder("b1", "team-b").Gpus(4).OnNode("h1", 0x0f).Priority(5).Build();
    state_ = MakeState({Hgx8H100("h0"), Hgx8H100("h1")}, {b0, b1});
    snapshot_ = state_->Snapshot();
    quotas_ = Quotas({{"team-a", Quota(8, 8)}, {"team-b", Quota(0, 16)}});
    ledger_ = std::make_unique<QuotaLedger>(quotas_, *snapshot_);
    fw_ = std::move(*policy::Framework::Create(ScoringConfig{}));
    ends_ = {{b0.uid, 2000}, {b1.uid, 1500}};
  }
  std::vector<std::string> Ask(const PodRequest& pod, int32_t earlier = 0, int32_t prio = 0) {
    WhatIfInputs in{&pod, snapshot_.get(), fw_.get(), ledger_.get()};
    in.earlier_units = earlier;
    in.earlier_max_priority = prio;
    in.running_end = &ends_;
    in.now_s = 1000;
    return WhatIfs(in);
  }
  std::unique_ptr<ClusterState> state_;
  std::shared_ptr<const ClusterSnapshot> snapshot_;
  QuotaConfig quotas_;
  std::unique_ptr<QuotaLedger> ledger_;
  std::unique_ptr<const policy::Framework> fw_;
  absl::flat_hash_map<std::string, int64_t> ends_;
};

TEST_F(WhatIfTest, AnEightGpuPodThatFitsNowhere) {
  PodRequest p = PodBuilder("p", "team-a").Gpus(8).Build();
  auto lines = Ask(p, 2, 50);
  EXPECT_THAT(lines, Contains(HasSubstr("with priority >= 51: it would head its queue; it would "
                                        "still wait: no node has room")));
  // Reclaiming b1 (newest, equal priority... both go: 12 GPUs) frees h1.
  EXPECT_THAT(lines, Contains(HasSubstr("if namespace team-b's 12 borrowed GPUs were reclaimed: "
                                        "it would start now")));
  EXPECT_THAT(lines, Contains(HasSubstr("with 4 fewer GPUs (4): it would start now (fits on 1 "
                                        "node, h1)")));
  // b1 ends first (1500 s): then h1 has 8 free.
  EXPECT_THAT(lines, Contains("after team-b/b1 ends (estimated 1970-01-01T00:25:00Z): it would "
                              "have room on h1"));
}

TEST_F(WhatIfTest, AnotherModel) {
  PodRequest p = PodBuilder("p", "team-a").Gpus(4).Models({"A100"}).Build();
  auto lines = Ask(p);
  EXPECT_THAT(lines, Contains(HasSubstr(std::string("if ") + kH100 +
                                        " were allowed: it would start now (fits on 1 node,")));
  EXPECT_THAT(lines, Not(Contains(HasSubstr(kA100))));
  EXPECT_THAT(lines, Not(Contains(HasSubstr("with priority"))));  // nothing ahead of it
}

TEST_F(WhatIfTest, QuotaStillRefuses) {
  // team-a may hold 8: a 16-GPU gang member's quota never admits... a 12-GPU
  // pod is over team-a's limit whatever is reclaimed.
  PodRequest p = PodBuilder("p", "team-a").Gpus(12).Build();
  auto lines = Ask(p, 1, 0);
  EXPECT_THAT(lines, Contains(HasSubstr("reclaimed: it would still wait: its namespace's quota "
                                        "does not admit it now")));
}

// When no node has room, /debug/pods counts each refusal over the nodes,
// the most common first (at most three), with one node that gave it, then
// how many other reasons there were. It used to name the first node
// refused, here the CPU node, and nothing else.
TEST(ExplainNoRoom, CountsEachRefusalOverTheNodes) {
  QueueOptions o;
  testing::Harness h({gpusched::testing::CpuOnly("c0"), Hgx8H100("h0"), Hgx8H100("h1"),
                      gpusched::testing::Pcie4xT4("t0"), gpusched::testing::Pcie4xT4("t1"),
                      gpusched::testing::Pcie4xT4("t2")},
                     {PodBuilder("b0", "team-b").Gpus(4).OnNode("h0", 0x0f).Build(),
                      PodBuilder("b1", "team-b").Gpus(2).OnNode("h1", 0x03).Build()},
                     o);
  const PodRequest p = PodBuilder("p", "team-a").Gpus(8).Models({"H100"}).Build();
  h.Submit(p);
  auto explained = h.queue->ExplainPod("team-a", "p");
  ASSERT_TRUE(explained.has_value());
  EXPECT_EQ(explained->reason,
            "admissible by quota and queue order, but no node has room: 3 nodes (e.g. t0): "
            "gpusched: GPU Tesla-T4 not in requested models [H100]; 1 node (h0): gpusched: 4 of "
            "8 GPUs free, pod needs 8; 1 node (h1): gpusched: 6 of 8 GPUs free, pod needs 8; 1 "
            "other reason");
}

}  // namespace
}  // namespace gpusched::queue
