// The attained-service ordering: GPU-seconds per workload across its pods
// and their replacements, the queue order within a priority, preemption of
// workloads past the threshold within the namespace and its budget.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/queue/attained_service.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::PodBuilder;
using ::testing::ElementsAre;
using testing::H100s;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;
using ::testing::SizeIs;

constexpr int64_t kNowS = 1'000'000 / 1000;  // the harness's clock

// A pod of `workload` that has been running on `node` since `start_s`.
PodRequest RunningSince(const std::string& name, const std::string& workload, int gpus,
                        const std::string& node, DeviceMask ids, int64_t start_s,
                        int32_t priority = 0) {
  PodRequest p = PodBuilder(name, "team-a").Gpus(gpus).OnNode(node, ids).Priority(priority).Build();
  p.workload = workload;
  p.start_unix = start_s;
  return p;
}

PodRequest Waiting(const std::string& name, const std::string& workload, int gpus,
                   int64_t created_s, int32_t priority = 0) {
  PodRequest p =
      PodBuilder(name, "team-a").Gpus(gpus).Created(created_s).Priority(priority).Build();
  p.workload = workload;
  return p;
}

// team-a demotes workloads past 0.1 GPU-hour (360 GPU-s) and may preempt
// `per_hour` an hour.
QueueOptions Attained(int32_t per_hour) {
  NamespaceQuota q = Quota(16, 16);
  q.attained = {true, 360, per_hour};
  QueueOptions o;
  o.quotas = Quotas({{"team-a", q}});
  return o;
}

TEST(AttainedServiceTest, CountsRunningPodsAndKeepsWhatLeaversRan) {
  auto state = gpusched::testing::MakeState(H100s(1), {RunningSince("a-0", "a", 2, "h0", 0x3, 100),
                                                       RunningSince("b-0", "b", 1, "h0", 0x4, 0)});
  AttainedService s;
  s.Update(state->Snapshot(), 200);
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "a", 200), 200);  // 2 GPUs x 100 s
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "b", 200), 0);    // no start time: from now
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "b", 250), 50);
  state->RemovePod("uid-team-a-a-0");
  state->Commit();
  s.Update(state->Snapshot(), 300);
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "a", 1000), 400);  // banked, no longer growing
  // Its replacement adds to the same workload.
  state->UpsertPod(RunningSince("a-0-r1", "a", 2, "h0", 0x3, 1000));
  state->Commit();
  s.Update(state->Snapshot(), 1000);
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "a", 1100), 600);
  EXPECT_EQ(*s.WorkloadOf("uid-team-a-a-0-r1"), "a");
  // Forgotten only with no pod on a node, and only after forget_after_s.
  s.Forget(5000, 10);
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "a", 1100), 600);
  state->RemovePod("uid-team-a-a-0-r1");
  state->Commit();
  s.Update(state->Snapshot(), 1200);
  s.Forget(1205, 10);
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "a", 1300), 800);
  s.Forget(1300, 10);
  EXPECT_DOUBLE_EQ(s.GpuSeconds("team-a", "a", 1300), 0);
}

// The sums equal a count over every pod's life (until an update sees it
// gone; a pod no update saw is not counted), whatever order pods come and go in, updates skipped or
// not.
TEST(AttainedServiceTest, IncrementalEqualsRecount) {
  auto state = gpusched::testing::MakeState(H100s(4), {});
  AttainedService inc;
  std::map<std::string, double> expect;                       // workload -> GPU-s of pods that left
  std::map<std::string, std::pair<std::string, int64_t>> on;  // uid -> (workload, start)
  std::vector<std::pair<std::string, int64_t>> left;          // removed since the last update
  std::set<std::string> seen;                                 // pods an update has seen on a node
  uint32_t seed = 7;
  auto rnd = [&](uint32_t n) {
    seed = seed * 1103515245 + 12345;
    return (seed >> 16) % n;
  };
  for (int64_t t = 1; t <= 400; ++t) {
    const std::string node = "h" + std::to_string(rnd(4));
    const std::string w = "w" + std::to_string(rnd(5));
    if (rnd(2) == 0 && on.size() < 20) {
      const std::string name = "p" + std::to_string(t);
      auto snap = state->Snapshot();
      const NodeInfo* n = snap->Find(node);
      DeviceMask free = n->whole_free & n->healthy;
      if (free == 0) continue;
      DeviceMask one = free & (~free + 1);
      state->UpsertPod(RunningSince(name, w, 1, node, one, t));
      on["uid-team-a-" + name] = {w, t};
    } else if (!on.empty()) {
      auto it = std::next(on.begin(), rnd(static_cast<uint32_t>(on.size())));
      if (seen.contains(it->first)) left.push_back(it->second);  // else never counted
      state->RemovePod(it->first);
      on.erase(it);
    }
    state->Commit();
    if (rnd(3) == 0) continue;  // several changes between updates
    inc.Update(state->Snapshot(), t);
    // A pod counts until an update sees it gone.
    for (const auto& [w, start] : left) expect[w] += static_cast<double>(t - start) * 1000;
    left.clear();
    for (const auto& [uid, ws] : on) seen.insert(uid);
    for (int k = 0; k < 5; ++k) {
      const std::string w2 = "w" + std::to_string(k);
      double want = expect[w2];
      for (const auto& [uid, ws] : on) {
        if (ws.first == w2) want += static_cast<double>(t - ws.second) * 1000;
      }
      AttainedService scratch;
      scratch.Update(state->Snapshot(), t);
      EXPECT_DOUBLE_EQ(inc.GpuSeconds("team-a", w2, t) * 1000, want) << w2 << " at " << t;
      // A fresh tracker knows only the pods on nodes now.
      EXPECT_LE(scratch.GpuSeconds("team-a", w2, t), inc.GpuSeconds("team-a", w2, t));
    }
  }
}

// Forgetting in order of when workloads emptied drops exactly what a walk
// over every workload with the rule (no pod on a node, last pod left more
// than forget_after_s ago) drops, over random comings and goings, restarts
// of emptied workloads and clocks; a bounded call drops the earliest due
// and leaves the rest for the next.
TEST(AttainedServiceTest, ForgettingInOrderEqualsTheFullWalk) {
  auto state = gpusched::testing::MakeState(H100s(4), {});
  AttainedService s;
  std::map<std::string, std::string> on;  // uid -> workload
  uint32_t seed = 11;
  auto rnd = [&](uint32_t n) {
    seed = seed * 1103515245 + 12345;
    return (seed >> 16) % n;
  };
  auto known = [&] {
    std::set<std::string> out;
    if (const auto* w = s.Of("team-a"); w != nullptr) {
      for (const auto& [name, work] : *w) out.insert(name);
    }
    return out;
  };
  int forgot = 0;
  for (int64_t t = 1; t <= 1500; ++t) {
    const std::string node = "h" + std::to_string(rnd(4));
    const std::string w = "w" + std::to_string(rnd(12));
    if (rnd(2) == 0 && on.size() < 24) {
      const std::string name = "p" + std::to_string(t);
      const NodeInfo* n = state->Snapshot()->Find(node);
      const DeviceMask free = n->whole_free & n->healthy;
      if (free != 0) {
        state->UpsertPod(RunningSince(name, w, 1, node, free & (~free + 1), t));
        on["uid-team-a-" + name] = w;
      }
    } else if (!on.empty()) {
      auto it = std::next(on.begin(), rnd(static_cast<uint32_t>(on.size())));
      state->RemovePod(it->first);
      on.erase(it);
    }
    state->Commit();
    s.Update(state->Snapshot(), t);
    if (rnd(4) != 0) continue;
    const int64_t after = 1 + rnd(40);
    // What the full walk keeps.
    std::set<std::string> keep;
    std::vector<std::pair<int64_t, std::string>> due;  // (last left, workload)
    const absl::flat_hash_map<std::string, AttainedService::Workload> none;
    const auto* all = s.Of("team-a");
    for (const auto& [name, work] : all != nullptr ? *all : none) {
      if (work.running.empty() && t - work.last_left_s > after) {
        due.emplace_back(work.last_left_s, name);
      } else {
        keep.insert(name);
      }
    }
    if (rnd(3) == 0 && due.size() > 1) {
      // Bounded: the earliest-left go first, the others stay until the next call.
      std::sort(due.begin(), due.end());
      const size_t limit = 1 + rnd(static_cast<uint32_t>(due.size() - 1));
      ASSERT_EQ(s.Forget(t, after, limit), limit) << "at " << t;
      std::set<std::string> left_over = keep;
      for (size_t i = limit; i < due.size(); ++i) left_over.insert(due[i].second);
      // Equal times may go in either order: compare counts and membership of the strictly earlier.
      EXPECT_EQ(known().size(), left_over.size()) << "at " << t;
      for (size_t i = 0; i < limit; ++i) {
        if (due[i].first < due[limit].first) {
          EXPECT_FALSE(known().contains(due[i].second));
        }
      }
    }
    const size_t before = known().size();
    EXPECT_EQ(s.Forget(t, after), before - keep.size()) << "at " << t;
    EXPECT_EQ(known(), keep) << "at " << t;
    forgot += static_cast<int>(due.size());
  }
  EXPECT_GT(forgot, 20);  // the walk had something to forget, often
}

// Within a priority, a workload past the threshold queues behind one below
// it, although its pod was created first; without the setting, creation
// order holds (StrictFIFO keeps the later pod behind).
TEST(AttainedOrderTest, DemotedWorkloadQueuesBehindFreshOneOfTheSamePriority) {
  auto pods = [] {
    return std::vector<PodRequest>{RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100)};
  };
  Harness h(H100s(2), pods(), Attained(0));
  PodRequest old = Waiting("long-1", "long", 8, 10);
  PodRequest fresh = Waiting("fresh", "fresh", 8, 20);
  h.Submit(old);
  std::string reason;
  EXPECT_THAT(h.Filter(fresh), ElementsAre("h1"));
  EXPECT_THAT(h.Filter(old, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("position 2"));
  // /debug/queues shows each pod's level in queue order.
  QueueReport r = h.queue->Report({"team-a", 50});
  ASSERT_THAT(r.namespaces, SizeIs(1));
  ASSERT_THAT(r.namespaces[0].queue, SizeIs(2));
  EXPECT_EQ(r.namespaces[0].queue[0].name, "fresh");
  EXPECT_EQ(r.namespaces[0].queue[0].attained_level, 0);
  EXPECT_EQ(r.namespaces[0].queue[1].name, "long-1");
  EXPECT_EQ(r.namespaces[0].queue[1].attained_level, 1);

  Harness fifo(H100s(2), pods(), Attained(0));
  QueueOptions plain = Attained(0);
  plain.quotas.namespaces["team-a"].attained = {};
  fifo.queue->SetOptions(plain);
  fifo.Submit(old);
  EXPECT_THAT(fifo.Filter(fresh, &reason), IsEmpty());
  EXPECT_THAT(fifo.Filter(old), ElementsAre("h1"));
  EXPECT_EQ(fifo.queue->Report({"team-a", 50}).namespaces[0].queue[0].attained_level, -1);

  // A config change re-levels pods already queued.
  fifo.queue->SetOptions(Attained(0));
  EXPECT_THAT(fifo.Filter(fresh), ElementsAre("h1"));
  EXPECT_THAT(fifo.Filter(old), IsEmpty());
}

// A config change re-levels only the namespaces whose attained-service
// settings it changes: a quota edit elsewhere leaves the queue order alone,
// even for a pod whose workload has run past the threshold since it queued.
TEST(AttainedOrderTest, ConfigChangeRelevelsOnlyNamespacesWhoseSettingsChange) {
  Harness h(H100s(2), {RunningSince("long-0", "long", 1, "h0", 0x1, kNowS - 100)}, Attained(0));
  h.Submit(Waiting("long-1", "long", 8, 10));
  auto level = [&h] {
    return h.queue->Report({"team-a", 50}).namespaces[0].queue[0].attained_level;
  };
  EXPECT_EQ(level(), 0);  // 100 GPU-seconds, threshold 360
  h.now_ms += 400'000;    // 500 GPU-seconds now
  QueueOptions elsewhere = Attained(0);
  elsewhere.quotas.namespaces["team-b"] = Quota(4, 8);
  h.queue->SetOptions(elsewhere);
  EXPECT_EQ(level(), 0);
  QueueOptions lower = elsewhere;
  lower.quotas.namespaces["team-a"].attained.demote_after_gpu_seconds = 300;
  h.queue->SetOptions(lower);
  EXPECT_EQ(level(), 1);
}

// A higher priority still goes first whatever it has run.
TEST(AttainedOrderTest, PriorityComesBeforeLevel) {
  Harness h(H100s(2), {RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100)}, Attained(0));
  h.Submit(Waiting("long-1", "long", 8, 10, /*priority=*/100));
  std::string reason;
  EXPECT_THAT(h.Filter(Waiting("fresh", "fresh", 8, 20), &reason), IsEmpty());
  EXPECT_THAT(h.Filter(Waiting("long-1", "long", 8, 10, 100)), ElementsAre("h1"));
}

// A fresh workload that fits nowhere has the tick evict a workload of its
// namespace past the threshold; the freed node is held for it.
TEST(AttainedPreemptionTest, EvictsAWorkloadPastTheThresholdForAFreshOne) {
  Harness h(H100s(2),
            {RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100),
             RunningSince("short-0", "short", 8, "h1", 0xff, kNowS - 5)},
            Attained(2));
  PodRequest fresh = Waiting("fresh", "fresh", 8, 20);
  EXPECT_THAT(h.Filter(fresh), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_THAT(h.writer.evicted, ElementsAre("uid-team-a-long-0"));  // not short-0: 40 GPU-s
  // The workload's replacement waits behind (and is held off h0).
  std::string reason;
  EXPECT_THAT(h.Filter(Waiting("long-0-r1", "long", 8, kNowS), &reason), IsEmpty());
  EXPECT_THAT(h.Filter(fresh), ElementsAre("h0"));
  EXPECT_EQ(h.Bind(fresh, "h0"), "");
  EXPECT_EQ(h.queue->Tick(), 0);  // the replacement is demoted: it preempts nobody
}

// The victims are the pods of the demoted workloads wherever they run: not
// a pod of a workload under the threshold, nor one of a workload with a pod
// of higher priority elsewhere, though either sits on an earlier node.
TEST(AttainedPreemptionTest, OnlyTheDemotedWorkloadsPodsAreVictimsWhereverTheyRun) {
  QueueOptions o = Attained(2);
  o.quotas.namespaces["team-a"].gpus = {64, 64};
  Harness h(H100s(4),
            {RunningSince("short-0", "short", 8, "h0", 0xff, kNowS - 5),
             RunningSince("mixed-0", "mixed", 8, "h1", 0xff, kNowS - 100),
             RunningSince("mixed-1", "mixed", 8, "h2", 0xff, kNowS - 100, 100),
             RunningSince("long-0", "long", 8, "h3", 0xff, kNowS - 100)},
            o);
  EXPECT_THAT(h.Filter(Waiting("fresh", "fresh", 8, 20)), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_THAT(h.writer.evicted, ElementsAre("uid-team-a-long-0"));
}

// At most preemptions_per_hour workloads an hour: a second fresh workload
// waits until the budget is back.
TEST(AttainedPreemptionTest, BudgetLimitsPreemptionsPerHour) {
  Harness h(H100s(2),
            {RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100),
             RunningSince("older-0", "older", 8, "h1", 0xff, kNowS - 200)},
            Attained(1));
  PodRequest f1 = Waiting("f1", "f1", 8, 20), f2 = Waiting("f2", "f2", 8, 30);
  h.Submit(f2);
  EXPECT_THAT(h.Filter(f1), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
  auto nodes = h.Filter(f1);
  ASSERT_THAT(nodes, SizeIs(1));
  EXPECT_EQ(h.Bind(f1, nodes[0]), "");
  EXPECT_THAT(h.Filter(f2), IsEmpty());
  h.now_ms += 31 * 60 * 1000;  // half an hour: half a token
  EXPECT_THAT(h.Filter(f2), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 0);
  h.now_ms += 30 * 60 * 1000;
  EXPECT_THAT(h.Filter(f2), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_THAT(h.writer.evicted, SizeIs(2));
}

// What is never evicted by attained service: a workload of higher priority,
// one of another namespace, and nothing at all for a head that is itself
// past the threshold or has preemptionPolicy Never, or when the namespace
// reorders only.
TEST(AttainedPreemptionTest, NeverTakesHigherPriorityOtherNamespacesOrForADemotedHead) {
  {
    Harness h(H100s(1), {RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100, 100)},
              Attained(5));
    EXPECT_THAT(h.Filter(Waiting("fresh", "fresh", 8, 20)), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), 0);
  }
  {
    QueueOptions o = Attained(5);
    o.quotas.namespaces["team-b"] = Quota(8, 8);
    PodRequest other = PodBuilder("b-0", "team-b").Gpus(8).OnNode("h0", 0xff).Build();
    other.start_unix = kNowS - 100;
    Harness h(H100s(1), {other}, o);
    EXPECT_THAT(h.Filter(Waiting("fresh", "fresh", 8, 20)), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), 0);
  }
  {
    QueueOptions o = Attained(5);
    o.quotas.namespaces["team-a"].gpus = {32, 32};
    Harness h(H100s(2),
              {RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100),
               RunningSince("older-0", "older", 8, "h1", 0xff, kNowS - 200)},
              o);
    EXPECT_THAT(h.Filter(Waiting("long-1", "long", 8, 20)), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), 0);  // long-1's workload is past the threshold itself
  }
  {
    // preemptionPolicy: Never on the waiting pod.
    Harness h(H100s(1), {RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100)}, Attained(5));
    PodRequest never = Waiting("fresh", "fresh", 8, 20);
    never.preempt_never = true;
    EXPECT_THAT(h.Filter(never), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), 0);
  }
  {
    Harness h(H100s(1), {RunningSince("long-0", "long", 8, "h0", 0xff, kNowS - 100)}, Attained(0));
    EXPECT_THAT(h.Filter(Waiting("fresh", "fresh", 8, 20)), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), 0);
  }
}

// A gang preemptor evicts whole demoted workloads for all its members, and a
// demoted gang goes whole.
TEST(AttainedPreemptionTest, GangsGoWholeBothWays) {
  PodRequest g0 = RunningSince("old-0", "old", 8, "h0", 0xff, kNowS - 100);
  PodRequest g1 = RunningSince("old-1", "old", 8, "h1", 0xff, kNowS - 100);
  g0.gang = g1.gang = "old";
  g0.gang_size = g1.gang_size = 2;
  QueueOptions o = Attained(3);
  o.quotas.namespaces["team-a"].gpus = {32, 32};
  Harness h(H100s(2), {g0, g1}, o);
  PodRequest m0 = Waiting("new-0", "new", 8, 20), m1 = Waiting("new-1", "new", 8, 20);
  m0.gang = m1.gang = "new";
  m0.gang_size = m1.gang_size = 2;
  h.Submit(m1);
  EXPECT_THAT(h.Filter(m0), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 2);
  EXPECT_THAT(h.writer.evicted,
              ::testing::UnorderedElementsAre("uid-team-a-old-0", "uid-team-a-old-1"));
}

}  // namespace
}  // namespace gpusched::queue
