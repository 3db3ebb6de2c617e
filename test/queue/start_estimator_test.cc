// Estimated starts on small clusters whose answer is computed by hand in
// each case's comment (HGX H100 nodes, 8 GPUs each; T = now).
#include "scheduler/queue/start_estimator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "test/queue/harness.h"
#include "test/testing/builders.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::MakeState;
using gpusched::testing::PodBuilder;
using testing::Quota;
using testing::Quotas;

constexpr int64_t kNow = 100'000;

// A running pod on `node` holding `devices`, started `ago` seconds before
// now, expected to run `runtime` seconds (0: no estimate).
struct Running {
  std::string name;
  std::string ns;
  std::string node;
  DeviceMask devices;
  int64_t ago;
  int64_t runtime;
  int32_t priority = 0;
  std::string gang;  // "" for a single pod; members of one gang share it
  int32_t gang_size = 0;
};

// A waiting unit: `members` pods of `gpus` GPUs (a gang if > 1), expected to
// run `runtime` seconds (0: no estimate).
struct Waiting {
  std::string name;
  std::string ns;
  int32_t gpus;
  int64_t runtime;
  int32_t members = 1;
  int32_t priority = 0;
  bool preempt_never = false;
};

class Estimator {
 public:
  Estimator(int nodes, const std::vector<Running>& running, QuotaConfig quotas = {}) {
    std::vector<NodeSpec> specs;
    for (int i = 0; i < nodes; ++i) specs.push_back(Hgx8H100("h" + std::to_string(i)));
    std::vector<PodRequest> pods;
    for (const Running& r : running) {
      PodRequest p = PodBuilder(r.name, r.ns)
                         .Gpus(static_cast<int>(std::popcount(r.devices)))
                         .OnNode(r.node, r.devices)
                         .Priority(r.priority)
                         .Build();
      if (!r.gang.empty()) p.gang = r.gang, p.gang_size = r.gang_size;
      p.start_unix = kNow - r.ago;
      runtimes_[p.uid] = r.runtime;
      pods.push_back(p);
    }
    state_ = MakeState(specs, pods);
    quotas_ = std::move(quotas);
    fw_ = std::move(*policy::Framework::Create(ScoringConfig{}));
  }
  // Start (relative to now, -1: none) per waiting pod name, queues by
  // namespace in the order given.
  std::map<std::string, int64_t> Starts(const std::vector<Waiting>& waiting,
                                        std::map<std::string, std::string>* basis = nullptr) {
    auto snapshot = state_->Snapshot();
    QuotaLedger ledger(quotas_, *snapshot);
    StartEstimatorInput in{snapshot.get(), fw_.get(), &ledger};
    std::map<std::string, size_t> queue_of;
    for (const Waiting& w : waiting) {
      if (!queue_of.contains(w.ns)) {
        queue_of[w.ns] = in.queues.size();
        in.queues.push_back({w.ns, {}});
      }
      EstimateUnit unit;
      for (int32_t m = 0; m < w.members; ++m) {
        PodRequest p = PodBuilder(w.members > 1 ? w.name + "-" + std::to_string(m) : w.name, w.ns)
                           .Gpus(w.gpus)
                           .Priority(w.priority)
                           .Created(kNow - 1000 + static_cast<int64_t>(in.queues.size()))
                           .Build();
        p.preempt_never = w.preempt_never;
        if (w.members > 1) p.gang = w.name, p.gang_size = w.members;
        unit.members.push_back(std::make_shared<const PodRequest>(std::move(p)));
      }
      if (w.runtime > 0) unit.runtime = {w.runtime, EstimateSource::kAnnotation, "", {}};
      in.queues[queue_of[w.ns]].units.push_back(std::move(unit));
    }
    in.running_seconds = [this](const PodOnNode& p) { return runtimes_.at(p.uid); };
    in.now_s = kNow;
    in.reclaim = reclaim;
    in.reclaim_lower_priority_only = reclaim_lower_priority_only;
    in.preempt = preempt;
    StartEstimates out = EstimateStarts(in);
    std::map<std::string, int64_t> starts;
    for (const Waiting& w : waiting) {
      const std::string first = w.members > 1 ? w.name + "-0" : w.name;
      const StartEstimate& s = out.by_uid.at("uid-" + w.ns + "-" + first);
      starts[w.name] = s.start_s < 0 ? -1 : s.start_s - kNow;
      if (basis != nullptr) (*basis)[w.name] = s.basis;
    }
    return starts;
  }

  bool reclaim = false;
  bool reclaim_lower_priority_only = true;
  bool preempt = false;

 private:
  std::unique_ptr<ClusterState> state_;
  QuotaConfig quotas_;
  std::unique_ptr<const policy::Framework> fw_;
  std::map<std::string, int64_t> runtimes_;
};

TEST(EstimateStarts, RunningPodsEndAtTheirEstimatesAndWaitingOnesFollowInOrder) {
  // h0 full with A until T+1800. B and C (4 GPUs each) start at T+1800; B
  // runs 1h, C has no estimate (default 1h): both end at T+5400, when D (8)
  // starts.
  Estimator e(1, {{"a", "x", "h0", 0xff, 1800, 3600}});
  std::map<std::string, std::string> basis;
  auto s = e.Starts({{"b", "x", 4, 3600}, {"c", "x", 4, 0}, {"d", "x", 8, 600}}, &basis);
  EXPECT_EQ(s["b"], 1800);
  EXPECT_EQ(s["c"], 1800);
  EXPECT_EQ(s["d"], 5400);
  EXPECT_NE(basis["d"].find("3 running or earlier pods end (1 of them on the default"),
            std::string::npos)
      << basis["d"];
}

TEST(EstimateStarts, WhatFitsNowStartsNow) {
  // h0 has 4 free GPUs: the 4-GPU pod b starts now and fills it; c (2)
  // waits for b, which ends at T+600 (before a at T+3600).
  Estimator e(1, {{"a", "x", "h0", 0x0f, 0, 3600}});
  std::map<std::string, std::string> basis;
  auto s = e.Starts({{"b", "x", 4, 600}, {"c", "y", 2, 60}}, &basis);
  EXPECT_EQ(s["b"], 0);
  EXPECT_EQ(s["c"], 600);
  EXPECT_EQ(basis["b"], "now");
}

TEST(EstimateStarts, StrictFifoHoldsLaterPodsBackBestEffortDoesNot) {
  // h0: 4 GPUs busy until T+3600. Queue: big (8), then small (2).
  // StrictFIFO: big starts at T+3600 and runs 1h; small waits for it: T+7200.
  // BestEffortFIFO: small starts now.
  for (QueueingStrategy strategy :
       {QueueingStrategy::kStrictFifo, QueueingStrategy::kBestEffortFifo}) {
    NamespaceQuota q = Quota(100, 100);
    q.queueing = strategy;
    Estimator e(1, {{"a", "x", "h0", 0x0f, 0, 3600}}, Quotas({{"x", q}}));
    auto s = e.Starts({{"big", "x", 8, 3600}, {"small", "x", 2, 3600}});
    EXPECT_EQ(s["big"], 3600);
    EXPECT_EQ(s["small"], strategy == QueueingStrategy::kStrictFifo ? 7200 : 0);
  }
}

TEST(EstimateStarts, QuotaHoldsAPodBackWhileGpusAreIdle) {
  // x may hold 4 GPUs and holds 4 until T+600: its next 4-GPU pod starts at
  // T+600 although h1 is idle; y (the default: no guarantee, no limit)
  // borrows idle GPUs and starts now.
  Estimator e(2, {{"a", "x", "h0", 0x0f, 0, 600}}, Quotas({{"x", Quota(4, 4)}}, Quota(0, 100)));
  auto s = e.Starts({{"b", "x", 4, 600}, {"c", "y", 4, 600}});
  EXPECT_EQ(s["b"], 600);
  EXPECT_EQ(s["c"], 0);
}

TEST(EstimateStarts, AGangStartsWholeWhenEveryMemberHasRoom) {
  // Two 8-GPU members: h0 is free, h1 busy until T+2000. The gang starts at
  // T+2000, not one member now.
  Estimator e(2, {{"a", "x", "h1", 0xff, 0, 2000}});
  auto s = e.Starts({{"g", "x", 8, 3600, 2}});
  EXPECT_EQ(s["g"], 2000);
}

TEST(EstimateStarts, AnOverrunningPodIsExpectedToEndSoonNotInThePast) {
  // a ran 2h of its 1h estimate: expected to end max(60 s, 900 s) from now.
  Estimator e(1, {{"a", "x", "h0", 0xff, 7200, 3600}});
  auto s = e.Starts({{"b", "x", 8, 60}});
  EXPECT_EQ(s["b"], 900);
}

TEST(EstimateStarts, APodThatNeverFitsHasNoEstimateWithTheReason) {
  // 8 GPUs per node at most: a 16-GPU single pod never fits.
  Estimator e(2, {});
  std::map<std::string, std::string> basis;
  auto s = e.Starts({{"huge", "x", 16, 60}, {"ok", "y", 8, 60}}, &basis);
  EXPECT_EQ(s["huge"], -1);
  EXPECT_NE(basis["huge"].find("does not fit even when every running pod has ended"),
            std::string::npos)
      << basis["huge"];
  EXPECT_EQ(s["ok"], 0);
}

TEST(EstimateStarts, HigherPriorityAcrossNamespacesGoesFirst) {
  // h0 busy until T+100. Namespace y's pod was created later but has a
  // higher priority: it gets h0 at T+100 and x's pod follows at T+100+3600.
  Estimator e(1, {{"a", "z", "h0", 0xff, 0, 100}});
  auto s = e.Starts({{"low", "x", 8, 3600}, {"high", "y", 8, 3600, 1, 100}});
  EXPECT_EQ(s["high"], 100);
  EXPECT_EQ(s["low"], 3700);
  // Equal priorities: creation order (x's pod first).
  s = e.Starts({{"early", "x", 8, 3600}, {"late", "y", 8, 3600}});
  EXPECT_EQ(s["early"], 100);
  EXPECT_EQ(s["late"], 3700);
}

// Guarantee reclaim. Two nodes; b (a borrower) holds all 16 GPUs until
// about T+36,000: b1 on h0 (8, started T-100), b3 and b2 on h1 (4 each,
// started T-50 and T). a waits for 8 GPUs. With reclaim, a's pod within its
// guarantee takes the fewest of b's pods that make room on one node (b1
// alone frees h0; h1 would need b2 and b3), and starts after the 30 s
// termination.
TEST(EstimateStarts, GuaranteeReclaimTakesBorrowersPodsWithinTheRules) {
  struct Case {
    const char* name;
    bool reclaim;
    bool lower_only;
    int64_t a_guarantee, b_guarantee;
    int32_t a_priority;
    int64_t start;
    const char* basis;
  };
  // b1 ends first, and h0 is free then (b2 and b3 end within the same
  // step: 1 % of the time simulated).
  const int64_t ends = 36'000 - 100;
  const Case cases[] = {
      {"reclaim off", false, false, 8, 0, 0, ends, "when 3 running"},
      {"any borrower", true, false, 8, 0, 0, 30, "after guarantee reclaim takes 1 borrowed pod "},
      {"lower priority only, equal priority", true, true, 8, 0, 0, ends, "when 3 running"},
      {"lower priority only, higher priority", true, true, 8, 0, 100, 30,
       "after guarantee reclaim takes 1 borrowed pod "},
      // b may lose 4 GPUs only (16 held, 12 guaranteed): not b1's 8, and
      // b2's 4 on h1 leave b3 there.
      {"never below the borrower's guarantee", true, false, 8, 12, 0, ends, "when 3 running"},
      // a's 8 GPUs are above its guarantee of 4: no reclaim for it.
      {"only within the guarantee", true, false, 4, 0, 0, ends, "when 3 running"},
  };
  for (const Case& c : cases) {
    Estimator e(2,
                {{"b1", "b", "h0", 0xff, 100, 36'000},
                 {"b3", "b", "h1", 0x0f, 50, 36'050},
                 {"b2", "b", "h1", 0xf0, 0, 36'100}},
                Quotas({{"a", Quota(c.a_guarantee, 16)}, {"b", Quota(c.b_guarantee, 16)}}));
    e.reclaim = c.reclaim;
    e.reclaim_lower_priority_only = c.lower_only;
    std::map<std::string, std::string> basis;
    auto s = e.Starts({{"p", "a", 8, 3600, 1, c.a_priority}}, &basis);
    EXPECT_EQ(s["p"], c.start) << c.name;
    EXPECT_NE(basis["p"].find(c.basis), std::string::npos) << c.name << ": " << basis["p"];
  }
}

// A cohort's loan. The same two nodes, all 16 GPUs held by b (guarantee 0)
// as above. a (guarantee 0) waits for 8 GPUs: it would borrow all 8. With
// e (guarantee `e_guarantee`, idle) in a's cohort, the cohort lends e's idle
// guarantee: when it covers the 8, a reclaims b1 from b, which borrows
// outside the cohort, and starts after the 30 s termination. A borrower
// inside the cohort is not reclaimed for a loan.
TEST(EstimateStarts, ACohortsLoanReclaimsFromBorrowersOutsideTheCohort) {
  const int64_t ends = 36'000 - 100;
  const struct {
    const char* name;
    int64_t e_guarantee;
    std::string b_cohort;
    int64_t a_limit;
    int64_t start;
    const char* basis;
  } kRows[] = {
      {"the cohort lends 8", 8, "", 16, 30, "after cohort c's loan reclaims 1 borrowed pod"},
      {"the cohort lends 4 only", 4, "", 16, ends, "when 3 running"},
      // e's 24 less b's 16 borrowed inside the cohort: it lends 8, but not
      // from b.
      {"the borrower is in the cohort", 24, "c", 16, ends, "when 3 running"},
      {"above a's limit", 8, "", 7, -1, ""},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    Estimator e(2,
                {{"b1", "b", "h0", 0xff, 100, 36'000},
                 {"b3", "b", "h1", 0x0f, 50, 36'050},
                 {"b2", "b", "h1", 0xf0, 0, 36'100}},
                Quotas({{"a", Quota(0, row.a_limit, "c")},
                        {"b", Quota(0, 16, row.b_cohort)},
                        {"e", Quota(row.e_guarantee, 16, "c")}}));
    e.reclaim = true;
    e.reclaim_lower_priority_only = false;
    std::map<std::string, std::string> basis;
    auto s = e.Starts({{"p", "a", 8, 3600}}, &basis);
    EXPECT_EQ(s["p"], row.start);
    EXPECT_NE(basis["p"].find(row.basis), std::string::npos) << basis["p"];
  }
}

// A gang is taken whole. b runs gang g: g-0 on h0 and g-1 on h1 (8 GPUs
// each, until about T+36,000). a's p (8 GPUs, within a's guarantee of 8)
// reclaims g-0, and g-1 goes with it: 2 pods. With b guaranteed 8, taking
// g-0 alone would leave b at its guarantee, but the whole gang would leave
// it at 0: nothing is taken, and p waits for g's end.
TEST(EstimateStarts, AGangVictimIsTakenWholeAndCountsWholeAgainstItsGuarantee) {
  const int64_t ends = 36'000 - 100;
  const struct {
    const char* name;
    int64_t b_guarantee;
    int64_t start;
    const char* basis;
  } kRows[] = {
      {"taken whole", 0, 30, "after guarantee reclaim takes 2 borrowed pods "},
      {"the whole gang would go below b's guarantee", 8, ends, "when 2 running"},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    Estimator e(2,
                {{"g-0", "b", "h0", 0xff, 100, 36'000, 0, "g", 2},
                 {"g-1", "b", "h1", 0xff, 100, 36'000, 0, "g", 2}},
                Quotas({{"a", Quota(8, 16)}, {"b", Quota(row.b_guarantee, 16)}}));
    e.reclaim = true;
    e.reclaim_lower_priority_only = false;
    std::map<std::string, std::string> basis;
    auto s = e.Starts({{"p", "a", 8, 3600}}, &basis);
    EXPECT_EQ(s["p"], row.start);
    EXPECT_NE(basis["p"].find(row.basis), std::string::npos) << basis["p"];
  }
}

// A pod taken by reclaim no longer ends where it was. One node: b2 (4 GPUs,
// ends T+500) and b3 (4, ends T+1000) of the borrower b. a's p1 (4, within
// a's guarantee of 4) takes b2; p2 (4 more, above the guarantee: no
// reclaim) waits for b3. b2's old end is void: only one end comes first.
TEST(EstimateStarts, AReclaimedPodsEndIsVoid) {
  Estimator e(1, {{"b2", "b", "h0", 0xf0, 0, 500}, {"b3", "b", "h0", 0x0f, 0, 1000}},
              Quotas({{"a", Quota(4, 8)}, {"b", Quota(0, 8)}}));
  e.reclaim = true;
  e.reclaim_lower_priority_only = false;
  std::map<std::string, std::string> basis;
  auto s = e.Starts({{"p1", "a", 4, 3600}, {"p2", "a", 4, 3600}}, &basis);
  EXPECT_EQ(s["p1"], 30);
  EXPECT_EQ(s["p2"], 1000);
  EXPECT_NE(basis["p2"].find("when 1 running or earlier pods end"), std::string::npos)
      << basis["p2"];
}

// Preemption. h0 is full until T+36,000 with v (8 GPUs, priority 0, of
// `victim_ns`). a's pod p (8 GPUs) takes it as the preempt verb would, and
// starts after the 30 s termination; otherwise it waits for v's end.
TEST(EstimateStarts, PreemptionTakesLowerPriorityPodsAsThePreemptVerbAllows) {
  struct Case {
    const char* name;
    bool preempt;
    int32_t priority;
    bool never;
    int64_t a_guarantee, b_guarantee;
    const char* victim_ns;
    int64_t start;
  };
  const int64_t ends = 36'000;
  const Case cases[] = {
      {"lower priority", true, 100, false, 8, 0, "b", 30},
      {"equal priority", true, 0, false, 8, 0, "b", ends},
      {"preemption off", false, 100, false, 8, 0, "b", ends},
      {"preemptionPolicy: Never", true, 100, true, 8, 0, "b", ends},
      // p would borrow: another namespace's pod only while that one borrows.
      {"borrowing head, victim within its guarantee", true, 100, false, 0, 8, "b", ends},
      {"borrowing head, victim borrows", true, 100, false, 0, 0, "b", 30},
      {"own namespace's lower-priority pod", true, 100, false, 0, 0, "a", 30},
  };
  for (const Case& c : cases) {
    Estimator e(1, {{"v", c.victim_ns, "h0", 0xff, 0, ends, 0}},
                Quotas({{"a", Quota(c.a_guarantee, 16)}, {"b", Quota(c.b_guarantee, 16)}}));
    e.preempt = c.preempt;
    std::map<std::string, std::string> basis;
    auto s = e.Starts({{"p", "a", 8, 3600, 1, c.priority, c.never}}, &basis);
    EXPECT_EQ(s["p"], c.start) << c.name << ": " << basis["p"];
    if (c.start == 30) {
      EXPECT_EQ(basis["p"], "after preempting 1 lower-priority pod for it") << c.name;
    }
  }
}

}  // namespace
}  // namespace gpusched::queue
