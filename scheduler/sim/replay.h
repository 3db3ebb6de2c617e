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
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"
#include "gpusched/model/snapshot.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/results.h"

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
  // gpusched only: 0, the kube cycle gives a tie to the lowest node index;
  // else it draws among the tied nodes (KubeCycle), seeded with this.
  uint64_t tie_seed = 0;
  // gpusched only (topology comparison): the nodes to run on instead of the
  // pools' synthetic 8-GPU nodes (as many as the pools have in all); a hook
  // that completes each new pod of input job `job` (annotations the queue
  // reads); and one called when all pods of a job's unit are bound, with
  // their nodes, returning the factor its remaining running time is
  // multiplied by (the slowdown of a gang spread over domains).
  std::vector<NodeSpec> nodes;
  std::function<void(int job, PodRequest* pod)> decorate_pod;
  std::function<double(int job, double t, const std::vector<std::string>& nodes)> on_start;
};

// `pools`: (namespace, nodes). Jobs of other namespaces are ignored.
absl::StatusOr<ReplayResult> RunReplay(const std::vector<Job>& jobs,
                                       const std::vector<std::pair<std::string, int>>& pools,
                                       const ReplayOptions& options);

absl::Status RunReplayDriver(const DriverOptions& o);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_REPLAY_H_
