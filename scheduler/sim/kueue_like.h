// A Kueue-like queueing baseline for the replay protocol: the admission and
// preemption rules of Kueue (kueue.sigs.k8s.io) with one ClusterQueue per
// namespace, on the same shared pool of 8-GPU nodes as gpusched's replay:
//  - nominal quota = the namespace's guarantee; every ClusterQueue is in one
//    cohort and may borrow the cohort's unused nominal quota (no borrowing
//    limit);
//  - queueing strategy BestEffortFIFO: within a ClusterQueue, workloads in
//    priority order, then creation time; one that cannot be admitted does
//    not block those behind it;
//  - preemption withinClusterQueue: LowerPriority (a workload may evict
//    lower-priority workloads of its own ClusterQueue) and
//    reclaimWithinCohort: Any (a workload that fits its nominal quota may
//    evict workloads of ClusterQueues that borrow, whatever their
//    priority); candidates: other ClusterQueues' first, then lowest
//    priority, then most recently admitted; the fewest that make room;
//  - a workload is admitted only if its pods also get nodes (consolidated
//    placement, as the other replay baselines); an evicted workload frees
//    its GPUs at once, is back in its queue 30 s later (terminating pods,
//    requeueing) and runs again with the replay's restart penalty (7/30/60
//    s by size).
// Rules from Kueue's documentation (concepts: ClusterQueue, Cohort,
// Preemption). A model of those rules, not Kueue's code.
//
// Callers: scheduler/sim/replay.cc. Pure function of its inputs.
#ifndef GPUSCHED_SIM_KUEUE_LIKE_H_
#define GPUSCHED_SIM_KUEUE_LIKE_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace gpusched::sim {

struct KueueJob {
  int ns = 0;  // index of its namespace (ClusterQueue)
  int32_t priority = 0;
  int gpus = 0;  // all pods of the job, admitted together
  double submit = 0, duration = 0;
};

struct KueueJobResult {
  double end = -1, queue_time = 0;
  bool done = false;
};

struct KueueRun {
  std::vector<KueueJobResult> jobs;  // same order as the input
  double makespan = 0, busy_gpu_seconds = 0, lost_gpu_seconds = 0;
  int64_t preemptions = 0, reclaim_evictions = 0, quota_violations = 0;
  // Episodes of a namespace below its nominal quota with a workload
  // waiting, until it holds its nominal quota or nothing waits (s).
  std::vector<double> guarantee_waits;
  // GPUs in use per namespace every `sample_every` seconds from 0 (the
  // state just before the events of a sample's time): (time, by ns).
  std::vector<std::pair<double, std::vector<int64_t>>> usage_samples;
};

// `nominal[n]`: namespace n's nominal quota in GPUs; the pool has
// sum(nominal) / gpus_per_node nodes.
KueueRun RunKueueLike(const std::vector<KueueJob>& jobs, const std::vector<int64_t>& nominal,
                      int gpus_per_node, double sample_every);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_KUEUE_LIKE_H_
