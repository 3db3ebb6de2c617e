#include "scheduler/sim/kueue_like.h"

#include <algorithm>
#include <numeric>
#include <queue>

#include "scheduler/sim/pool.h"

namespace gpusched::sim {
namespace {

// An evicted workload is back in its queue this long after the eviction
// (its pods terminate, Kueue requeues it): as gpusched's replay, whose
// victims hold their GPUs for 30 s.
constexpr double kRequeueSeconds = 30;

class KueueWorld {
 public:
  KueueWorld(const std::vector<KueueJob>& jobs, const std::vector<int64_t>& nominal,
             int gpus_per_node, double sample_every)
      : jobs_(jobs),
        nominal_(nominal),
        pool_(MakePool(std::accumulate(nominal.begin(), nominal.end(), int64_t{0}), gpus_per_node)),
        state_(jobs.size()),
        usage_(nominal.size(), 0),
        owed_since_(nominal.size(), -1),
        sample_every_(sample_every) {
    run_.jobs.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) state_[i].remaining = jobs[i].duration;
  }

  KueueRun Run() {
    std::vector<int> arrivals(jobs_.size());
    std::iota(arrivals.begin(), arrivals.end(), 0);
    std::stable_sort(arrivals.begin(), arrivals.end(),
                     [&](int a, int b) { return jobs_[a].submit < jobs_[b].submit; });
    size_t next = 0;
    while (next < arrivals.size() || !done_.empty() || !requeue_.empty()) {
      double t = next < arrivals.size() ? jobs_[arrivals[next]].submit : 1e300;
      if (!done_.empty()) t = std::min(t, done_.top().time);
      if (!requeue_.empty()) t = std::min(t, requeue_.top().time);
      for (; sample_every_ > 0 && next_sample_ <= t; next_sample_ += sample_every_) {
        run_.usage_samples.emplace_back(next_sample_, usage_);
      }
      while (!done_.empty() && done_.top().time <= t) {
        const Event e = done_.top();
        done_.pop();
        if (e.epoch != state_[e.job].epoch || !state_[e.job].running) continue;
        Finish(e.job, e.time);
      }
      while (!requeue_.empty() && requeue_.top().time <= t) {
        const Event e = requeue_.top();
        requeue_.pop();
        if (e.epoch == state_[e.job].epoch) Enqueue(e.job, e.time);
      }
      while (next < arrivals.size() && jobs_[arrivals[next]].submit <= t) {
        const int id = arrivals[next++];
        Enqueue(id, jobs_[id].submit);
      }
      Admit(t);
      Account(t);
    }
    for (size_t n = 0; n < owed_since_.size(); ++n) {
      if (owed_since_[n] >= 0) run_.guarantee_waits.push_back(run_.makespan - owed_since_[n]);
    }
    return std::move(run_);
  }

 private:
  struct State {
    double remaining = 0, run_start = 0, pending_since = 0, admitted_at = 0;
    bool running = false, pending = false;
    int epoch = 0;
    Alloc alloc;
  };
  struct Event {
    double time;
    int job;
    int epoch;
    bool operator<(const Event& o) const { return time > o.time; }
  };

  void Enqueue(int id, double t) {
    state_[id].pending = true;
    state_[id].pending_since = t;
  }

  // Quota with `usage`: within nominal, or borrowing the cohort's unused
  // nominal quota.
  bool QuotaFits(const KueueJob& j, const std::vector<int64_t>& usage) const {
    const int64_t over = std::max<int64_t>(0, usage[j.ns] + j.gpus - nominal_[j.ns]);
    if (over == 0) return true;
    int64_t others_unused = 0;
    for (size_t n = 0; n < nominal_.size(); ++n) {
      if (static_cast<int>(n) != j.ns)
        others_unused += std::max<int64_t>(0, nominal_[n] - usage[n]);
    }
    return over <= others_unused;
  }

  // BestEffortFIFO per ClusterQueue: pending workloads by priority, then
  // creation time; each tried in turn, those that do not fit (even with
  // preemption) are passed over.
  void Admit(double t) {
    std::vector<int> order;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (state_[i].pending) order.push_back(static_cast<int>(i));
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (jobs_[a].priority != jobs_[b].priority) return jobs_[a].priority > jobs_[b].priority;
      return jobs_[a].submit < jobs_[b].submit;
    });
    for (int id : order) {
      Alloc a;
      if (QuotaFits(jobs_[id], usage_) && Consolidate(pool_, jobs_[id].gpus, &a)) {
        Start(id, t, a);
      } else if (Preempt(id, t) && QuotaFits(jobs_[id], usage_) &&
                 Consolidate(pool_, jobs_[id].gpus, &a)) {
        Start(id, t, a);
      }
    }
  }

  // Kueue's preemption for `id`: candidates of its own ClusterQueue with
  // lower priority, and, if it fits its nominal quota, any workload of a
  // borrowing ClusterQueue; other ClusterQueues' first, then lowest
  // priority, then most recently admitted. Evicts the fewest in that order
  // that make room (quota and nodes); nothing if no set does.
  bool Preempt(int id, double t) {
    const KueueJob& j = jobs_[id];
    const bool within_nominal = usage_[j.ns] + j.gpus <= nominal_[j.ns];
    std::vector<int> cands;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (!state_[i].running) continue;
      const KueueJob& v = jobs_[i];
      const bool own = v.ns == j.ns && v.priority < j.priority;
      const bool reclaim = v.ns != j.ns && within_nominal && usage_[v.ns] > nominal_[v.ns];
      if (own || reclaim) cands.push_back(static_cast<int>(i));
    }
    std::stable_sort(cands.begin(), cands.end(), [&](int a, int b) {
      const bool oa = jobs_[a].ns != j.ns, ob = jobs_[b].ns != j.ns;
      if (oa != ob) return oa;
      if (jobs_[a].priority != jobs_[b].priority) return jobs_[a].priority < jobs_[b].priority;
      return state_[a].admitted_at > state_[b].admitted_at;
    });
    // Tried on copies of the pool and the usage; evicted only if enough.
    Pool pool = pool_;
    std::vector<int64_t> usage = usage_;
    std::vector<int> chosen;
    for (int c : cands) {
      // A borrowing ClusterQueue is reclaimed only while it still borrows.
      if (jobs_[c].ns != j.ns && usage[jobs_[c].ns] <= nominal_[jobs_[c].ns]) continue;
      chosen.push_back(c);
      Give(pool, state_[c].alloc);
      usage[jobs_[c].ns] -= jobs_[c].gpus;
      Alloc a;
      if (!QuotaFits(j, usage) || !Consolidate(pool, j.gpus, &a)) continue;
      for (int v : chosen) {
        Stop(v, t);
        ++run_.preemptions;
        if (jobs_[v].ns != j.ns) ++run_.reclaim_evictions;
        run_.lost_gpu_seconds += Penalty(jobs_[v].gpus) * jobs_[v].gpus;
        state_[v].remaining += Penalty(jobs_[v].gpus);
        ++state_[v].epoch;
        requeue_.push({t + kRequeueSeconds, v, state_[v].epoch});
      }
      return true;
    }
    return false;  // no set makes room: nothing is evicted
  }

  void Start(int id, double t, const Alloc& a) {
    State& s = state_[id];
    Take(pool_, a);
    s.alloc = a;
    s.running = true;
    s.pending = false;
    s.run_start = t;
    s.admitted_at = t;
    run_.jobs[id].queue_time += t - s.pending_since;
    usage_[jobs_[id].ns] += jobs_[id].gpus;
    done_.push({t + s.remaining, id, s.epoch});
  }

  // Takes `id` off its nodes (finished or evicted).
  void Stop(int id, double t) {
    State& s = state_[id];
    run_.busy_gpu_seconds += (t - s.run_start) * jobs_[id].gpus;
    s.remaining -= t - s.run_start;
    Give(pool_, s.alloc);
    s.running = false;
    usage_[jobs_[id].ns] -= jobs_[id].gpus;
  }

  void Finish(int id, double t) {
    Stop(id, t);
    run_.jobs[id].done = true;
    run_.jobs[id].end = t;
    run_.makespan = std::max(run_.makespan, t);
  }

  // Time to guarantee, per namespace (KueueRun::guarantee_waits).
  void Account(double t) {
    std::vector<int> waiting(nominal_.size(), 0);
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (state_[i].pending) ++waiting[jobs_[i].ns];
    }
    for (size_t n = 0; n < nominal_.size(); ++n) {
      const bool owed = usage_[n] < nominal_[n] && waiting[n] > 0;
      if (owed && owed_since_[n] < 0) owed_since_[n] = t;
      if (!owed && owed_since_[n] >= 0) {
        run_.guarantee_waits.push_back(t - owed_since_[n]);
        owed_since_[n] = -1;
      }
    }
  }

  const std::vector<KueueJob>& jobs_;
  const std::vector<int64_t>& nominal_;
  Pool pool_;
  std::vector<State> state_;
  std::vector<int64_t> usage_;
  std::vector<double> owed_since_;
  const double sample_every_;
  double next_sample_ = 0;
  std::priority_queue<Event> done_, requeue_;
  KueueRun run_;
};

}  // namespace

KueueRun RunKueueLike(const std::vector<KueueJob>& jobs, const std::vector<int64_t>& nominal,
                      int gpus_per_node, double sample_every) {
  return KueueWorld(jobs, nominal, gpus_per_node, sample_every).Run();
}

}  // namespace gpusched::sim
