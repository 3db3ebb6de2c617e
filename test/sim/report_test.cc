// The HTML reports: what each page holds (scenario, per-policy comparison
// charts, per-namespace usage against the guarantee), escaping, and the
// axis labels. That the pages render is report_render_test.sh's job.
#include "scheduler/sim/report.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/sim/replay.h"

namespace gpusched::sim {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

FgdResult FgdRun(const std::string& policy, double alloc_at_100) {
  FgdResult r;
  r.policy = policy;
  r.trace = "default";
  for (int k = 0; k <= 130; k += 10) {
    r.curve.push_back({k, k <= 90 ? k : std::min(alloc_at_100, static_cast<double>(k)), 5, 2});
  }
  return r;
}

TEST(FgdReport, ShowsTheScenarioTheGapToTheBestPolicyAndAZoom) {
  const std::string html = FgdReportHtml({FgdRun("fgd", 96.2), FgdRun("gpusched", 97.0)},
                                         {{"protocol", "fgd"}, {"seeds", "42, 43"}});
  EXPECT_NE(html.find("<th>seeds</th><td>42, 43</td>"), std::string::npos);
  // Unallocated at 100 and the distance to the best policy there.
  EXPECT_NE(html.find("<td>fgd</td><td>3.80</td><td>+0.80</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>gpusched</td><td>3.00</td><td>+0.00</td>"), std::string::npos);
  EXPECT_NE(html.find("Allocation minus the best policy at each point"), std::string::npos);
  EXPECT_NE(html.find("zoomed (arrived 80-130 %)"), std::string::npos);
  // Four charts of two policies each.
  EXPECT_EQ(Count(html, "<svg"), 4);
  EXPECT_EQ(Count(html, "<polyline"), 8);
  // The y-axis title is turned along the axis, apart from the tick labels.
  EXPECT_NE(html.find("rotate(-90)' text-anchor='middle'>allocated %"), std::string::npos);
  EXPECT_EQ(html.find(">-0<"), std::string::npos);
}

// One policy: no "minus the best" chart (it would be a flat line at 0);
// the authors' FGD curve drawn dashed on the allocation charts when their
// results cover the trace; charts scale with the page.
TEST(FgdReport, SingleRunDrawsNoGapChartAndTheAuthorsFgdLine) {
  const std::string alone = FgdReportHtml({FgdRun("gpusched", 97.0)}, {});
  EXPECT_EQ(alone.find("Allocation minus the best policy"), std::string::npos);
  EXPECT_EQ(Count(alone, "<svg"), 3);
  EXPECT_EQ(Count(alone, "stroke-dasharray"), 0);
  EXPECT_NE(alone.find("viewBox='0 0 760 360'"), std::string::npos);
  EXPECT_NE(alone.find("width:100%"), std::string::npos);
  auto authors = ParseAuthorsAllocation(
      "workload,sc_policy,tune,seed,total_gpus,0,100,130\n"
      "openb_pod_list_default,06-FGD,1.3,42,6212,0,95.0,97.0\n"
      "openb_pod_list_default,06-FGD,1.3,43,6212,0,96.0,98.0\n");
  ASSERT_TRUE(authors.ok()) << authors.status();
  const std::string with = FgdReportHtml({FgdRun("gpusched", 97.0)}, {}, &*authors);
  EXPECT_NE(with.find("fgd (authors)"), std::string::npos);
  // Allocation chart and its zoom: the dashed line, mean of the seeds.
  EXPECT_EQ(Count(with, "stroke-dasharray"), 2);
  EXPECT_EQ(authors->alloc_curve.at({"default", "fgd"}).at(100), (std::vector<double>{95, 96}));
  // Another trace: no line.
  FgdResult other = FgdRun("gpusched", 97.0);
  other.trace = "cpu050";
  EXPECT_EQ(FgdReportHtml({other}, {}, &*authors).find("fgd (authors)"), std::string::npos);
}

ReplayResult Replay(const std::string& policy, bool timeline, double wait) {
  ReplayResult r;
  r.policy = policy;
  r.jobs = 3;
  r.jct_sorted = {100, 3600, 7200};
  r.queue_sorted = {0, 0, 600};
  r.per_ns["team-a"].quota_gpus = 16;
  r.per_ns["team-b"].quota_gpus = 8;
  if (timeline) {
    for (double t : {0.0, 3600.0, 7200.0}) {
      TimelinePoint p;
      p.t = t;
      p.utilisation = 0.5;
      p.used_gpus = {{"team-a", 20}, {"team-b", 4}};
      p.queue_wait = {{"team-a", wait}, {"team-b", 0}};
      r.timeline.push_back(p);
    }
  }
  return r;
}

TEST(ReplayReport, ComparesEveryPolicyAndShowsUsageAgainstTheGuarantee) {
  const std::string html = ReplayReportHtml(
      {Replay("fifo-pool", false, 0), Replay("gpusched", true, 1800)}, {{"load", "durations x 1"}});
  EXPECT_NE(html.find("<th>load</th><td>durations x 1</td>"), std::string::npos);
  EXPECT_NE(html.find("Job completion time (CDF)"), std::string::npos);
  EXPECT_NE(html.find("Queueing delay (CDF)"), std::string::npos);
  EXPECT_NE(html.find("GPU utilisation over time"), std::string::npos);
  // Usage against the guarantee only for the policy with a timeline: one
  // solid and one dashed line per namespace.
  EXPECT_EQ(Count(html, "GPUs in use per namespace against its guarantee"), 1);
  EXPECT_NE(html.find("against its guarantee (gpusched)"), std::string::npos);
  EXPECT_EQ(Count(html, "stroke-dasharray"), 2);
  EXPECT_NE(html.find("Mean wait of queued jobs per namespace (gpusched)"), std::string::npos);
  // CDFs: 2 policies x 2 charts; utilisation 1; usage 4; waits 2.
  EXPECT_EQ(Count(html, "<polyline"), 11);
}

TEST(ReplayReport, SaysSoWhenNothingWaitedInsteadOfAFlatLine) {
  const std::string html = ReplayReportHtml({Replay("gpusched", true, 0)}, {});
  EXPECT_EQ(html.find("Mean wait of queued jobs"), std::string::npos);
  EXPECT_NE(html.find("No job waited at any sample"), std::string::npos);
}

TEST(ReplayReport, EscapesNames) {
  const std::string html =
      ReplayReportHtml({Replay("<script>", false, 0)}, {{"workload", "a&b's.json"}});
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script>"), std::string::npos);
  EXPECT_NE(html.find("a&amp;b&#39;s.json"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::sim
