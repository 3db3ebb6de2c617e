// The event loop shared by the Kueue-like and KAI-like replay baselines:
// each job is one all-or-nothing block of GPUs on a Pool (consolidated
// placement); arrivals and completions drive it; an evicted job frees its
// GPUs at once, is back in its queue kRequeueSeconds later and restarts
// with the replay's penalty (7/30/60 s). It samples usage and feeds
// ShareMetrics after every event time. A subclass decides, at each event
// time, what starts and what is evicted (Schedule).
//
// Callers: kueue_like.cc, kai_like.cc. Thread-compatible; one run per
// object.
#ifndef GPUSCHED_SIM_BLOCK_WORLD_H_
#define GPUSCHED_SIM_BLOCK_WORLD_H_

#include <cstdint>
#include <queue>
#include <vector>

#include "scheduler/sim/kueue_like.h"
#include "scheduler/sim/pool.h"
#include "scheduler/sim/share_metrics.h"

namespace gpusched::sim {

class BlockWorld {
 public:
  // An evicted job is back in its queue this long after the eviction (its
  // pods terminate, the queue requeues it): as gpusched's replay, whose
  // victims hold their GPUs for 30 s.
  static constexpr double kRequeueSeconds = 30;

  // The pool has max(capacity, sum of guarantees) GPUs.
  BlockWorld(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns, int64_t capacity,
             int gpus_per_node, double sample_every);
  virtual ~BlockWorld() = default;

  KueueRun Run();

 protected:
  struct State {
    double remaining = 0, run_start = 0, pending_since = 0, admitted_at = 0;
    bool running = false, pending = false;
    int epoch = 0;
    Alloc alloc;
  };

  // Starts and evicts at event time `t` (Start, Evict).
  virtual void Schedule(double t) = 0;

  void Start(int id, double t, const Alloc& a);
  // Evicts running job `v` for a job of namespace `for_ns`.
  void Evict(int v, int for_ns, double t);

  const std::vector<KueueJob>& jobs() const { return jobs_; }
  const std::vector<ShareSpec>& ns() const { return ns_; }
  const Pool& pool() const { return pool_; }
  const State& state(int id) const { return state_[id]; }
  const std::vector<int64_t>& usage() const { return usage_; }  // GPUs in use per namespace
  const std::vector<int>& running() const { return running_; }  // running jobs, any order

 private:
  struct Event {
    double time;
    int job;
    int epoch;
    bool operator<(const Event& o) const { return time > o.time; }
  };

  void Stop(int id, double t);  // takes `id` off its nodes (finished or evicted)
  void Finish(int id, double t);
  void Observe(double t);

  const std::vector<KueueJob>& jobs_;
  const std::vector<ShareSpec>& ns_;
  Pool pool_;
  std::vector<State> state_;
  std::vector<int64_t> usage_;
  std::vector<int> running_;
  ShareMetrics metrics_;
  const double sample_every_;
  double next_sample_ = 0;
  std::priority_queue<Event> done_, requeue_;
  KueueRun run_;
};

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_BLOCK_WORLD_H_
