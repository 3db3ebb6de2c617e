#include "scheduler/sim/block_world.h"

#include <algorithm>
#include <numeric>

namespace gpusched::sim {
namespace {

int64_t PoolGpus(const std::vector<ShareSpec>& ns, int64_t capacity) {
  int64_t guaranteed = 0;
  for (const ShareSpec& s : ns) guaranteed += s.guarantee;
  return std::max(capacity, guaranteed);
}

}  // namespace

BlockWorld::BlockWorld(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns,
                       int64_t capacity, int gpus_per_node, double sample_every)
    : jobs_(jobs),
      ns_(ns),
      pool_(MakePool(PoolGpus(ns, capacity), gpus_per_node)),
      state_(jobs.size()),
      usage_(ns.size(), 0),
      metrics_(ns, pool_.capacity),
      sample_every_(sample_every) {
  run_.jobs.resize(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) state_[i].remaining = jobs[i].duration;
}

KueueRun BlockWorld::Run() {
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
      if (e.epoch != state_[e.job].epoch) continue;
      state_[e.job].pending = true;
      state_[e.job].pending_since = e.time;
    }
    while (next < arrivals.size() && jobs_[arrivals[next]].submit <= t) {
      const int id = arrivals[next++];
      state_[id].pending = true;
      state_[id].pending_since = jobs_[id].submit;
    }
    Schedule(t);
    Observe(t);
  }
  metrics_.Finish(run_.makespan);
  run_.guarantee_waits = metrics_.GuaranteeWaits();
  run_.util_while_waiting = metrics_.UtilisationWhileWaiting();
  run_.surplus_jain = metrics_.MeanSurplusJain();
  return std::move(run_);
}

void BlockWorld::Start(int id, double t, const Alloc& a) {
  State& s = state_[id];
  Take(pool_, a);
  s.alloc = a;
  s.running = true;
  running_.push_back(id);
  s.pending = false;
  s.run_start = t;
  s.admitted_at = t;
  run_.jobs[id].queue_time += t - s.pending_since;
  usage_[jobs_[id].ns] += jobs_[id].gpus;
  done_.push({t + s.remaining, id, s.epoch});
}

void BlockWorld::Evict(int v, int for_ns, double t) {
  Stop(v, t);
  ++run_.preemptions;
  if (jobs_[v].ns != for_ns) ++run_.reclaim_evictions;
  run_.lost_gpu_seconds += Penalty(jobs_[v].gpus) * jobs_[v].gpus;
  state_[v].remaining += Penalty(jobs_[v].gpus);
  ++state_[v].epoch;
  requeue_.push({t + kRequeueSeconds, v, state_[v].epoch});
}

void BlockWorld::Stop(int id, double t) {
  State& s = state_[id];
  run_.busy_gpu_seconds += (t - s.run_start) * jobs_[id].gpus;
  s.remaining -= t - s.run_start;
  Give(pool_, s.alloc);
  s.running = false;
  if (auto it = std::find(running_.begin(), running_.end(), id); it != running_.end()) {
    *it = running_.back();
    running_.pop_back();
  }
  usage_[jobs_[id].ns] -= jobs_[id].gpus;
}

void BlockWorld::Finish(int id, double t) {
  Stop(id, t);
  run_.jobs[id].done = true;
  run_.jobs[id].end = t;
  run_.makespan = std::max(run_.makespan, t);
}

void BlockWorld::Observe(double t) {
  std::vector<int64_t> waiting(ns_.size(), 0);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (state_[i].pending) waiting[jobs_[i].ns] += jobs_[i].gpus;
  }
  metrics_.Observe(t, usage_, waiting);
}

}  // namespace gpusched::sim
