// A Kueue-like queueing baseline for the replay protocol: the admission and
// preemption rules of Kueue (kueue.sigs.k8s.io; classical preemption, no
// fair sharing) with one ClusterQueue per namespace, on the same shared pool
// of 8-GPU nodes as gpusched's replay:
//  - nominal quota = the namespace's guarantee; every ClusterQueue is in one
//    cohort and may borrow the cohort's unused quota, up to its limit; GPUs
//    of the pool no ClusterQueue has as nominal quota are the cohort's own
//    nominal quota (lendable to all, reclaimable by none);
//  - queueing strategy BestEffortFIFO: within a ClusterQueue, workloads in
//    priority order, then creation time; one that cannot be admitted is set
//    aside until the next event and does not block those behind it;
//  - the admission cycle (KueueOptions::nominal_first): each cycle takes the
//    head of every ClusterQueue and tries them with those that fit within
//    nominal quota first, then higher priority, then creation time; cycles
//    repeat until every head is admitted or set aside;
//  - preemption, tried when a workload does not fit and its request is at
//    most its nominal quota: withinClusterQueue LowerPriority (lower-priority
//    workloads of its own ClusterQueue) and reclaimWithinCohort Any (if it
//    then fits within nominal quota, any workload of a ClusterQueue that
//    borrows, while that one still borrows); candidates other ClusterQueues'
//    first, then lowest priority, then most recently admitted; removed in
//    that order until the workload fits, then (fill-back,
//    KueueOptions::fill_back) put back in reverse order wherever the
//    workload still fits without them: only the rest are evicted;
//  - a workload is admitted only if its pods also get nodes (consolidated
//    placement, as the other replay baselines); an evicted workload frees
//    its GPUs at once, is back in its queue 30 s later (terminating pods,
//    requeueing) and runs again with the replay's restart penalty (7/30/60
//    s by size).
// Rules from Kueue's documentation and its scheduler and preemption code
// (the classical iterator's order, the candidate order and fill-back). A
// model of those rules, not Kueue's code.
//
// Callers: scheduler/sim/replay.cc, tests. Pure function of its inputs.
#ifndef GPUSCHED_SIM_KUEUE_LIKE_H_
#define GPUSCHED_SIM_KUEUE_LIKE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "scheduler/sim/share_metrics.h"

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

// The result of a Kueue-like or KAI-like run.
struct KueueRun {
  std::vector<KueueJobResult> jobs;  // same order as the input
  double makespan = 0, busy_gpu_seconds = 0, lost_gpu_seconds = 0;
  int64_t preemptions = 0, reclaim_evictions = 0, quota_violations = 0;
  // Time to guarantee (ShareMetrics): episodes of a namespace below its
  // guarantee with a workload waiting (s).
  std::vector<double> guarantee_waits;
  // ShareMetrics' utilisation while a workload waits and surplus fairness
  // (-1: not defined in this run).
  double util_while_waiting = -1, surplus_jain = -1;
  // GPUs in use per namespace every `sample_every` seconds from 0 (the
  // state just before the events of a sample's time): (time, by ns).
  std::vector<std::pair<double, std::vector<int64_t>>> usage_samples;
};

struct KueueOptions {
  int gpus_per_node = 8;
  double sample_every = 0;  // 0: no usage samples
  // GPUs of the pool; below sum(nominal) it is raised to that sum.
  int64_t capacity = 0;
  // Kueue's fill-back of preemption victims that turn out not to be needed.
  bool fill_back = true;
  // Kueue's admission cycle (heads of every ClusterQueue, those within
  // nominal quota first). false: every pending workload in (priority,
  // creation) order, as this baseline did before.
  bool nominal_first = true;
  // Preemption only for a workload whose request is at most its nominal
  // quota (Kueue's flavor assigner). false: for any, as before.
  bool preempt_within_nominal_only = true;
};

// `ns[n]`: namespace n's nominal quota (its guarantee), limit and weight
// (the weight only for the fairness metric).
KueueRun RunKueueLike(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns,
                      const KueueOptions& options);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_KUEUE_LIKE_H_
