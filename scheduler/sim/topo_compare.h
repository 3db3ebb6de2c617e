// The topology comparison: one training-job workload (topo_workload.h) on
// one topology-shaped cluster (topo_cluster.h) under one placement, and
// what it measures for gangs and domains.
//
// Placements ("policies"):
//  - gpusched: the real queue manager and Framework through the replay
//    protocol's kube-scheduler loop (queue_replay.h), node by node, with no
//    topology levels configured: today's placement;
//  - gpusched-topology: the same with the cluster's levels in
//    gang.topologyLevels, node labels, and each gang's request as the pod
//    decoder reads gpusched.io/topology-required / -preferred; single pods
//    scored as configured (DomainFit only with scoring.domainWeight set);
//  - gpusched-topology-domainfit: the same with single pods scored by
//    DomainFit too (policy/domain_fit.h), at the configured
//    scoring.domainWeight or, if that is 0, kMeasuredDomainWeight;
//  - kueue-tas: Kueue's TAS placement (kueue_tas.h) in a BestEffortFIFO
//    queue: at every arrival or completion each pending job, oldest first,
//    starts if TAS finds it room; one ClusterQueue owns the whole cluster.
// Every gang is slowed as the slowdown model says (topo_slowdown.h: by the
// highest level it crosses, or by the domains of its level it spans),
// whatever the placement knew of its request.
//
// Measured, from the start to the last arrival unless said:
// share of started gangs in one domain of their level, required gangs
// placed over more than one, the share of started gangs over more than one
// domain of the top level (blocks, cliques), gang wait (submission to start) mean and p95,
// average JCT (with the slowdown) of all jobs, of gangs and of single
// pods, single pods' mean wait, allocated GPU
// share, and the share of domains left whole (no GPU in use) at the top
// level and at the gangs' smallest level, averaged over time and at the
// last arrival. Jobs still running or waiting when the run ends are
// counted unfinished and left out of JCT.
//
// Callers: the topology driver, tests. Thread-compatible (one run per call).
#ifndef GPUSCHED_SIM_TOPO_COMPARE_H_
#define GPUSCHED_SIM_TOPO_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "scheduler/sim/topo_cluster.h"
#include "scheduler/sim/topo_slowdown.h"
#include "scheduler/sim/topo_workload.h"

namespace gpusched::sim {

inline constexpr char kTopologyDomainFit[] = "gpusched-topology-domainfit";

struct TopoCompareOptions {
  std::string policy = "gpusched";
  SlowdownOptions slowdown;  // how spread gangs slow down
  SchedulerConfig config;    // gpusched policies (scoring, gang)
  // gpusched: 0 = equal scores go to the lowest node index; else the kube
  // cycle draws among them as kube-scheduler does (ReplayOptions::tie_seed).
  uint64_t tie_seed = 0;
};

struct TopoResult {
  std::string policy;
  int64_t jobs = 0, gangs = 0, gangs_started = 0, unfinished = 0;
  int64_t gangs_one_domain = 0;  // started gangs in one domain of their level
  int64_t required_gangs = 0;    // started gangs that required their level
  int64_t required_spread = 0;   // ... placed over more than one domain
  double top_spread_share = 0;   // started gangs over several top-level domains
  double one_domain_share = 0;   // gangs_one_domain / gangs_started
  double gang_wait_mean = 0, gang_wait_p95 = 0;
  double avg_jct = 0, avg_gang_jct = 0;
  double avg_single_jct = 0, single_wait_mean = 0;  // jobs that are not gangs
  double utilisation = 0;                           // time-averaged allocated GPUs / capacity
  double whole_top = 0, whole_group = 0;            // time-averaged share of whole domains
  double whole_top_end = 0, whole_group_end = 0;    // at the last arrival
  double makespan = 0;
};

absl::StatusOr<TopoResult> RunTopoCompare(const TopoCluster& cluster,
                                          const std::vector<TopoJob>& jobs,
                                          const TopoCompareOptions& options);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_TOPO_COMPARE_H_
