// Backfill across the namespaces of a cohort: a unit of one Backfill
// namespace that would borrow waits for an earlier unit (in the start
// estimator's order) of another Backfill namespace of its cohort unless it
// ends, by its runtime estimate plus the margin, before that unit's
// estimated start, or the earlier unit is within its guarantee and could use
// none of its nodes. Times: the harness starts at 1000 s.
//
// The cluster: h0 (8 H100), 4 of its GPUs held until 1000 + 3600 s by `run`
// of team-c (within team-c's own guarantee: nothing reclaims or preempts
// it), and t0 (4 T4, idle). team-a's `big` (8 GPUs, created first) fits only
// on h0, once `run` ends: its estimated start is 4600 s. team-b's `b` (2
// GPUs) asks after it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::Pcie4xT4;
using gpusched::testing::PodBuilder;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;

constexpr int64_t kBigStart = 4600;

struct World {
  bool cohort = true;  // team-a and team-b in cohort research
  QueueingStrategy b_strategy = QueueingStrategy::kBackfill;
  int64_t a_guaranteed = 0;  // 8: big is within its namespace's guarantee
  int64_t b_guaranteed = 0;
  // t1 (4 T4, idle) too: 12 idle GPUs, enough for what big (8) and b (2)
  // borrow together.
  bool spare_t4 = false;
  std::vector<std::string> a_models;  // big's
};

std::unique_ptr<Harness> Make(const World& w) {
  QueueOptions o;
  const std::string cohort = w.cohort ? "research" : "";
  o.quotas = Quotas({{"team-a", Quota(w.a_guaranteed, 100, cohort)},
                     {"team-b", Quota(w.b_guaranteed, 100, cohort)},
                     {"team-c", Quota(4, 4)}});
  o.quotas.namespaces["team-a"].queueing = QueueingStrategy::kBackfill;
  o.quotas.namespaces["team-b"].queueing = w.b_strategy;
  PodRequest run = PodBuilder("run", "team-c").Gpus(4).OnNode("h0", 0x0f).Build();
  run.start_unix = 1000;
  run.expected_runtime = "1h";
  std::vector<NodeSpec> nodes{Hgx8H100("h0"), Pcie4xT4("t0")};
  if (w.spare_t4) nodes.push_back(Pcie4xT4("t1"));
  return std::make_unique<Harness>(nodes, std::vector<PodRequest>{run}, o);
}

PodRequest Big(std::vector<std::string> models = {}) {
  PodBuilder b("big", "team-a");
  b.Gpus(8).Created(1);
  if (!models.empty()) b.Models(std::move(models));
  PodRequest p = b.Build();
  p.expected_runtime = "1h";
  return p;
}

PodRequest B(const std::string& runtime, int64_t created, std::vector<std::string> models) {
  PodBuilder b("b", "team-b");
  b.Gpus(2).Created(created);
  if (!models.empty()) b.Models(std::move(models));
  PodRequest p = b.Build();
  p.expected_runtime = runtime;
  return p;
}

struct Row {
  std::string name;
  World world;
  std::string b_runtime;  // "": no runtime estimate
  int64_t b_created = 2;  // big is created at 1
  std::vector<std::string> b_models;
  int64_t age_s = 0;  // seconds after the refresh that b asks
  bool admitted = false;
  std::string reason;  // a part of the reason b waits
};

TEST(CohortBackfill, ALaterUnitOfTheCohortPassesOnlyWhenItEndsBeforeTheHeadsStart) {
  World borrowed;  // big and b both borrow
  World no_cohort{.cohort = false};
  World best_effort_b{.b_strategy = QueueingStrategy::kBestEffortFifo};
  World b_guaranteed{.b_guaranteed = 4};
  World big_guaranteed{.a_guaranteed = 8};
  World room_for_both{.spare_t4 = true, .a_models = {"H100"}};
  const Row rows[] = {
      // 1000 + 1800 + max(60, 180) = 2980 <= 4600.
      {"short job passes", borrowed, "30m", 2, {}, 0, true, ""},
      // 1000 + 3300 + 330 = 4630 > 4600.
      {"long job waits", borrowed, "55m", 2, {}, 0, false, "held for team-a/big"},
      {"long job on other nodes waits: both borrow",
       borrowed,
       "55m",
       2,
       {"T4"},
       0,
       false,
       "by borrowing idle GPUs this pod would take"},
      // 8 + 2 borrowed <= 12 idle: held only where big could run.
      {"both borrow, idle GPUs enough for both, nodes apart",
       room_for_both,
       "55m",
       2,
       {"T4"},
       0,
       true,
       ""},
      {"both borrow, idle GPUs enough for both, same nodes",
       room_for_both,
       "55m",
       2,
       {},
       0,
       false,
       "on nodes this pod could use"},
      {"no runtime estimate waits", borrowed, "", 2, {}, 0, false, "has no runtime estimate"},
      {"no cohort: each namespace on its own", no_cohort, "55m", 2, {}, 0, true, ""},
      {"BestEffortFIFO namespace: not in the cohort's Backfill",
       best_effort_b,
       "55m",
       2,
       {},
       0,
       true,
       ""},
      {"within its own guarantee", b_guaranteed, "55m", 2, {}, 0, true, ""},
      {"earlier than the head", borrowed, "55m", 0, {}, 0, true, ""},
      {"estimates older than backfill_max_age_s", borrowed, "55m", 2, {}, 61, true, ""},
      {"head within its guarantee, same nodes",
       big_guaranteed,
       "55m",
       2,
       {},
       0,
       false,
       "on nodes this pod could use"},
      {"head within its guarantee, nodes apart", big_guaranteed, "55m", 2, {"T4"}, 0, true, ""},
      {"head within its guarantee, short job", big_guaranteed, "30m", 2, {}, 0, true, ""},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    auto owner = Make(row.world);
    Harness& h = *owner;
    const PodRequest big = Big(row.world.a_models);
    const PodRequest b = B(row.b_runtime, row.b_created, row.b_models);
    h.Submit(big);
    h.Submit(b);
    EXPECT_THAT(h.Filter(big), IsEmpty());
    h.queue->RefreshEstimates();
    ASSERT_TRUE(h.queue->EstimateOf(big.uid).has_value());
    EXPECT_EQ(h.queue->EstimateOf(big.uid)->start.start_s, kBigStart);
    h.now_ms += row.age_s * 1000;
    std::string reason;
    const std::vector<std::string> nodes = h.Filter(b, &reason);
    EXPECT_EQ(!nodes.empty(), row.admitted) << reason;
    // /debug/pods says what the filter says.
    const std::optional<PodReport> page = h.queue->ExplainPod("team-b", "b");
    ASSERT_TRUE(page.has_value());
    if (!row.admitted) {
      EXPECT_THAT(reason, HasSubstr(row.reason));
      EXPECT_EQ(page->reason, reason);
    } else {
      EXPECT_THAT(page->reason, HasSubstr("admissible now"));
    }
  }
}

// The estimate holds back what admission holds back: b (55 min, borrowing)
// waits in the simulation until big has started, then takes t0.
TEST(CohortBackfill, TheEstimateHoldsTheSameUnitsBack) {
  for (const bool cohort : {true, false}) {
    SCOPED_TRACE(cohort ? "cohort" : "no cohort");
    auto owner = Make(World{.cohort = cohort});
    Harness& h = *owner;
    const PodRequest big = Big();
    const PodRequest b = B("55m", 2, {});
    h.Submit(big);
    h.Submit(b);
    h.Filter(big);
    h.queue->RefreshEstimates();
    EXPECT_EQ(h.queue->EstimateOf(big.uid)->start.start_s, kBigStart);
    EXPECT_EQ(h.queue->EstimateOf(b.uid)->start.start_s, cohort ? kBigStart : 1000);
    EXPECT_LT(h.queue->EstimateOf(big.uid)->start.order, h.queue->EstimateOf(b.uid)->start.order);
  }
}

// Two borrowers: b (55 min, borrowing 2) is held on every node only while
// big's 8 and its 2 exceed the idle GPUs it may borrow; otherwise only where
// big could run (coarsened to GPU products). Admission agrees (the table
// above).
TEST(CohortBackfill, TheEstimateHoldsABorrowerEverywhereOnlyWhenIdleGpusAreShort) {
  const struct {
    const char* name;
    World world;
    std::vector<std::string> b_models;
    int64_t b_start;
  } kRows[] = {
      {"8 idle, nodes apart: held", World{}, {"T4"}, kBigStart},
      {"12 idle, nodes apart: starts now",
       World{.spare_t4 = true, .a_models = {"H100"}},
       {"T4"},
       1000},
      {"12 idle, same nodes: held", World{.spare_t4 = true, .a_models = {"H100"}}, {}, kBigStart},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    auto owner = Make(row.world);
    Harness& h = *owner;
    const PodRequest big = Big(row.world.a_models);
    const PodRequest b = B("55m", 2, row.b_models);
    h.Submit(big);
    h.Submit(b);
    h.Filter(big);
    h.queue->RefreshEstimates();
    EXPECT_EQ(h.queue->EstimateOf(big.uid)->start.start_s, kBigStart);
    EXPECT_EQ(h.queue->EstimateOf(b.uid)->start.start_s, row.b_start);
    EXPECT_EQ(h.Filter(b).empty(), row.b_start != 1000);
  }
}

TEST(CohortBackfill, AnOverrunAcrossNamespacesIsCountedAndNeverEvicted) {
  auto owner = Make(World{});
  Harness& h = *owner;
  const PodRequest big = Big();
  const PodRequest b = B("30m", 2, {});
  h.Submit(big);
  h.Submit(b);
  h.Filter(big);
  h.queue->RefreshEstimates();
  ASSERT_THAT(h.Filter(b), ::testing::Contains("h0"));
  ASSERT_EQ(h.Bind(b, "h0"), "");
  EXPECT_TRUE(h.queue->Backfilled(b.uid));
  h.queue->RefreshEstimates();
  EXPECT_EQ(h.queue->backfill_overruns(), 0);
  // Past its promised end (2980 s) and still running on big's node.
  h.now_ms = 3'000'000;
  h.queue->RefreshEstimates();
  h.queue->RefreshEstimates();
  EXPECT_EQ(h.queue->backfill_overruns(), 1);
  EXPECT_TRUE(h.writer.evicted.empty());
  EXPECT_TRUE(h.state().FindPod(b.uid)->HoldsGpus());
  EXPECT_GE(h.queue->EstimateOf(big.uid)->start.start_s, kBigStart);
}

// The tick's reclaim for a head its cohort holds back (docs/queue.md,
// "Backfill across a cohort"). h0 (8 H100): team-c's `run` (4 GPUs, its
// guarantee, ends at 4600 s) and team-d's `d0` (4 GPUs, 2 h, borrowing);
// t0 (4 T4): team-d's `d1` (the same). team-a (guarantee 4), team-b
// (guarantee 0) and team-e (guarantee 4, idle, nothing queued) share cohort
// research; team-d is outside it, so team-b's head may reclaim team-d's
// borrowed GPUs on the cohort's idle guarantee (a cohort loan; reclaim
// takes any borrower's pods, all priorities being equal). team-a's `big` (8 GPUs,
// borrows 4, which team-e's idle guarantee lends) can reclaim d0 on that
// loan only once `run` (within team-c's guarantee) has ended: the estimate
// starts it at 1000 + 3600 + 30 (the termination) = 4630 s. team-b's `b`
// (2 GPUs, borrows) is held by big unless it ends first: with a 3 h
// estimate 1000 + 10800 + 1080 = 12880 > 4630, held; with 30 min
// 1000 + 1800 + 180 = 2980, not.
TEST(CohortBackfill, AHeadTheCohortHoldsBackReclaimsNothing) {
  const struct {
    const char* name;
    std::string b_runtime;
    QueueingStrategy a_strategy;
    int64_t age_s;  // seconds after the refresh that the tick runs
    bool reclaims;
  } kRows[] = {
      {"held by big: no reclaim", "3h", QueueingStrategy::kBackfill, 0, false},
      {"ends before big starts: reclaims", "30m", QueueingStrategy::kBackfill, 0, true},
      {"big's namespace not Backfill: reclaims", "3h", QueueingStrategy::kBestEffortFifo, 0, true},
      {"estimates too old to hold: reclaims", "3h", QueueingStrategy::kBackfill, 61, true},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    QueueOptions o;
    o.quotas = Quotas({{"team-a", Quota(4, 100, "research")},
                       {"team-b", Quota(0, 100, "research")},
                       {"team-c", Quota(4, 4)},
                       {"team-d", Quota(0, 100)},
                       {"team-e", Quota(4, 100, "research")}});
    o.quotas.namespaces["team-a"].queueing = row.a_strategy;
    o.quotas.namespaces["team-b"].queueing = QueueingStrategy::kBackfill;
    o.reclaim.enabled = true;
    o.reclaim.only_lower_priority = false;  // any borrower
    PodRequest run = PodBuilder("run", "team-c").Gpus(4).OnNode("h0", 0x0f).Build();
    PodRequest d0 = PodBuilder("d0", "team-d").Gpus(4).OnNode("h0", 0xf0).Build();
    PodRequest d1 = PodBuilder("d1", "team-d").Gpus(4).OnNode("t0", 0x0f).Build();
    run.expected_runtime = "1h";
    d0.expected_runtime = d1.expected_runtime = "2h";
    for (PodRequest* p : {&run, &d0, &d1}) p->start_unix = 1000;
    Harness h({Hgx8H100("h0"), Pcie4xT4("t0")}, {run, d0, d1}, o);
    const PodRequest big = Big();
    const PodRequest b = B(row.b_runtime, 2, {});
    h.Submit(big);
    h.Submit(b);
    EXPECT_THAT(h.Filter(big), IsEmpty());
    h.queue->RefreshEstimates();
    if (row.a_strategy == QueueingStrategy::kBackfill) {
      ASSERT_TRUE(h.queue->EstimateOf(big.uid).has_value());
      EXPECT_EQ(h.queue->EstimateOf(big.uid)->start.start_s, 4630);
    }
    h.now_ms += row.age_s * 1000;
    EXPECT_THAT(h.Filter(b), IsEmpty());  // no idle GPU without reclaim either way
    h.queue->Tick();
    if (row.reclaims) {
      ASSERT_FALSE(h.writer.evicted.empty());
      for (const std::string& uid : h.writer.evicted) EXPECT_THAT(uid, HasSubstr("team-d"));
    } else {
      EXPECT_THAT(h.writer.evicted, IsEmpty());
    }
  }
}

}  // namespace
}  // namespace gpusched::queue
