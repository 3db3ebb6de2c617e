// Background work holds the queue mutex briefly (docs/architecture.md,
// "Locks and their order"): the over-limit evictions are planned without it
// and recorded by the commit rule, and the walks over a namespace's queue
// (Report, Positions, the estimate refresh) copy it in bounded holds. Each
// test checks that the answer is the one a walk in one hold gives (an
// independent model of the queue order) and what the rule drops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test/queue/harness.h"

namespace gpusched::queue {

// Reaches the over-limit steps (QueueManager befriends it): the plan made
// as the tick makes it (the view under the mutex, the plan without it), and
// what its commit records later.
class BackgroundHoldsProbe {
 public:
  explicit BackgroundHoldsProbe(QueueManager& q) : q_(q) {}

  void PlanOverLimit() {
    {
      TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
      q_.SyncLocked(q_.deps_.state->Snapshot());
      view_ = q_.PlanningViewLocked();
      queue_version_ = q_.queue_version_;
    }
    plan_ = QueueManager::PlanOverLimit(*view_);
  }
  const std::vector<std::string>& Planned() const { return plan_.victims; }

  // The uids the commit marks for eviction now.
  std::vector<std::string> Commit() {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    std::vector<std::string> out;
    for (const auto& [pod, reason] : q_.CommitOverLimitLocked(plan_, view_->stamp, queue_version_))
      out.push_back(pod.uid);
    return out;
  }

  // Another plan's commit evicts `uid` meanwhile.
  void MarkEvicted(const std::string& uid) {
    TimedLock l(&q_.mu_, &q_.lock_stats_, nullptr, "test");
    q_.MarkEvictedLocked(uid);
  }

 private:
  QueueManager& q_;
  std::shared_ptr<const QueueManager::PlanningView> view_;
  uint64_t queue_version_ = 0;
  QueueManager::OverLimitPlan plan_;
};

namespace {

using ::gpusched::testing::PodBuilder;
using ::testing::ElementsAreArray;
using testing::H100s;
using testing::Harness;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;
using ::testing::SizeIs;

PodRequest Running(const std::string& name, const std::string& ns, int gpus,
                   const std::string& node, DeviceMask devices) {
  return PodBuilder(name, ns).Gpus(gpus).OnNode(node, devices).Build();
}

// team-a runs 12 GPUs (a0, a1 on h0, a2 on h1) and its limit is lowered
// from 16 to 8: one 4-GPU pod is above it.
const PodRequest kA0 = Running("a0", "team-a", 4, "h0", 0x0f);
const PodRequest kA1 = Running("a1", "team-a", 4, "h0", 0xf0);
const PodRequest kA2 = Running("a2", "team-a", 4, "h1", 0x0f);

QueueOptions OverLimit(int64_t team_a_limit) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(4, team_a_limit, "r")}, {"team-b", Quota(8, 8, "r")}});
  o.reclaim.evict_over_limit = true;
  return o;
}

void Remove(Harness& h, const std::string& uid) {
  h.state().RemovePod(uid);
  h.state().Commit();
}

struct OverLimitRow {
  std::string name;
  std::function<void(Harness&, BackgroundHoldsProbe&)> meanwhile;
  bool recorded = false;
};

TEST(OverLimitOffTheLock, TheCommitRuleDropsAPlanWhoseFactsMoved) {
  const std::vector<OverLimitRow> rows = {
      {"nothing moved", [](Harness&, BackgroundHoldsProbe&) {}, true},
      {"another namespace's pod bound",
       [](Harness& h, BackgroundHoldsProbe&) { h.Submit(Running("b0", "team-b", 8, "h2", 0xff)); },
       true},
      {"a pending pod arrived",
       [](Harness& h, BackgroundHoldsProbe&) {
         h.Submit(PodBuilder("new", "team-a").Gpus(1).Build());
       },
       true},
      {"the namespace's usage changed (a pod of it ended)",
       [](Harness& h, BackgroundHoldsProbe& p) {
         for (const PodRequest& pod : {kA0, kA1, kA2}) {
           if (pod.uid != p.Planned().front()) return Remove(h, pod.uid);
         }
       },
       false},
      {"the victim is gone",
       [](Harness& h, BackgroundHoldsProbe& p) { Remove(h, p.Planned().front()); }, false},
      {"the victim is being evicted",
       [](Harness&, BackgroundHoldsProbe& p) { p.MarkEvicted(p.Planned().front()); }, false},
      {"the config moved",
       [](Harness& h, BackgroundHoldsProbe&) { h.queue->SetOptions(OverLimit(8)); }, false},
  };
  for (const OverLimitRow& r : rows) {
    SCOPED_TRACE(r.name);
    Harness h(H100s(3), {kA0, kA1, kA2}, OverLimit(16));
    h.queue->SetOptions(OverLimit(8));
    BackgroundHoldsProbe probe(*h.queue);
    probe.PlanOverLimit();
    ASSERT_THAT(probe.Planned(), SizeIs(1));  // 4 GPUs above: one pod
    r.meanwhile(h, probe);
    const std::vector<std::string> evicted = probe.Commit();
    if (r.recorded) {
      EXPECT_THAT(evicted, ElementsAreArray(probe.Planned()));
    } else {
      EXPECT_THAT(evicted, IsEmpty());
    }
  }
}

// A plan dropped because its namespace's usage moved is made again by the
// next tick on the cluster as it is: none when the namespace is back within
// its limit, the right pods when it is still above.
TEST(OverLimitOffTheLock, TheNextTickPlansAgainOnTheCurrentUsage) {
  Harness h(H100s(3), {kA0, kA1, kA2}, OverLimit(16));
  h.queue->SetOptions(OverLimit(4));  // 8 GPUs above: two pods
  BackgroundHoldsProbe probe(*h.queue);
  probe.PlanOverLimit();
  ASSERT_THAT(probe.Planned(), SizeIs(2));
  Remove(h, kA2.uid);  // 8 GPUs left, 4 above
  EXPECT_THAT(probe.Commit(), IsEmpty());
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_EQ(h.queue->Tick(), 0);
}

// A namespace's queue as a walk in one hold lists it: the pods in creation
// order (one priority), a gang's members at its first member's place.
struct Spec {
  std::string name;
  std::string gang;  // "" : a single pod
};

// `n` pods of `ns`; every 97th starts a gang of three whose other members
// come 300 and 700 pods later, so that gangs straddle the walk's holds.
std::vector<Spec> Queue(const std::string& ns, int n) {
  std::vector<Spec> specs(n);
  for (int i = 0; i < n; ++i) specs[i].name = ns + "-p" + std::to_string(i);
  for (int i = 0; i + 700 < n; i += 97) {
    const std::string gang = ns + "-g" + std::to_string(i);
    for (int at : {i, i + 300, i + 700}) {
      if (!specs[at].gang.empty()) continue;
      specs[at].gang = gang;
    }
  }
  return specs;
}

void SubmitQueue(Harness& h, const std::string& ns, const std::vector<Spec>& specs) {
  std::map<std::string, int> size;
  for (const Spec& s : specs) {
    if (!s.gang.empty()) ++size[s.gang];
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    PodBuilder b(specs[i].name, ns);
    b.Gpus(1).Created(static_cast<int64_t>(1000 + i));
    if (!specs[i].gang.empty()) b.Gang(specs[i].gang, size[specs[i].gang]);
    h.Submit(b.Build());
  }
}

// Pod name -> 1-based position of its unit (the model of the walk).
std::map<std::string, int32_t> Positions(const std::vector<Spec>& specs) {
  std::map<std::string, int32_t> out;
  std::map<std::string, int32_t> gang_at;
  int32_t units = 0;
  for (const Spec& s : specs) {
    if (s.gang.empty()) {
      out[s.name] = ++units;
      continue;
    }
    auto [it, first] = gang_at.emplace(s.gang, units + 1);
    if (first) ++units;
    out[s.name] = it->second;
  }
  return out;
}

// The first units of `specs` up to `limit` pods, as a report lists them:
// (name, position) in listing order (a gang's members together).
std::vector<std::pair<std::string, int32_t>> Listed(const std::vector<Spec>& specs, size_t limit) {
  const std::map<std::string, int32_t> pos = Positions(specs);
  std::map<int32_t, std::vector<std::string>> by_unit;
  for (const Spec& s : specs) by_unit[pos.at(s.name)].push_back(s.name);
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& [unit, names] : by_unit) {
    if (out.size() >= limit) break;
    for (const std::string& n : names) out.emplace_back(n, unit);
  }
  return out;
}

std::vector<std::pair<std::string, int32_t>> Shown(const NamespaceQueue& nq) {
  std::vector<std::pair<std::string, int32_t>> out;
  for (const QueuedPod& q : nq.queue) out.emplace_back(q.name, q.position);
  return out;
}

class DeepQueues : public ::testing::Test {
 protected:
  DeepQueues() : h(H100s(2), {}, QueueOptions{}) {
    for (const std::string ns : {"team-a", "team-b", "team-c"}) {
      specs[ns] = Queue(ns, 1300);
      SubmitQueue(h, ns, specs[ns]);
    }
  }
  Harness h;
  std::map<std::string, std::vector<Spec>> specs;
};

TEST_F(DeepQueues, TheUnfilteredReportListsEachQueueAsOneWalkInSeveralHolds) {
  const int64_t holds_before = h.queue->lock_stats().count.load();
  const QueueReport report = h.queue->Report({"", 1000});
  // 3,000 entries copied: at least two holds, none over kEntriesPerHold
  // (2,048) and its last gang.
  EXPECT_GE(h.queue->lock_stats().count.load() - holds_before, 2);
  ASSERT_THAT(report.namespaces, SizeIs(3));
  for (const NamespaceQueue& nq : report.namespaces) {
    SCOPED_TRACE(nq.ns);
    EXPECT_EQ(nq.pending_pods, 1300);
    EXPECT_EQ(Shown(nq), Listed(specs[nq.ns], 1000));
  }
}

TEST_F(DeepQueues, AFilteredReportPastOneHoldsUnitsListsTheSame) {
  for (size_t limit : {size_t{600}, size_t{1300}}) {
    const QueueReport report = h.queue->Report({"team-b", static_cast<int32_t>(limit)});
    ASSERT_THAT(report.namespaces, SizeIs(1));
    EXPECT_EQ(Shown(report.namespaces[0]), Listed(specs["team-b"], limit)) << limit;
  }
}

TEST_F(DeepQueues, PositionsGiveEveryPodItsUnitsPlace) {
  std::map<std::string, int32_t> want;
  for (const auto& [ns, s] : specs) want.merge(Positions(s));
  std::map<std::string, int32_t> got;
  for (const QueuedPod& q : h.queue->Positions(5)) {
    EXPECT_TRUE(got.emplace(q.name, q.position).second) << q.name << " listed twice";
  }
  EXPECT_EQ(got, want);
}

TEST_F(DeepQueues, TheEstimateRefreshCopiesAtMostItsUnitsPerNamespace) {
  QueueOptions o;
  o.estimate_max_units = 700;  // past one hold's 512 units
  h.queue->SetOptions(o);
  h.queue->RefreshEstimates(std::chrono::seconds(60));
  for (const QueuedPod& q : h.queue->Positions(0)) {
    // Not estimated: no runtime source (and the basis says why).
    EXPECT_EQ(!q.runtime_source.empty(), q.position <= 700) << q.name << " " << q.position;
  }
}

}  // namespace
}  // namespace gpusched::queue
