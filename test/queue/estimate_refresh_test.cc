// The estimate refresh through QueueManager: what the debug pages and the
// position annotations get, and history learnt from pods that complete.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "scheduler/queue/queue_wiring.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::PodBuilder;
using testing::Harness;
using ::testing::HasSubstr;

// Harness time: now_ms 1,000,000, so now is 1000 s.
constexpr int64_t kNowS = 1000;

PodRequest RunningPod(const std::string& name, int gpus, DeviceMask devices, int64_t started,
                      const std::string& runtime) {
  PodRequest p = PodBuilder(name, "team-a").Gpus(gpus).OnNode("h0", devices).Build();
  p.start_unix = started;
  p.expected_runtime = runtime;
  p.workload = "train";
  return p;
}

QueuedPod Find(const std::vector<QueuedPod>& pods, const std::string& name) {
  for (const QueuedPod& q : pods) {
    if (q.name == name) return q;
  }
  ADD_FAILURE() << name << " not listed";
  return {};
}

TEST(EstimateRefresh, PositionsAndDebugPagesCarryTheLastRefresh) {
  // h0: a running 8-GPU pod started at 400 s, expected 1h: ends at 4000 s.
  Harness h({Hgx8H100("h0")}, {RunningPod("run", 8, 0xff, 400, "1h")}, QueueOptions{});
  PodRequest next = PodBuilder("next", "team-a").Gpus(8).Created(1).Build();
  next.expected_runtime = "30m";
  PodRequest after = PodBuilder("after", "team-a").Gpus(8).Created(2).Build();
  h.Submit(next);
  h.Submit(after);
  // Before any refresh: said so.
  EXPECT_EQ(Find(h.queue->Positions(10), "next").estimated_start_unix, -1);
  h.queue->RefreshEstimates();
  auto pods = h.queue->Positions(10);
  const QueuedPod n = Find(pods, "next"), a = Find(pods, "after");
  EXPECT_EQ(n.estimated_start_unix, 4000);
  EXPECT_EQ(n.runtime_seconds, 1800);
  EXPECT_EQ(n.runtime_source, "annotation");
  // after: next runs 30 min from 4000 s.
  EXPECT_EQ(a.estimated_start_unix, 5800);
  EXPECT_EQ(a.runtime_source, "none");
  auto report = h.queue->ExplainPod("team-a", "after");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->estimated_start_unix, 5800);
  EXPECT_THAT(report->runtime_detail, HasSubstr("no estimate"));
  EXPECT_THAT(report->estimate_basis, HasSubstr("2 running or earlier pods end"));
  auto queues = h.queue->Report();
  ASSERT_FALSE(queues.namespaces.empty());
  EXPECT_EQ(queues.namespaces[0].queue[0].estimated_start_unix, 4000);
}

// The serving thread refreshes `first` after its start, not a whole period
// later: a pod pending when the server starts has an estimate within
// seconds (here the period is an hour; the first refresh comes at 20 ms).
TEST(EstimateRefresh, TheThreadsFirstRefreshComesAfterFirstNotAfterAPeriod) {
  Harness h({Hgx8H100("h0")}, {RunningPod("run", 8, 0xff, 400, "1h")}, QueueOptions{});
  PodRequest next = PodBuilder("next", "team-a").Gpus(8).Created(1).Build();
  next.expected_runtime = "30m";
  h.Submit(next);
  EstimateThread thread(h.queue.get(), std::chrono::milliseconds(20), std::chrono::hours(1),
                        std::chrono::milliseconds(1000));
  int64_t start = -1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (start == -1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    start = Find(h.queue->Positions(10), "next").estimated_start_unix;
  }
  EXPECT_EQ(start, 4000);
}

// The serving thread's simulation runs on an IdleRunner: on another thread,
// at the lowest CPU priority, with a YieldPoint, and the caller goes on only
// once it has run. What it publishes is what a refresh in place publishes.
TEST(EstimateRefresh, ASimulationOnTheIdleRunnerPublishesWhatOneInPlaceDoes) {
  IdleRunner runner;
  for (int round = 0; round < 3; ++round) {
    std::thread::id ran_on;
    bool had_yield = false, lowest = false, ran = false;
    runner.Run([&](YieldPoint* yield) {
      ran_on = std::this_thread::get_id();
      had_yield = yield != nullptr;
      lowest = sched_getscheduler(0) == SCHED_IDLE ||
               getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))) == 19;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ran = true;
    });
    EXPECT_TRUE(ran);  // Run returned after the job, not before
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_TRUE(had_yield);
    EXPECT_TRUE(lowest);
  }
  auto starts = [](bool on_runner, IdleRunner* r) {
    Harness h({Hgx8H100("h0")}, {RunningPod("run", 8, 0xff, 400, "1h")}, QueueOptions{});
    for (int i = 0; i < 6; ++i) {
      PodRequest p = PodBuilder("p" + std::to_string(i), "team-a").Gpus(4).Created(i).Build();
      p.expected_runtime = std::to_string(10 + i) + "m";
      h.Submit(p);
    }
    if (on_runner) {
      h.queue->RefreshEstimates(std::chrono::milliseconds(1000),
                                [r](IdleRunner::Job simulate) { r->Run(simulate); });
    } else {
      h.queue->RefreshEstimates();
    }
    std::map<std::string, int64_t> out;
    for (const QueuedPod& q : h.queue->Positions(10)) out[q.name] = q.estimated_start_unix;
    return out;
  };
  const auto in_place = starts(false, nullptr);
  EXPECT_EQ(in_place.size(), 6u);
  EXPECT_EQ(in_place.at("p0"), 4000);
  EXPECT_EQ(starts(true, &runner), in_place);
}

// A refresh copies only the namespaces whose queue changed since the last
// one; the others' copies are reused. Differential: after each round of
// random queue changes (pods queued, gone, changed in place, moved by a
// new priority, gang members), every pending pod's estimate equals the one
// a manager copying every namespace (recompute_from_scratch) publishes on
// the same cluster, and untouched namespaces were reused.
TEST(EstimateRefresh, AQueueCopyIsReusedOnlyWhileItsNamespaceIsUnchanged) {
  const std::vector<NodeSpec> nodes = {Hgx8H100("h0"), Hgx8H100("h1"), Hgx8H100("h2")};
  const std::vector<PodRequest> running = {RunningPod("run", 8, 0xff, 400, "1h")};
  QueueOptions scratch;
  scratch.recompute_from_scratch = true;
  Metrics metrics;
  Harness inc(nodes, running, QueueOptions{}), ref(nodes, running, scratch);
  inc.metrics = &metrics;
  inc.Restart();
  std::mt19937 rng(29);
  std::map<std::string, PodRequest> pending;  // by uid
  const std::vector<std::string> runtimes = {"", "10m", "1h", "3h"};
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto submit = [&](const PodRequest& p) {
    inc.Submit(p);
    ref.Submit(p);
    pending[p.uid] = p;
  };
  int created = 0;
  auto fresh_pod = [&](const std::string& ns) {
    ++created;
    PodRequest p = PodBuilder("p" + std::to_string(created), ns)
                       .Gpus(1 + static_cast<int>(pick(8)))
                       .Priority(static_cast<int32_t>(pick(3)) * 100)
                       .Created(created)
                       .Build();
    p.expected_runtime = runtimes[pick(runtimes.size())];
    return p;
  };
  for (int round = 0; round < 40; ++round) {
    for (int change = 1 + static_cast<int>(pick(3)); change > 0; --change) {
      const std::string ns = "team-" + std::to_string(pick(6));
      auto some = pending.begin();
      if (!pending.empty()) std::advance(some, pick(pending.size()));
      switch (pending.empty() ? 0 : pick(5)) {
        case 0:
          submit(fresh_pod(ns));
          break;
        case 1: {  // a gang of two
          PodRequest a = fresh_pod(ns), b = fresh_pod(ns);
          const std::string gang = "g" + std::to_string(created);
          a.gang = b.gang = gang;
          a.gang_size = b.gang_size = 2;
          submit(a);
          submit(b);
          break;
        }
        case 2: {  // gone (bound elsewhere, deleted)
          const std::string uid = some->first;
          for (Harness* h : {&inc, &ref}) {
            h->state().RemovePod(uid);
            h->state().Commit();
          }
          pending.erase(some);
          break;
        }
        case 3: {  // changed in place: its runtime annotation
          PodRequest p = some->second;
          p.expected_runtime = runtimes[pick(runtimes.size())];
          submit(p);
          break;
        }
        default: {  // moved: a new priority
          PodRequest p = some->second;
          p.priority = p.priority == 200 ? 0 : p.priority + 100;
          submit(p);
          break;
        }
      }
    }
    inc.now_ms = ref.now_ms = inc.now_ms + 10'000;
    inc.queue->RefreshEstimates();
    ref.queue->RefreshEstimates();
    for (const auto& [uid, pod] : pending) {
      auto a = inc.queue->EstimateOf(uid), b = ref.queue->EstimateOf(uid);
      ASSERT_EQ(a.has_value(), b.has_value())
          << "round " << round << " " << pod.ns << "/" << pod.name;
      if (!a.has_value()) continue;
      EXPECT_EQ(a->start.start_s, b->start.start_s) << "round " << round << " " << pod.name;
      EXPECT_EQ(a->start.basis, b->start.basis) << "round " << round << " " << pod.name;
      EXPECT_EQ(a->runtime.seconds, b->runtime.seconds) << "round " << round << " " << pod.name;
      EXPECT_EQ(a->runtime.source, b->runtime.source) << "round " << round << " " << pod.name;
    }
  }
  const int64_t reused =
      metrics.CounterValue("gpusched_estimate_queue_copies_total", {{"copy", "reused"}});
  const int64_t copied =
      metrics.CounterValue("gpusched_estimate_queue_copies_total", {{"copy", "copied"}});
  EXPECT_GT(reused, 40);  // at most 3 of 6 namespaces change a round
  EXPECT_GT(copied, 40);
}

TEST(EstimateRefresh, ARunningPodOfAJobEndsAtTheJobsDeadline) {
  // Not seen waiting (as after a restart): its Job started at 300 s with a
  // 3000 s deadline, so it ends by 3300 s whenever it started itself.
  PodRequest run = RunningPod("run", 8, 0xff, 400, "");
  run.job_deadline_s = 3000;
  run.job_start_unix = 300;
  Harness h({Hgx8H100("h0")}, {run}, QueueOptions{});
  h.Submit(PodBuilder("next", "team-a").Gpus(8).Created(1).Build());
  h.queue->RefreshEstimates();
  EXPECT_EQ(Find(h.queue->Positions(10), "next").estimated_start_unix, 3300);
}

TEST(EstimateRefresh, ARejectedAnnotationIsExplainedAndTheNextSourceUsed) {
  Harness h({Hgx8H100("h0")}, {}, QueueOptions{});
  PodRequest p = PodBuilder("p", "team-a").Gpus(2).Build();
  p.expected_runtime = "two hours";
  p.active_deadline_s = -7;
  h.Submit(p);
  h.queue->RefreshEstimates();
  auto report = h.queue->ExplainPod("team-a", "p");
  ASSERT_TRUE(report.has_value());
  ASSERT_EQ(report->runtime_rejected.size(), 2u);
  EXPECT_THAT(report->runtime_rejected[0], HasSubstr("activeDeadlineSeconds -7"));
  EXPECT_THAT(report->runtime_rejected[1], HasSubstr("'two hours'"));
  EXPECT_EQ(report->runtime_source, "none");
  EXPECT_EQ(report->estimated_start_unix, kNowS);  // it fits now all the same
}

TEST(EstimateRefresh, CompletedRunsTeachTheHistory) {
  Harness h({Hgx8H100("h0")}, {RunningPod("run", 4, 0x0f, 400, "")}, QueueOptions{});
  h.queue->RefreshEstimates();  // sees run on h0
  // run completes at 2200 s: 1800 s of workload train.
  h.now_ms = 2'200'000;
  h.state().RemovePod("uid-team-a-run");
  h.state().Commit();
  h.queue->RefreshEstimates();
  PodRequest again = PodBuilder("again", "team-a").Gpus(4).Build();
  again.workload = "train";
  PodRequest other = PodBuilder("other", "team-a").Gpus(4).Build();
  h.Submit(again);
  h.Submit(other);
  h.queue->RefreshEstimates();
  auto pods = h.queue->Positions(10);
  EXPECT_EQ(Find(pods, "again").runtime_seconds, 1800);
  EXPECT_EQ(Find(pods, "again").runtime_source, "workload-history");
  EXPECT_EQ(Find(pods, "other").runtime_source, "namespace-history");
}

TEST(EstimateRefresh, AFailedRunIsNotARuntime) {
  Harness h({Hgx8H100("h0")}, {RunningPod("run", 4, 0x0f, 400, "")}, QueueOptions{});
  h.queue->RefreshEstimates();
  h.now_ms = 2'200'000;
  PodRequest failed = *h.state().FindPod("uid-team-a-run");
  failed.phase = PodPhase::kFailed;
  h.state().UpsertPod(failed);
  h.state().Commit();
  h.queue->RefreshEstimates();
  PodRequest again = PodBuilder("again", "team-a").Gpus(4).Build();
  h.Submit(again);
  h.queue->RefreshEstimates();
  EXPECT_EQ(Find(h.queue->Positions(10), "again").runtime_source, "none");
}

}  // namespace
}  // namespace gpusched::queue
