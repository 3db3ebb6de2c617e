// A model of Kueue's Topology Aware Scheduling placement (TAS, profile
// BestFit, the default; kubernetes-sigs/kueue pkg/cache/scheduler/
// tas_flavor_snapshot.go, findTopologyAssignment), for the simulator's
// topology comparison. For a pod set of `pods` pods of `per_pod` GPUs:
//  1. each node can take floor(free GPUs / per_pod) pods; a domain the sum
//     of its nodes';
//  2. at the requested level, domains are sorted by that count, largest
//     first (ties: domain order). If the largest holds every pod, the
//     domain with the smallest count that still holds them is taken (best
//     fit). Otherwise a required request fails; a preferred one tries the
//     level above, and at the top level takes domains largest first, the
//     last one again by best fit, until the pods are covered;
//  3. going down one level at a time, the children of the chosen domains
//     are sorted the same way and taken largest first, the last by best
//     fit, until the pods are covered: the fewest domains at every level.
// Pods without a topology request in a TAS flavor are "implied" requests
// at the lowest level, placed with the LeastFreeCapacity profile
// (TASProfileMixed, on by default since Kueue 0.15): the node with the
// least room that still fits (best fit by node).
// Not modelled: leaders, slices, balanced placement (off by default),
// affinity scores, taints, non-GPU resources.
//
// Callers: scheduler/sim (topology comparison), tests. Pure; thread-safe.
#ifndef GPUSCHED_SIM_KUEUE_TAS_H_
#define GPUSCHED_SIM_KUEUE_TAS_H_

#include <optional>
#include <utility>
#include <vector>

#include "scheduler/sim/topo_cluster.h"

namespace gpusched::sim {

struct TasRequest {
  int pods = 1;
  int per_pod = 1;
  int level = -1;         // requested level; -1 = implied (lowest level)
  bool required = false;  // required (else preferred or implied)
};

// (node index, pods on it), or nullopt if the request does not fit now.
std::optional<std::vector<std::pair<int, int>>> KueueTasPlace(const TopoCluster& cluster,
                                                              const std::vector<int>& free_gpus,
                                                              const TasRequest& request);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_KUEUE_TAS_H_
