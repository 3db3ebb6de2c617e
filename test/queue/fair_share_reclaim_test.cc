// Fair-share reclaim (reclaim.fairShare): a namespace below its weighted
// fair share reclaims from namespaces above theirs, never taking one below
// the larger of its guarantee and its fair share, within a budget; off by
// default.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/codec/config_codec.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::PodBuilder;
using testing::H100s;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;
using ::testing::SizeIs;

PodRequest Running(const std::string& name, const std::string& ns, int gpus,
                   const std::string& node, DeviceMask ids) {
  return PodBuilder(name, ns).Gpus(gpus).OnNode(node, ids).Build();
}

// team-a holds all 16 GPUs of two H100 nodes as four 4-GPU pods; no
// guarantees, each namespace limited to the cluster.
std::vector<PodRequest> TeamAHoldsEverything() {
  return {Running("a0", "team-a", 4, "h0", 0x0f), Running("a1", "team-a", 4, "h0", 0xf0),
          Running("a2", "team-a", 4, "h1", 0x0f), Running("a3", "team-a", 4, "h1", 0xf0)};
}

QueueOptions FairOptions(bool on, NamespaceQuota a = Quota(0, 16),
                         NamespaceQuota b = Quota(0, 16)) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", a}, {"team-b", b}});
  o.reclaim.only_lower_priority = false;  // anyBorrower, as shipped
  o.reclaim.fair_share.enabled = on;
  return o;
}

struct Case {
  const char* name;
  QueueOptions options;
  std::vector<PodRequest> running;
  std::vector<PodRequest> waiting;  // filtered in order; the first is team-b's head
  int evicted;                      // by one tick
};

TEST(FairShareReclaimTest, Table) {
  std::vector<PodRequest> eights = {Running("a0", "team-a", 8, "h0", 0xff),
                                    Running("a1", "team-a", 8, "h1", 0xff)};
  NamespaceQuota heavy = Quota(0, 16);
  heavy.weight = 3;
  std::vector<PodRequest> b_holds_four = {
      Running("a0", "team-a", 4, "h0", 0x0f), Running("a1", "team-a", 4, "h0", 0xf0),
      Running("a2", "team-a", 4, "h1", 0x0f), Running("b0", "team-b", 4, "h1", 0xf0)};
  const std::vector<Case> cases = {
      // b wants 4: fair shares a 12, b 4; one of a's pods goes.
      {"below its share reclaims",
       FairOptions(true),
       TeamAHoldsEverything(),
       {PodBuilder("b0", "team-b").Gpus(4).Build()},
       1},
      {"off by default",
       FairOptions(false),
       TeamAHoldsEverything(),
       {PodBuilder("b0", "team-b").Gpus(4).Build()},
       0},
      // a's floor is 12: an 8-GPU victim would leave it 8.
      {"never below the victim's share",
       FairOptions(true),
       eights,
       {PodBuilder("b0", "team-b").Gpus(4).Build()},
       0},
      // b wants 12: shares 8 and 8; its head would hold 12 > 8.
      {"a head above its own share does not",
       FairOptions(true),
       TeamAHoldsEverything(),
       {PodBuilder("b0", "team-b").Gpus(12).Build()},
       0},
      // a's guarantee of 14 leaves a surplus of 2: b's share is 2 < 4.
      {"never within a guarantee",
       FairOptions(true, Quota(14, 16)),
       TeamAHoldsEverything(),
       {PodBuilder("b0", "team-b").Gpus(4).Build()},
       0},
      // a's guarantee 8 plus half the surplus (4) is its floor of 12: one
      // 4-GPU pod may go.
      {"a guarantee below the share",
       FairOptions(true, Quota(8, 16)),
       TeamAHoldsEverything(),
       {PodBuilder("b0", "team-b").Gpus(4).Build()},
       1},
      // a holds 12, b 4, b's head asks 8: with b's weight 3 against a's 1
      // b's share is 12 and a's node of two pods goes; with equal weights
      // b's share is 8 and nothing does.
      {"weights divide the surplus",
       FairOptions(true, Quota(0, 16), heavy),
       b_holds_four,
       {PodBuilder("b1", "team-b").Gpus(8).Build()},
       2},
      {"equal weights",
       FairOptions(true),
       b_holds_four,
       {PodBuilder("b1", "team-b").Gpus(8).Build()},
       0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h(H100s(2), c.running, c.options);
    for (const PodRequest& p : c.waiting) EXPECT_THAT(h.Filter(p), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), c.evicted);
    EXPECT_THAT(h.writer.evicted, SizeIs(c.evicted));
  }
}

TEST(FairShareReclaimTest, FreedGpusGoToTheReclaimerWithTheReasonNamed) {
  Harness h(H100s(2), TeamAHoldsEverything(), FairOptions(true));
  PodRequest b = PodBuilder("b0", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b), IsEmpty());
  ASSERT_EQ(h.queue->Tick(), 1);
  std::string reason;
  std::vector<std::string> passed = h.Filter(b, &reason);
  ASSERT_THAT(passed, SizeIs(1)) << reason;
  EXPECT_EQ(h.Bind(b, passed.front()), "");
  // Wanting 8 of 16, b's share is 8: its second pod reclaims too.
  PodRequest b1 = PodBuilder("b1", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b1), IsEmpty());
  h.now_ms += 60 * 1000;
  ASSERT_EQ(h.queue->Tick(), 1);
  passed = h.Filter(b1);
  ASSERT_THAT(passed, SizeIs(1));
  EXPECT_EQ(h.Bind(b1, passed.front()), "");
  // At its share now (8 of 16): a third pod waits without reclaiming.
  EXPECT_THAT(h.Filter(PodBuilder("b2", "team-b").Gpus(4).Build()), IsEmpty());
  h.now_ms += 60 * 1000;
  EXPECT_EQ(h.queue->Tick(), 0);
  EXPECT_THAT(h.writer.evicted, SizeIs(2));
}

// preemptionsPerHour 1: one workload evicted, then nothing until the
// bucket refills an hour later.
TEST(FairShareReclaimTest, BudgetBoundsEvictionsPerHour) {
  QueueOptions o = FairOptions(true);
  o.reclaim.fair_share.preemptions_per_hour = 1;
  Harness h(H100s(2), TeamAHoldsEverything(), o);
  PodRequest b0 = PodBuilder("b0", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b0), IsEmpty());
  ASSERT_EQ(h.queue->Tick(), 1);
  std::vector<std::string> passed = h.Filter(b0);
  ASSERT_THAT(passed, SizeIs(1));
  ASSERT_EQ(h.Bind(b0, passed.front()), "");
  // b wants 8 now (4 held, 4 waiting): shares 8 and 8, a holds 12.
  PodRequest b1 = PodBuilder("b1", "team-b").Gpus(4).Build();
  EXPECT_THAT(h.Filter(b1), IsEmpty());
  h.now_ms += 60 * 1000;
  EXPECT_EQ(h.queue->Tick(), 0);  // the budget is spent
  h.now_ms += 3600 * 1000;
  EXPECT_THAT(h.Filter(b1), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
}

TEST(FairShareReclaimTest, PolicyFileFieldsAreValidatedNamingTheField) {
  auto on = codec::DecodeConfig(
      R"({"reclaim": {"fairShare": {"enabled": true, "preemptionsPerHour": 3}}})");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->reclaim.fair_share.enabled);
  EXPECT_EQ(on->reclaim.fair_share.preemptions_per_hour, 3);
  auto absent = codec::DecodeConfig(R"({"reclaim": {"enabled": true}})");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->reclaim.fair_share.enabled);
  for (const char* bad :
       {R"({"reclaim": {"fairShare": {"preemptionsPerHour": 0}}})",
        R"({"reclaim": {"fairShare": {"preemptionsPerHour": "x"}}})",
        R"({"reclaim": {"fairShare": {"enabled": 1}}})",
        R"({"reclaim": {"fairShare": {"budget": 1}}})", R"({"reclaim": {"fairShare": true}})"}) {
    SCOPED_TRACE(bad);
    auto c = codec::DecodeConfig(bad);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("reclaim.fairShare"));
  }
}

}  // namespace
}  // namespace gpusched::queue
