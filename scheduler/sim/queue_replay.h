// The replay protocol's "gpusched" policy: the job trace replayed on one
// shared pool of nodes through gpusched's own queue manager
// (scheduler/queue QueueManager, the PodGate `serve` installs) on a virtual
// clock. Each job becomes pods (a gang when it has several and "gang" is
// set; Philly jobs larger than a node become gangs of equal pods); pods are
// created pending in a ClusterState as a cluster source would, and a
// kube-scheduler-like loop (KubeCycle) offers them to the ExtenderService
// in kube-scheduler's queue order. Queue order, quota admission (guarantees,
// cohort borrowing), gang reservations, backfill and preemption victims are
// the queue manager's; placement is the Framework's; the manager's Tick
// (reclaim) runs at every event; its victims keep their GPUs for a 30 s
// termination grace period. Evictions stop the job (a gang entirely),
// which restarts from its last progress plus a restart penalty (7/30/60 s,
// as the SRTF baseline) in new pods, as a Job controller would recreate them.
//
// Quotas: the config's `quotas`; a VC the config does not list gets
// guaranteed = its pool's GPUs, limit = the whole pool, cohort "vcs".
// `reclaim` and `gang` come from the config as well. No durations are
// given to the scheduler.
//
// Callers: replay.cc (RunReplay with policy "gpusched"), tests. Pure
// function of its inputs; thread-compatible (one run per call).
#ifndef GPUSCHED_SIM_QUEUE_REPLAY_H_
#define GPUSCHED_SIM_QUEUE_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/replay.h"
#include "scheduler/sim/share_metrics.h"

namespace gpusched::sim {

// One job's outcome (durations already multiplied by the load).
struct QueueReplayJob {
  int ns = 0;  // index into the pool list
  double submit = 0, duration = 0, end = -1, queue_time = 0;
  bool done = false;
  bool gang = false;  // its pods start together
};

struct QueueReplayRun {
  std::vector<QueueReplayJob> jobs;
  double makespan = 0, busy_gpu_seconds = 0, lost_gpu_seconds = 0;
  int64_t preemptions = 0;            // jobs stopped (preempt verb or reclaim)
  int64_t reclaim_evictions = 0;      // of which by the queue manager's reclaim
  int64_t quota_violations = 0;       // (step, namespace) with usage above limit
  std::vector<int64_t> guaranteed;    // per pool, GPUs
  std::vector<int64_t> max_borrowed;  // per pool, GPUs above the guarantee
  std::vector<TimelinePoint> timeline;
  // Time to guarantee: each episode from a namespace holding less than its
  // guarantee while a pod of it waits, to it holding its guarantee or no
  // pod of it waiting any more (seconds; episodes still open at the end are
  // closed at the makespan). ShareMetrics, as the other policies.
  std::vector<double> guarantee_waits;
  double util_while_waiting = -1, surplus_jain = -1;  // ShareMetrics
  EstimateAccuracy estimates;
};

// The quotas the run uses (config quotas plus the derived per-VC ones, which
// take the configured default's queueing strategy).
QuotaConfig ReplayQuotas(const QuotaConfig& configured,
                         const std::vector<std::pair<std::string, int>>& pools, int gpus_per_node);

// Each pool's entitlement in `quotas` (from ReplayQuotas): guarantee,
// limit and weight, in pool order.
std::vector<ShareSpec> ReplayShares(const QuotaConfig& quotas,
                                    const std::vector<std::pair<std::string, int>>& pools);

absl::StatusOr<QueueReplayRun> RunQueueReplay(const std::vector<Job>& jobs,
                                              const std::vector<std::pair<std::string, int>>& pools,
                                              const ReplayOptions& options);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_QUEUE_REPLAY_H_
