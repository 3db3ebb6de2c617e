// The `replay` protocol: event-driven replay of a job trace (Philly) on per-
// virtual-cluster pools of 8-GPU nodes, with the semantics of the Helios
// artifact's FIFO / SJF / SRTF (philly-calibration.md §2): consolidate
// placement, strict head-of-line blocking for FIFO/SJF, SRTF's greedy
// per-VC quota with 7/30/60 s restart penalties and 1 s release delay.
// Policy "gpusched": one shared pool driven by gpusched's queue manager
// (scheduler/queue, the same code as serve) and the policy Framework; see
// queue_replay.h.
//
// Callers: driver, tests, benchmarks. Pure function of its inputs;
// thread-safe.
#ifndef GPUSCHED_SIM_REPLAY_H_
#define GPUSCHED_SIM_REPLAY_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/model/snapshot.h"
#include "scheduler/sim/inputs.h"

namespace gpusched::sim {

struct DriverOptions;

struct ReplayOptions {
  // fifo | sjf | srtf (per VC); fifo-pool | sjf-pool | srtf-pool | las-pool |
  // kueue-like | kai-like | gpusched (one pool of every VC's nodes);
  // kueue-like-no-fill-back, kueue-like-no-ordering, kueue-like-before: the
  // Kueue-like baseline without fill-back, without its admission order
  // (every pending workload by priority and creation), or as it was before
  // both (KueueOptions).
  std::string policy = "fifo";
  double load = 1;  // every duration x load
  int gpus_per_node = 8;
  double sample_every = 3600;  // timeline resolution (s)
  // gpusched only: scoring, quotas, reclaim and gang sections (as serve).
  SchedulerConfig config;
  // gpusched only: called after every event time with the cluster (tests).
  std::function<void(double t, const ClusterSnapshot& snapshot)> on_step;
  // gpusched only: a pod that failed a cycle is retried on a cluster event
  // only once its backoff has passed (kube-scheduler's podInitialBackoff 1 s,
  // doubling per attempt, podMaxBackoff 10 s; its backoff queue is flushed
  // every second). Off: every pending pod is retried at once after every
  // event (the hand-computed tests' model).
  bool kube_backoff = false;
};

struct NamespaceStats {
  int64_t jobs = 0;
  double avg_jct = 0, avg_queue = 0, avg_slowdown = 0;
  int64_t quota_gpus = 0;
  int64_t max_borrowed = 0;  // most GPUs held above the guarantee
};

struct TimelinePoint {
  double t = 0;
  double utilisation = 0;                    // allocated / capacity
  std::map<std::string, double> queue_wait;  // mean wait of waiting jobs per ns (gpusched)
  std::map<std::string, double> used_gpus;   // GPUs in use per ns
};

struct ReplayResult {
  std::string policy;
  double load = 1;
  int64_t jobs = 0;
  double avg_jct = 0, p50_jct = 0, p95_jct = 0, p99_jct = 0;
  double avg_queue = 0, makespan = 0, utilisation = 0;
  int64_t preemptions = 0;        // running jobs stopped
  int64_t reclaim_evictions = 0;  // gpusched: of which by the queue's reclaim
  double lost_gpu_seconds = 0;
  // fifo/sjf/srtf: steps with a VC above its pool; gpusched: (event,
  // namespace) pairs with GPU usage above the namespace's quota limit.
  int64_t quota_violations = 0;
  double fairness = 0;  // max/min average slowdown over namespaces
  // Every policy on one pool (not the per-VC fifo/sjf/srtf): the
  // ShareMetrics against each namespace's guarantee, limit and weight from
  // the config's quotas (as gpusched's replay has them, ReplayQuotas).
  bool share_metrics = false;
  // Time to guarantee: episodes, their mean, 95th percentile and longest (s).
  int64_t guarantee_episodes = 0;
  double avg_time_to_guarantee = 0, p95_time_to_guarantee = 0, max_time_to_guarantee = 0;
  // Share of GPUs in use while some job waited; surplus fairness (Jain's
  // index, time-weighted); -1: not defined (nothing waited / fewer than two
  // namespaces ever entitled to surplus).
  double util_while_waiting = -1, surplus_jain = -1;
  // Gangs: jobs of several pods that start together (a "gang" job, or a
  // Philly job larger than a node); the longest time any of them waited in
  // all (s).
  int64_t gang_jobs = 0;
  double max_gang_wait = 0;
  std::map<std::string, NamespaceStats> per_ns;
  // gpusched and kueue-like: sampled every ReplayOptions::sample_every.
  std::vector<TimelinePoint> timeline;
  // Every job's completion time and queueing delay (s), ascending (the
  // report's CDFs; not in the JSON).
  std::vector<double> jct_sorted, queue_sorted;
};

// `pools`: (namespace, nodes). Jobs of other namespaces are ignored.
absl::StatusOr<ReplayResult> RunReplay(const std::vector<Job>& jobs,
                                       const std::vector<std::pair<std::string, int>>& pools,
                                       const ReplayOptions& options);

absl::Status RunReplayDriver(const DriverOptions& o);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_REPLAY_H_
