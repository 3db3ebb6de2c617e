// Runtime estimates: the duration parser, the order of sources with bad
// input falling through, the bounded history and its quantiles, and the
// observer that turns pods leaving nodes into history.
#include "scheduler/queue/runtime_estimates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/util/strings.h"
#include "scheduler/queue/run_observer.h"
#include "test/testing/builders.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::MakeState;
using gpusched::testing::PodBuilder;

TEST(ParseRuntime, ReadsGoDurationsInHoursMinutesSeconds) {
  struct Case {
    std::string text;
    int64_t seconds;  // -1: an error containing `error`
    std::string error;
  };
  const Case cases[] = {
      {"2h30m", 9000, ""},
      {"90m", 5400, ""},
      {"3600s", 3600, ""},
      {"1.5h", 5400, ""},
      {"1h0m30s", 3630, ""},
      {"+45s", 45, ""},
      {"", -1, "empty duration"},
      {"-1h", -1, "'-1h' is negative"},
      {"2 hours", -1, "needs a unit h, m or s"},
      {"90", -1, "needs a unit h, m or s at '90'"},
      {"h", -1, "expected a number at 'h'"},
      {"0s", -1, "under 1s"},
      {"0.2s", -1, "under 1s"},
      {"721h", -1, "longer than 720h"},
      {"9999999999999h", -1, "number too long"},
      {"1d", -1, "needs a unit"},
  };
  for (const Case& c : cases) {
    auto r = ParseRuntime(c.text);
    if (c.seconds >= 0) {
      ASSERT_TRUE(r.ok()) << c.text << ": " << r.status();
      EXPECT_EQ(*r, c.seconds) << c.text;
    } else {
      ASSERT_FALSE(r.ok()) << c.text << " parsed as " << *r;
      EXPECT_NE(r.status().message().find(c.error), std::string::npos)
          << c.text << ": " << r.status().message();
    }
  }
}

TEST(FormatRuntime, WritesWhatParseRuntimeReads) {
  for (int64_t s : {1, 59, 60, 61, 3600, 3661, 9000, 86400 + 5}) {
    auto back = ParseRuntime(FormatRuntime(s));
    ASSERT_TRUE(back.ok()) << FormatRuntime(s);
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(FormatRuntime(9000), "2h30m");
}

// A history with workload w of ns "a" at 2 GPUs: runs of 100, 200, 300 s.
RuntimeHistory ThreeRuns() {
  RuntimeHistory h;
  for (int64_t s : {300, 100, 200}) h.Record("a", "w", 2, s);
  return h;
}

TEST(EstimateRuntime, TakesTheFirstUsableSourceAndSaysWhyOthersWereRefused) {
  struct Case {
    std::string name;
    int64_t deadline;
    std::string annotation;
    std::string workload;
    int32_t gpus;
    int64_t seconds;
    EstimateSource source;
    std::vector<std::string> rejected;  // substrings, in order
    int64_t job_deadline = 0;           // the controlling Job's
    int64_t job_started_ago = -1;       // -1: the Job has not started
  };
  const Case cases[] = {
      {"deadline first", 7200, "30m", "w", 2, 7200, EstimateSource::kDeadline, {}},
      {"annotation next", 0, "30m", "w", 2, 1800, EstimateSource::kAnnotation, {}},
      {"workload history", 0, "", "w", 2, 200, EstimateSource::kWorkloadHistory, {}},
      {"namespace history", 0, "", "other", 2, 200, EstimateSource::kNamespaceHistory, {}},
      {"nothing", 0, "", "other", 4, 0, EstimateSource::kNone, {}},
      {"negative deadline",
       -5,
       "",
       "w",
       2,
       200,
       EstimateSource::kWorkloadHistory,
       {"activeDeadlineSeconds -5 is not a positive integer"}},
      {"absurd deadline",
       100LL * 24 * 3600,
       "1h",
       "w",
       2,
       3600,
       EstimateSource::kAnnotation,
       {"activeDeadlineSeconds 8640000 is longer than 720h"}},
      {"malformed annotation",
       0,
       "soon",
       "w",
       2,
       200,
       EstimateSource::kWorkloadHistory,
       {"gpusched.io/expected-runtime: 'soon': expected a number"}},
      {"both bad, no history",
       -1,
       "3x",
       "other",
       4,
       0,
       EstimateSource::kNone,
       {"activeDeadlineSeconds -1", "expected-runtime: '3x'"}},
      // The Job's deadline comes after the pod's own and before the
      // annotation; what is left of it, counted from the Job's start.
      {"pod deadline before the Job's",
       7200,
       "30m",
       "w",
       2,
       7200,
       EstimateSource::kDeadline,
       {},
       3600,
       100},
      {"Job deadline, time left",
       0,
       "30m",
       "w",
       2,
       2600,
       EstimateSource::kJobDeadline,
       {},
       3600,
       1000},
      {"Job not started: all of it",
       0,
       "30m",
       "w",
       2,
       3600,
       EstimateSource::kJobDeadline,
       {},
       3600,
       -1},
      {"Job past its deadline: a minute",
       0,
       "",
       "w",
       2,
       60,
       EstimateSource::kJobDeadline,
       {},
       3600,
       7200},
      {"bad pod deadline, then the Job's",
       -5,
       "",
       "w",
       2,
       600,
       EstimateSource::kJobDeadline,
       {"activeDeadlineSeconds -5"},
       600,
       -1},
      {"absurd Job deadline",
       0,
       "1h",
       "w",
       2,
       3600,
       EstimateSource::kAnnotation,
       {"Job spec.activeDeadlineSeconds 8640000 is longer than 720h"},
       100LL * 24 * 3600,
       10},
  };
  const RuntimeHistory h = ThreeRuns();
  const int64_t now = 1'700'000'000;
  for (const Case& c : cases) {
    PodRequest pod = PodBuilder("p", "a").Gpus(c.gpus).Build();
    pod.workload = c.workload;
    pod.active_deadline_s = c.deadline;
    pod.expected_runtime = c.annotation;
    pod.job_deadline_s = c.job_deadline;
    pod.job_start_unix = c.job_started_ago < 0 ? 0 : now - c.job_started_ago;
    RuntimeEstimate e = EstimateRuntime(pod, h, now);
    EXPECT_EQ(e.seconds, c.seconds) << c.name;
    EXPECT_EQ(e.source, c.source) << c.name << ": " << e.detail;
    ASSERT_EQ(e.rejected.size(), c.rejected.size()) << c.name;
    for (size_t i = 0; i < c.rejected.size(); ++i) {
      EXPECT_NE(e.rejected[i].find(c.rejected[i]), std::string::npos)
          << c.name << ": " << e.rejected[i];
    }
    EXPECT_FALSE(e.detail.empty()) << c.name;
    if (c.source == EstimateSource::kJobDeadline) {
      EXPECT_EQ(SourceName(e.source), "job-activeDeadlineSeconds");
      EXPECT_NE(e.detail.find(gpusched::StrCat("Job spec.activeDeadlineSeconds ", c.job_deadline)),
                std::string::npos)
          << c.name << ": " << e.detail;
    }
    // The board keeps only the facts; rendered again for the pod, they
    // give the same estimate, text included.
    RuntimeEstimate again = DescribeRuntime(pod, FactsOf(e), now);
    EXPECT_EQ(again.seconds, e.seconds) << c.name;
    EXPECT_EQ(again.source, e.source) << c.name;
    EXPECT_EQ(again.detail, e.detail) << c.name;
    EXPECT_EQ(again.rejected, e.rejected) << c.name;
    EXPECT_EQ(again.p90, e.p90) << c.name;
    EXPECT_EQ(again.runs, e.runs) << c.name;
  }
}

TEST(EstimateRuntime, NoEstimateSaysSo) {
  PodRequest pod = PodBuilder("p", "a").Gpus(4).Build();
  RuntimeEstimate e = EstimateRuntime(pod, RuntimeHistory{}, 0);
  EXPECT_FALSE(e.known());
  EXPECT_EQ(SourceName(e.source), "none");
  EXPECT_NE(e.detail.find("no estimate"), std::string::npos) << e.detail;
}

TEST(RuntimeHistory, QuantilesAreNearestRankOverTheLastRunsOnly) {
  RuntimeHistory h({.per_key = 4, .max_keys = 100});
  for (int64_t s : {10, 20, 30, 40}) h.Record("a", "w", 1, s);
  auto q = h.ForWorkload("a", "w");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->p50, 20);
  EXPECT_EQ(q->p90, 40);
  EXPECT_EQ(q->runs, 4);
  // Two more: the ring drops 10 and 20.
  h.Record("a", "w", 1, 50);
  h.Record("a", "w", 1, 60);
  q = h.ForWorkload("a", "w");
  EXPECT_EQ(q->p50, 40);  // of 30, 40, 50, 60
  EXPECT_EQ(q->runs, 4);
  EXPECT_EQ(h.ForShape("a", 1)->p50, 40);
  EXPECT_FALSE(h.ForShape("a", 2).has_value());
}

TEST(RuntimeHistory, IgnoresAbsurdRuntimesAndStaysBounded) {
  RuntimeHistory h({.per_key = 2, .max_keys = 6});
  h.Record("a", "w", 1, 0);
  h.Record("a", "w", 1, -3);
  h.Record("a", "w", 1, kMaxRuntimeSeconds + 1);
  EXPECT_EQ(h.keys(), 0u);
  for (int i = 0; i < 20; ++i) h.Record("a", "w" + std::to_string(i), 1, 100 + i);
  EXPECT_LE(h.keys(), 6u);
  EXPECT_LE(h.Runs().size(), 12u);
  // The most recent workload is kept, the first ones are dropped.
  EXPECT_TRUE(h.ForWorkload("a", "w19").has_value());
  EXPECT_FALSE(h.ForWorkload("a", "w0").has_value());
  EXPECT_EQ(h.ForShape("a", 1)->runs, 2);
}

TEST(RunObserver, RecordsCompletedRunsOfPodsThatLeaveTheirNodes) {
  PodRequest done = PodBuilder("done", "a").Gpus(2).OnNode("h0", 0b11).Build();
  PodRequest failed = PodBuilder("failed", "a").Gpus(2).OnNode("h0", 0b1100).Build();
  done.start_unix = 1000;
  done.workload = "train";
  failed.start_unix = 1000;
  auto state = MakeState({Hgx8H100("h0")}, {done, failed});
  RunObserver obs;
  RuntimeHistory h;
  auto end_of = [](const std::string& uid, int64_t now) -> std::optional<int64_t> {
    if (uid == "uid-a-failed") return std::nullopt;
    return now;
  };
  obs.Observe(state->Snapshot(), 1500, end_of, &h);
  EXPECT_EQ(obs.tracked(), 2u);
  EXPECT_EQ(h.keys(), 0u);
  state->RemovePod(done.uid);
  state->RemovePod(failed.uid);
  state->Commit();
  obs.Observe(state->Snapshot(), 4600, end_of, &h);
  EXPECT_EQ(obs.tracked(), 0u);
  auto q = h.ForWorkload("a", "train");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->p50, 3600);
  EXPECT_EQ(h.ForShape("a", 2)->runs, 1);  // the failed run is not a runtime
}

TEST(RunObserver, SeedsFromFinishedPodsOnce) {
  PodRequest ok = PodBuilder("ok", "a").Gpus(1).Phase(PodPhase::kSucceeded).Build();
  ok.start_unix = 100;
  ok.finish_unix = 700;
  PodRequest no_end = ok;
  no_end.uid = "uid-a-no-end";
  no_end.finish_unix = 0;
  PodRequest failed = ok;
  failed.uid = "uid-a-failed";
  failed.phase = PodPhase::kFailed;
  RunObserver obs;
  RuntimeHistory h;
  obs.Seed({ok, no_end, failed}, &h);
  obs.Seed({ok}, &h);
  auto q = h.ForShape("a", 1);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->runs, 1);
  EXPECT_EQ(q->p50, 600);
}

// A restart finds finished pods in no particular order: the history keeps
// the most recent runs of a key, as it would have had it watched them end.
TEST(RunObserver, SeedKeepsTheMostRecentRunsWhateverTheOrder) {
  RuntimeHistory::Options o;
  o.per_key = 2;
  RuntimeHistory h(o);
  std::vector<PodRequest> pods;
  for (int i = 0; i < 4; ++i) {
    PodRequest p = PodBuilder("run-" + std::to_string(i), "a").Gpus(1).Build();
    p.phase = PodPhase::kSucceeded;
    p.start_unix = 1000 * (i + 1);
    p.finish_unix = p.start_unix + 100 * (i + 1);  // runs 100, 200, 300, 400 s
    pods.push_back(p);
  }
  std::swap(pods[0], pods[3]);  // the newest first, the oldest last
  RunObserver obs;
  obs.Seed(pods, &h);
  auto q = h.ForShape("a", 1);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->runs, 2);
  EXPECT_GE(q->p50, 300);  // the runs of 300 and 400 s, not the first two
}

// Pods that leave their nodes between two observations are recorded oldest
// end first, then by UID, never in hash order: absl's hash is seeded per
// process, and a full ring that kept other runs in another process made the
// replay's estimates (and Backfill's decisions) differ from run to run.
TEST(RunObserver, RecordsPodsThatLeaveTogetherOldestEndFirstThenByUid) {
  // 16 one-GPU pods on two nodes; the end times repeat, so the UID breaks
  // ties. Names run against the ends to tell the two orders apart.
  std::vector<PodRequest> pods;
  std::map<std::string, int64_t> end, start;  // by uid
  for (int i = 0; i < 16; ++i) {
    const std::string node = i < 8 ? "h0" : "h1";
    PodRequest p = PodBuilder("p" + std::to_string(100 - i), "a")
                       .Gpus(1)
                       .OnNode(node, uint64_t{1} << (i % 8))
                       .Build();
    p.start_unix = 1000 + i;            // runtimes all differ
    end[p.uid] = 2000 + 100 * (i / 2);  // two pods end at each time
    start[p.uid] = p.start_unix;
    pods.push_back(p);
  }
  auto state = MakeState({Hgx8H100("h0"), Hgx8H100("h1")}, pods);
  RunObserver obs;
  RuntimeHistory h;
  auto end_of = [&end](const std::string& uid, int64_t) -> std::optional<int64_t> {
    return end.at(uid);
  };
  obs.Observe(state->Snapshot(), 1500, end_of, &h);
  for (const PodRequest& p : pods) state->RemovePod(p.uid);
  state->Commit();
  obs.Observe(state->Snapshot(), 9000, end_of, &h);
  std::vector<std::pair<int64_t, std::string>> want;
  for (const auto& [uid, e] : end) want.emplace_back(e, uid);
  std::sort(want.begin(), want.end());
  std::vector<int64_t> want_seconds, got_seconds;
  for (const auto& [e, uid] : want) want_seconds.push_back(e - start[uid]);
  for (const RuntimeHistory::Run& r : h.Runs()) {
    if (r.workload.empty()) got_seconds.push_back(r.seconds);
  }
  EXPECT_EQ(got_seconds, want_seconds);  // the namespace/GPU-count ring, oldest first
}

}  // namespace
}  // namespace gpusched::queue
