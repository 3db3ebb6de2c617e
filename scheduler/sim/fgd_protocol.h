// The `fgd` protocol: the FGD paper's (ATC '23) placement benchmark as the
// authors' simulator runs it (research notes: fgd-calibration.md §2). Pods
// are sorted by name and shuffled, then the workload is tuned to `tune` x
// cluster GPU capacity (clones appended, or random pods removed); pods arrive
// one at a time, are placed or fail, never leave and are never retried.
// After each pod the arrived and allocated GPU milli and the cluster
// fragmentation (against the trace's target workload: shapes covering 95 %
// of pods, CPU-only ones included) are logged, then binned by rounded
// arrival percent (mean per bin; k-1..k+1 when a bin is empty).
//
// One seeded std::mt19937_64 stream drives the shuffle, the tuning, the
// tie priority of nodes and Random's draws. Callers: CLI, grid, tests,
// benchmarks. RunFgd is reentrant (no shared state); thread-safe.
#ifndef GPUSCHED_SIM_FGD_PROTOCOL_H_
#define GPUSCHED_SIM_FGD_PROTOCOL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/model/pod.h"
#include "scheduler/sim/results.h"
#include "scheduler/sim/sim_cluster.h"

namespace gpusched::sim {

// Returns the target workload: the most popular shapes (CPU, GPUs, milli,
// models) until they cover `coverage` of the pods; weight = share of pods.
std::vector<FragmentationShape> LearnTarget(const std::vector<PodRequest>& pods,
                                            double coverage = 0.95);

// Sort by name, shuffle, then tune to `tune` x total_gpus x 1000 milli.
std::vector<PodRequest> PrepareWorkload(const std::vector<PodRequest>& trace, int64_t total_gpus,
                                        double tune, std::mt19937_64& rng);

// One logged event (after a pod's arrival and scheduling attempt).
struct Event {
  int64_t arrived_milli = 0;
  int64_t allocated_milli = 0;
  double frag_milli = 0;
};

// Bins events per the authors' merge script into columns 0..max_pct.
std::vector<CurvePoint> BinCurve(const std::vector<Event>& events, int64_t total_gpus,
                                 int max_pct = 130);

// Python's round(x, digits) (round half to even on the scaled value).
double RoundHalfEven(double x, int digits);

struct FgdOptions {
  std::string policy = "bestfit";
  std::string trace = "trace";
  uint64_t seed = 42;
  double tune = 1.3;
  bool progress = false;  // progress lines on stderr
};

absl::StatusOr<FgdResult> RunFgd(const SimCluster& cluster, const std::vector<PodRequest>& trace,
                                 const SchedulerConfig& config, const FgdOptions& options);

// Decides placements for RunFgdWith instead of the in-process Placer (the
// end-to-end mode asks a running extender). Called once per arriving pod,
// in order, on the run's own cluster.
class FgdDecider {
 public:
  virtual ~FgdDecider() = default;
  // Returns the node index for `pod` (-1: no node) and sets *devices; must
  // not change `cluster` (the caller places the pod). `rank` is the per-run
  // tie priority of nodes (lower wins). An error aborts the run.
  virtual absl::StatusOr<int> Choose(const PodRequest& pod, const SimCluster& cluster,
                                     const std::vector<int32_t>& rank, DeviceMask* devices) = 0;
};

// RunFgd with placements from `decider` (nullptr: the in-process Placer).
// Everything else (workload, seeded draws, curve) is as in RunFgd.
absl::StatusOr<FgdResult> RunFgdWith(const SimCluster& cluster,
                                     const std::vector<PodRequest>& trace,
                                     const SchedulerConfig& config, const FgdOptions& options,
                                     FgdDecider* decider);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_FGD_PROTOCOL_H_
