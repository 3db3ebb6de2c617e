// The tick chooses its reclaim jobs in bounded holds of the queue mutex
// (QueueManager::ChooseReclaimsLocked, docs/architecture.md "Locks and
// their order", tick-choose): 32 namespaces per hold, round-robin from the
// cursor across ticks. Each test checks the choice against a model of one
// walk over the namespaces in name order, and what a change between two
// holds does to it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test/queue/harness.h"

namespace gpusched::queue {

// Reaches the choice's steps (QueueManager befriends it).
class ReclaimChoiceProbe {
 public:
  explicit ReclaimChoiceProbe(QueueManager& q) : q_(q) {}

  // One tick's choice, hold by hold, with `meanwhile(holds so far)` run
  // between two holds. The namespaces of the jobs chosen, in order.
  std::vector<std::string> Choose(const std::function<void(int)>& meanwhile = nullptr) {
    QueueManager::ReclaimChoice c;
    holds_ = 0;
    while (!c.done) {
      {
        TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
        q_.ChooseReclaimsLocked(c);
      }
      ++holds_;
      if (!c.done && meanwhile) meanwhile(holds_);
    }
    version_ = c.queue_version;
    ledger_hold_ = c.ledger_hold;
    std::vector<std::string> out;
    for (const QueueManager::ReclaimJob& job : c.jobs) out.push_back(job.ns);
    return out;
  }
  int holds() const { return holds_; }
  // Whether a hold of the last choice ended after the ledger alone.
  bool ledger_hold() const { return ledger_hold_; }
  uint64_t chosen_at_version() const { return version_; }
  uint64_t queue_version() {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    return q_.queue_version_;
  }

 private:
  QueueManager& q_;
  bool ledger_hold_ = false;
  int holds_ = 0;
  uint64_t version_ = 0;
};

namespace {

using ::gpusched::testing::PodBuilder;
using ::testing::ElementsAreArray;
using testing::H100s;
using testing::Harness;
using testing::Quota;
using testing::Quotas;

std::string Ns(int i) {
  char name[16];
  std::snprintf(name, sizeof name, "ns-%03d", i);
  return name;
}

// `n` namespaces, each guaranteed 1 GPU and using none, with a 1-GPU pod
// waiting; the cluster's one node is full of a borrower's pod (namespace
// "borrower", nothing guaranteed): every head may reclaim for its
// guarantee.
struct Guaranteed {
  explicit Guaranteed(int n, int32_t per_tick) : h(H100s(1), {Borrower()}, Options(n, per_tick)) {
    for (int i = 0; i < n; ++i) {
      h.Filter(Head(Ns(i)));  // queued and seen by a filter: a live head
      names.push_back(Ns(i));
    }
  }
  static PodRequest Borrower() {
    return PodBuilder("big", "borrower").Gpus(8).OnNode("h0", 0xff).Build();
  }
  static PodRequest Head(const std::string& ns) {
    return PodBuilder(ns + "-head", ns).Gpus(1).Build();
  }
  static QueueOptions Options(int n, int32_t per_tick) {
    std::vector<std::pair<std::string, NamespaceQuota>> q;
    for (int i = 0; i < n + 200; ++i) q.emplace_back(Ns(i), Quota(1, 1));
    q.emplace_back("ns-100x", Quota(1, 1));
    q.emplace_back("ns-010x", Quota(1, 1));
    QueueOptions o;
    o.quotas = Quotas(std::move(q));
    o.reclaim_plans_per_tick = per_tick;
    return o;
  }
  Harness h;
  std::vector<std::string> names;  // in name order
};

// The tick's planning budget (reclaim_plan_budget_ms, counted from the
// tick's start) bounds the work after the first job: a tick whose wait for
// the last evictions alone outlasts it still plans and commits one.
TEST(ReclaimChoice, ATickPastItsPlanningBudgetStillPlansOneJob) {
  QueueOptions o = Guaranteed::Options(1, 16);
  o.reclaim_plan_budget_ms = 1;
  o.reclaim.only_lower_priority = false;  // the borrower's pod is of the same priority
  Harness h(H100s(1), {Guaranteed::Borrower()}, o);
  h.Filter(Guaranteed::Head(Ns(0)));
  h.writer.on_await = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  EXPECT_EQ(h.queue->Tick(), 1);
  ASSERT_EQ(h.writer.evicted.size(), 1u);
  EXPECT_EQ(h.writer.evicted[0], Guaranteed::Borrower().uid);
}

TEST(ReclaimChoice, EveryNamespaceIsLookedAtOnceOverBoundedHolds) {
  Guaranteed g(150, 1000);
  ReclaimChoiceProbe probe(*g.h.queue);
  EXPECT_THAT(probe.Choose(), ElementsAreArray(g.names));
  EXPECT_EQ(probe.holds(), 5);  // 4 x 32 + 22 namespaces
}

// A serving process also ends a hold after reclaim_choice_hold_us of wall
// time (at least one namespace per hold): the choice is the same wherever
// the holds end. At 1 us a hold ends long before its 32 namespaces (no
// machine checks 32 in 1 us), so it takes more holds than the 5 without a
// budget, and at most one per namespace (plus one that made the ledger
// alone, on a machine slow enough for that to outlast the budget).
TEST(ReclaimChoice, AWallClockBudgetPerHoldEndsHoldsEarlierAndChoosesTheSame) {
  for (const int32_t hold_us : {1, 20, 250}) {
    SCOPED_TRACE(hold_us);
    Guaranteed g(150, 1000);
    QueueOptions o = Guaranteed::Options(150, 1000);
    o.reclaim_choice_hold_us = hold_us;
    g.h.queue->SetOptions(o);
    ReclaimChoiceProbe probe(*g.h.queue);
    EXPECT_THAT(probe.Choose(), ElementsAreArray(g.names));
    if (hold_us == 1) {
      EXPECT_GT(probe.holds(), 5);
    }
    EXPECT_GE(probe.holds(), 5);
    EXPECT_LE(probe.holds(), 151);  // one per namespace, and one for the ledger alone
  }
}

// The hold's budget counts the ledger and its borrowers: with 320
// borrowing namespaces, finding them alone outlasts a 1 us budget, so the
// first hold ends there (once a turn) and the next one looks on. The choice
// is the one made without a budget.
TEST(ReclaimChoice, AHoldWhoseLedgerAloneOutlastsItsBudgetEndsThereOnceATurn) {
  std::vector<PodRequest> running;
  for (int i = 0; i < 320; ++i) {
    running.push_back(PodBuilder("b" + std::to_string(i), "b-" + Ns(i))
                          .Gpus(1)
                          .OnNode("h" + std::to_string(i / 8), DeviceMask{1} << (i % 8))
                          .Build());
  }
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) names.push_back(Ns(i));
  for (const int32_t hold_us : {0, 1}) {
    SCOPED_TRACE(hold_us);
    QueueOptions o = Guaranteed::Options(20, 1000);
    o.reclaim_choice_hold_us = hold_us;
    Harness h(H100s(40), running, o);
    for (const std::string& ns : names) h.Filter(Guaranteed::Head(ns));
    ReclaimChoiceProbe probe(*h.queue);
    EXPECT_THAT(probe.Choose(), ElementsAreArray(names));
    EXPECT_EQ(probe.ledger_hold(), hold_us == 1);
    if (hold_us == 0) {
      EXPECT_EQ(probe.holds(), 1);
    } else {
      EXPECT_GE(probe.holds(), 2);
      EXPECT_LE(probe.holds(), 21);  // one per namespace at most, and the ledger's
    }
  }
}

// Across ticks the choice goes round the namespaces as one walk would: each
// tick takes the next `per_tick` heads after the last tick's, wrapping.
TEST(ReclaimChoice, TicksTakeTheNamespacesRoundRobinAsOneWalk) {
  for (const int per_tick : {16, 31, 32, 33, 50, 149}) {
    SCOPED_TRACE(per_tick);
    Guaranteed g(150, per_tick);
    ReclaimChoiceProbe probe(*g.h.queue);
    size_t at = 0;  // the model's cursor
    for (int tick = 0; tick < 7; ++tick) {
      std::vector<std::string> expected;
      for (int i = 0; i < per_tick; ++i) expected.push_back(g.names[(at + i) % g.names.size()]);
      at = (at + per_tick) % g.names.size();
      ASSERT_THAT(probe.Choose(), ElementsAreArray(expected)) << "tick " << tick;
    }
  }
}

// Between two holds a namespace sorted before the next one to look at is
// not met this turn, one sorted after it is, and one whose queue emptied is
// skipped; the batch keeps the first hold's queue version, so the commit
// rule re-checks every fact.
TEST(ReclaimChoice, ANamespaceAddedOrGoneBetweenHoldsIsMetOrSkippedByItsName) {
  Guaranteed g(150, 1000);
  ReclaimChoiceProbe probe(*g.h.queue);
  const uint64_t before = probe.queue_version();
  const std::vector<std::string> chosen = probe.Choose([&](int holds) {
    if (holds != 1) return;  // after ns-000 .. ns-031
    const PodRequest gone = Guaranteed::Head("ns-120");
    g.h.state().RemovePod(gone.uid);
    g.h.state().Commit();
    g.h.Filter(Guaranteed::Head("ns-010x"));  // behind the walk: next tick
    g.h.Filter(Guaranteed::Head("ns-100x"));  // ahead of it: met
  });
  std::vector<std::string> expected;
  for (const std::string& ns : g.names) {
    if (ns == "ns-120") continue;
    expected.push_back(ns);
    if (ns == "ns-100") expected.push_back("ns-100x");
  }
  EXPECT_THAT(chosen, ElementsAreArray(expected));
  EXPECT_EQ(probe.chosen_at_version(), before);
  EXPECT_NE(probe.queue_version(), before);
}

}  // namespace
}  // namespace gpusched::queue
