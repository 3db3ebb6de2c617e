// BackfillSlips on timelines worked out by hand: a head passed by a
// backfilled unit slips only when it starts more than a refresh period after
// its estimate while the backfilled unit ran past that estimate on a node
// the head starts on.
#include "scheduler/sim/backfill_slips.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpusched::sim {
namespace {

// Head A (unit 0, position 1, estimated start 1000) and B (unit 1, position
// 2) of namespace 0 wait; B starts by Backfill at 100 on n1 and stops at
// `b_stops`; A starts at `a_starts` on `a_nodes`.
struct Case {
  const char* name;
  double b_stops;
  double a_starts;
  std::vector<std::string> a_nodes;
  bool b_backfilled;
  int other_ns;  // B's namespace (0: A's)
  int64_t passed, slips;
};

TEST(BackfillSlips, CountsOnlyHeadsDelayedByABackfilledUnitOnTheirNode) {
  const std::vector<Case> cases = {
      {"overrun on the head's node", 1500, 1500, {"n1"}, true, 0, 1, 1},
      {"overrun, head on both nodes", 1500, 1500, {"n0", "n1"}, true, 0, 1, 1},
      {"ended before the estimate", 900, 1500, {"n1"}, true, 0, 1, 0},
      {"ended at the estimate", 1000, 1500, {"n1"}, true, 0, 1, 0},
      {"head within the tolerance", 1050, 1060, {"n1"}, true, 0, 1, 0},
      {"head just past the tolerance", 1061, 1061, {"n1"}, true, 0, 1, 1},
      {"head on another node", 1500, 1500, {"n2"}, true, 0, 1, 0},
      {"not a backfill", 1500, 1500, {"n1"}, false, 0, 0, 0},
      {"another namespace", 1500, 1500, {"n1"}, true, 1, 0, 0},
  };
  for (const Case& c : cases) {
    BackfillSlips s;
    s.Refreshed({{0, 0, 1, 1000}, {1, c.other_ns, 2, 100}});
    s.Started(1, c.other_ns, 100, {"n1"}, c.b_backfilled);
    if (c.b_stops < c.a_starts) s.Stopped(1, c.b_stops);
    s.Started(0, 0, c.a_starts, c.a_nodes, false);
    EXPECT_EQ(s.heads_passed(), c.passed) << c.name;
    EXPECT_EQ(s.slips(), c.slips) << c.name;
  }
}

// Across a cohort's Backfill namespaces: B (namespace 1) passes A
// (namespace 0) when both are in the same cohort and A is earlier in the
// estimator's order; B overruns on A's node.
TEST(BackfillSlips, CountsPassesAcrossTheNamespacesOfACohort) {
  struct Cohort {
    const char* name;
    int a_cohort, b_cohort;
    int64_t a_order, b_order;
    int64_t passed, slips;
  };
  const std::vector<Cohort> cases = {
      {"same cohort, A earlier", 0, 0, 0, 1, 1, 1},
      {"same cohort, A later", 0, 0, 2, 1, 0, 0},
      {"other cohorts", 0, 1, 0, 1, 0, 0},
      {"no cohort", -1, -1, 0, 1, 0, 0},
      {"A not estimated in order", 0, 0, -1, 1, 0, 0},
  };
  for (const Cohort& c : cases) {
    BackfillSlips s;
    s.Refreshed({{0, 0, 1, 1000, c.a_order, c.a_cohort}, {1, 1, 1, 100, c.b_order, c.b_cohort}});
    s.Started(1, 1, 100, {"n1"}, true);
    s.Started(0, 0, 1500, {"n1"}, false);
    EXPECT_EQ(s.heads_passed(), c.passed) << c.name;
    EXPECT_EQ(s.slips(), c.slips) << c.name;
  }
}

TEST(BackfillSlips, UnitsBehindOrAlreadyStartedAreNotPassed) {
  BackfillSlips s;
  // Positions 1..3; unit 0 starts after the refresh, then unit 1 (position
  // 2) is backfilled: it passed nobody still waiting; unit 2 is behind it.
  s.Refreshed({{0, 0, 1, 500}, {1, 0, 2, 900}, {2, 0, 3, 700}});
  s.Started(0, 0, 50, {"n0"}, false);
  s.Started(1, 0, 60, {"n0"}, true);
  s.Started(2, 0, 2000, {"n0"}, false);
  EXPECT_EQ(s.heads_passed(), 0);
  EXPECT_EQ(s.slips(), 0);
}

TEST(BackfillSlips, AHeadPassedTwiceCountsOnce) {
  BackfillSlips s;
  s.Refreshed({{0, 0, 1, 1000}, {1, 0, 2, 100}, {2, 0, 3, 100}});
  s.Started(1, 0, 100, {"n1"}, true);
  s.Started(2, 0, 100, {"n2"}, true);
  s.Started(0, 0, 2000, {"n1", "n2"}, false);
  EXPECT_EQ(s.heads_passed(), 1);
  EXPECT_EQ(s.slips(), 1);
}

}  // namespace
}  // namespace gpusched::sim
