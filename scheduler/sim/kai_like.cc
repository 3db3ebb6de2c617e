#include "scheduler/sim/kai_like.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "scheduler/sim/block_world.h"

namespace gpusched::sim {
namespace {

// Session passes per event time at most (allocate, reclaim, preempt again
// while something changed), as KAI's next sessions a second apart would.
constexpr int kMaxSessions = 16;

class KaiWorld : public BlockWorld {
 public:
  KaiWorld(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns, const KaiOptions& o)
      : BlockWorld(jobs, ns, o.capacity, o.gpus_per_node, o.sample_every) {}

 private:
  void Schedule(double t) override {
    running_dirty_ = true;  // jobs finished since the last event
    for (int s = 0; s < kMaxSessions; ++s) {
      FairShares();
      bool changed = Allocate(t);
      changed = Reclaim(t) || changed;
      changed = Preempt(t) || changed;
      if (!changed) return;
    }
  }

  // The proportion plugin's division: deserved first, the rest by
  // over-quota weight, up to each queue's request (in use plus pending).
  void FairShares() {
    std::vector<double> requested(ns().size(), 0);
    for (size_t i = 0; i < jobs().size(); ++i) {
      const State& s = state(static_cast<int>(i));
      if (s.running || s.pending) requested[jobs()[i].ns] += jobs()[i].gpus;
    }
    fair_ = WeightedFairShares(ns(), requested, static_cast<double>(pool().capacity));
  }

  double Allocatable(int q) const {
    const double a = std::max(static_cast<double>(ns()[q].guarantee), fair_[q]);
    return std::min(a, static_cast<double>(ns()[q].limit));
  }

  // KAI's queue order for queue `q` with next job `id`: at or below fair
  // share first, then within deserved quota with the job, then the smaller
  // allocated / allocatable, then the queue's index (creation).
  std::tuple<bool, bool, double, int> QueueKey(int q, int id) const {
    const double used = static_cast<double>(usage()[q]);
    const double share = Allocatable(q);
    return {used > fair_[q], usage()[q] + jobs()[id].gpus > ns()[q].guarantee,
            share > 0 ? used / share : std::numeric_limits<double>::infinity(), q};
  }

  // A queue's jobs: priority, then creation.
  bool JobOrder(int a, int b) const {
    if (jobs()[a].priority != jobs()[b].priority) return jobs()[a].priority > jobs()[b].priority;
    return jobs()[a].submit < jobs()[b].submit;
  }

  // Pending jobs per queue in job order.
  std::vector<std::vector<int>> PendingByQueue() const {
    std::vector<std::vector<int>> queues(ns().size());
    for (size_t i = 0; i < jobs().size(); ++i) {
      if (state(static_cast<int>(i)).pending) queues[jobs()[i].ns].push_back(static_cast<int>(i));
    }
    for (auto& q : queues) {
      std::stable_sort(q.begin(), q.end(), [&](int a, int b) { return JobOrder(a, b); });
    }
    return queues;
  }

  // Calls `try_job` for every pending job once, the next one always from
  // the queue first in KAI's queue order (re-evaluated after each job).
  template <typename F>
  bool ForEachInQueueOrder(F try_job) {
    std::vector<std::vector<int>> queues = PendingByQueue();
    std::vector<size_t> cursor(queues.size(), 0);
    bool changed = false;
    for (;;) {
      int best = -1;
      std::tuple<bool, bool, double, int> best_key;
      for (size_t q = 0; q < queues.size(); ++q) {
        if (cursor[q] >= queues[q].size()) continue;
        const auto key = QueueKey(static_cast<int>(q), queues[q][cursor[q]]);
        if (best < 0 || key < best_key) best = static_cast<int>(q), best_key = key;
      }
      if (best < 0) return changed;
      const int id = queues[best][cursor[best]++];
      if (state(id).pending) changed = try_job(id) || changed;
    }
  }

  bool WithinLimit(const KueueJob& j) const { return usage()[j.ns] + j.gpus <= ns()[j.ns].limit; }

  // Allocate: whatever fits on idle GPUs within the queue's limit.
  bool Allocate(double t) {
    return ForEachInQueueOrder([&](int id) {
      Alloc a;
      if (!WithinLimit(jobs()[id]) || !Consolidate(pool(), jobs()[id].gpus, &a)) return false;
      Start(id, t, a);
      running_dirty_ = true;
      return true;
    });
  }

  // Reclaim: for jobs whose queue stays within its fair share.
  bool Reclaim(double t) {
    return ForEachInQueueOrder([&](int id) {
      const KueueJob& j = jobs()[id];
      if (static_cast<double>(usage()[j.ns] + j.gpus) > fair_[j.ns] || !WithinLimit(j)) {
        return false;
      }
      return EvictFor(id, ReclaimVictims(id), t);
    });
  }

  // Preempt: lower-priority jobs of the job's own queue, lowest priority
  // and newest first.
  bool Preempt(double t) {
    return ForEachInQueueOrder([&](int id) {
      const KueueJob& j = jobs()[id];
      if (!WithinLimit(j)) return false;
      std::vector<int> victims;
      for (int v : Running()[j.ns]) {
        if (jobs()[v].priority < j.priority) victims.push_back(v);
      }
      return EvictFor(id, victims, t);
    });
  }

  // Victim order within a queue: lowest priority, then newest (then input
  // order).
  bool Weaker(int a, int b) const {
    if (jobs()[a].priority != jobs()[b].priority) return jobs()[a].priority < jobs()[b].priority;
    if (state(a).admitted_at != state(b).admitted_at) {
      return state(a).admitted_at > state(b).admitted_at;
    }
    return a < b;
  }

  std::vector<int> ReclaimVictims(int id);

  // Evicts a prefix of `victims` (in order) that lets `id` fit, and starts
  // it; nothing if no prefix does.
  bool EvictFor(int id, const std::vector<int>& victims, double t) {
    if (victims.empty()) return false;
    Alloc a;
    if (Consolidate(this->pool(), jobs()[id].gpus, &a)) {  // room freed meanwhile
      Start(id, t, a);
      running_dirty_ = true;
      return true;
    }
    Pool pool = this->pool();
    for (size_t k = 0; k < victims.size(); ++k) {
      Give(pool, state(victims[k]).alloc);
      if (!Consolidate(pool, jobs()[id].gpus, &a)) continue;
      // `pool` is now the real pool after these evictions: `a` fits there.
      for (size_t m = 0; m <= k; ++m) Evict(victims[m], jobs()[id].ns, t);
      Start(id, t, a);
      running_dirty_ = true;
      return true;
    }
    return false;
  }

  // Running jobs per queue, weakest first (Weaker); rebuilt after a change.
  const std::vector<std::vector<int>>& Running() {
    if (!running_dirty_) return running_;
    running_.assign(ns().size(), {});
    for (int v : running()) running_[jobs()[v].ns].push_back(v);
    for (auto& r : running_) {
      std::sort(r.begin(), r.end(), [&](int a, int b) { return Weaker(a, b); });
    }
    running_dirty_ = false;
    return running_;
  }

  std::vector<double> fair_;
  std::vector<std::vector<int>> running_;
  bool running_dirty_ = true;
};

// Reclaim victims for `id`, in KAI's order: from the other queue furthest
// above its allocatable share (re-evaluated as victims are taken), lowest
// priority and newest first; each allowed only while its queue, without
// the victims taken so far, is above max(deserved, fair share) or, if the
// reclaimer's queue stays within deserved with the job, above deserved.
std::vector<int> KaiWorld::ReclaimVictims(int id) {
  const KueueJob& j = jobs()[id];
  const bool starved = usage()[j.ns] + j.gpus <= ns()[j.ns].guarantee;
  const std::vector<std::vector<int>>& running = Running();
  std::vector<int64_t> remaining = usage();
  std::vector<size_t> cursor(ns().size(), 0);
  std::vector<int> victims;
  for (;;) {
    int best = -1;
    double best_ratio = 0;
    for (size_t q = 0; q < running.size(); ++q) {
      if (static_cast<int>(q) == j.ns || cursor[q] >= running[q].size()) continue;
      const double rem = static_cast<double>(remaining[q]);
      const bool over_fair = rem > Allocatable(static_cast<int>(q));
      const bool over_deserved = starved && remaining[q] > ns()[q].guarantee;
      if (!over_fair && !over_deserved) continue;
      const double share = Allocatable(static_cast<int>(q));
      const double ratio = share > 0 ? rem / share : std::numeric_limits<double>::infinity();
      if (best < 0 || ratio > best_ratio) best = static_cast<int>(q), best_ratio = ratio;
    }
    if (best < 0) return victims;
    const int v = running[best][cursor[best]++];
    victims.push_back(v);
    remaining[best] -= jobs()[v].gpus;
  }
}

}  // namespace

KueueRun RunKaiLike(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns,
                    const KaiOptions& options) {
  return KaiWorld(jobs, ns, options).Run();
}

}  // namespace gpusched::sim
