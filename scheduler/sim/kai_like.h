// A KAI-like queueing baseline for the replay protocol: the quota model of
// NVIDIA's KAI scheduler ("deserved quota plus over-quota weight", its
// proportion plugin) with one queue per namespace, on the same shared pool
// of 8-GPU nodes as the other replay baselines. At every event time it runs
// KAI's session actions (allocate, reclaim, preempt) until nothing changes:
//  - fair share: each queue gets min(deserved, requested) first
//    (requested = GPUs in use plus GPUs of its pending jobs, at most its
//    limit); the rest of the pool is divided among the queues that want
//    more, in proportion to over-quota weight, none beyond its request
//    (WeightedFairShares; continuous, where KAI rounds each round down to
//    whole GPUs);
//  - allocate: queues in KAI's queue order (at or below fair share first,
//    then those that stay within deserved quota with their next job, then
//    the smaller allocated / max(deserved, fair share)); a queue's jobs by
//    priority, then creation; a job starts if it gets nodes and keeps its
//    queue within its limit (maxAllowed): idle GPUs are used whatever the
//    fair share;
//  - reclaim: a pending job whose queue stays within its fair share with it
//    may evict jobs of other queues, each victim's queue still above
//    max(deserved, fair share) (MaintainFairShare) or, if the reclaimer's
//    queue stays within its deserved quota, above its deserved quota
//    (GuaranteeDeservedQuota); victims from the queue furthest above its
//    share first, lowest priority and newest first within it, until the job
//    fits;
//  - preempt: a pending job may evict lower-priority jobs of its own queue;
//  - all jobs are preemptible (KAI's training class); evicted jobs free
//    their GPUs at once, are back 30 s later and restart with the replay's
//    penalty (7/30/60 s), as in the Kueue-like baseline.
// Rules from KAI-scheduler's fairness documentation and its proportion
// plugin (resource division, reclaim strategies, queue order). A model of
// those rules, not KAI's code.
//
// Callers: scheduler/sim/replay.cc, tests. Pure function of its inputs.
#ifndef GPUSCHED_SIM_KAI_LIKE_H_
#define GPUSCHED_SIM_KAI_LIKE_H_

#include <vector>

#include "scheduler/sim/kueue_like.h"
#include "scheduler/sim/share_metrics.h"

namespace gpusched::sim {

struct KaiOptions {
  int gpus_per_node = 8;
  double sample_every = 0;  // 0: no usage samples
  // GPUs of the pool; below sum(deserved) it is raised to that sum.
  int64_t capacity = 0;
};

// Jobs and results as the Kueue-like baseline's. `ns[n]`: queue n's
// deserved quota (guarantee), over-quota weight and limit.
KueueRun RunKaiLike(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns,
                    const KaiOptions& options);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_KAI_LIKE_H_
