// What a simulator run returns: the fgd protocol's FgdResult (RunFgd,
// scheduler/sim/fgd_protocol.h) and the replay protocol's ReplayResult
// (RunReplay, scheduler/sim/replay.h), written to result files by
// scheduler/codec/sim_codec and read by the report and the grid. Plain value
// types in gpusched_sim_types, the one library both the simulator and its
// codec link, so the codec needs nothing else of the simulator.
// Thread-compatible.
#ifndef GPUSCHED_SIM_RESULTS_H_
#define GPUSCHED_SIM_RESULTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpusched::sim {

// One column of the fgd protocol's curve: by rounded arrival percent.
struct CurvePoint {
  int arrived_pct = 0;
  double allocated_pct = 0;
  double frag_total_pct = 0;
  double frag_idle_pct = 0;
};

struct FgdResult {
  std::string policy;
  std::string trace;
  uint64_t seed = 0;
  double unallocated_at_100 = 0;
  double allocated_at_130 = 0;
  double frag_total_at_90 = 0;
  double frag_idle_at_90 = 0;
  std::vector<CurvePoint> curve;
  int64_t pods = 0;
  int64_t failed = 0;
  uint64_t decision_hash = 0;       // over every (pod, node, devices) decision
  std::vector<int32_t> placements;  // node index per arriving pod, -1 = failed
  double seconds = 0;
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

// gpusched's replay: how good the estimated start was (the queue manager's
// estimate refresh every 60 simulated seconds, from the runtime history the
// replay has shown it, never the trace's durations). One sample per unit at
// its first refresh in the queue and at each hour it waits, against when it
// started; the naive baseline predicts its queue position times the mean
// runtime of the units completed so far.
struct EstimateAccuracy {
  int64_t samples = 0;
  double median_abs_error_s = 0;
  double within_25pct = 0;  // share of samples within 25 % of the wait still ahead
  double naive_median_abs_error_s = 0;
  double naive_within_25pct = 0;
  int64_t backfill_overruns = 0;
  // Starts of units a backfilled unit passed, and of those the ones whose
  // start slipped because of it (BackfillSlips, backfill_slips.h).
  int64_t backfill_heads_passed = 0;
  int64_t backfill_head_slips = 0;
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
  bool has_estimates = false;  // gpusched's replay
  EstimateAccuracy estimates;
  std::map<std::string, NamespaceStats> per_ns;
  // gpusched and kueue-like: sampled every ReplayOptions::sample_every.
  std::vector<TimelinePoint> timeline;
  // Every job's completion time and queueing delay (s), ascending (the
  // report's CDFs; not in the JSON).
  std::vector<double> jct_sorted, queue_sorted;
};

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_RESULTS_H_
