// PreemptionPlanner: which of a node's pods must go so a preemptor fits there.
// Pure planning on a copy of the node: victims are removed from the copy
// (their devices, CPU and memory freed), then the same Framework filters and
// the same device selector (ChoosePlacement) that filter and bind use decide
// whether the preemptor fits. So a plan is only returned when the freed
// devices plus the free ones form a set the preemptor can actually use (for
// example an all-NVLink set for gpusched.io/topology: nvlink-required).
//
// Callers (the queue manager's preempt verb and reclaim, the default
// preemption of ExtenderService) decide which pods may be victims and in
// which order; the planner takes units (one pod, or all members of a gang on
// the node) in that order until the preemptor fits, then gives back every
// unit it can spare, last taken first (kube-scheduler's "reprieve"), so no
// single unit of the result is unnecessary.
//
// Pure; thread-safe.
#ifndef GPUSCHED_POLICY_PREEMPTION_PLANNER_H_
#define GPUSCHED_POLICY_PREEMPTION_PLANNER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/model/node.h"
#include "gpusched/policy/framework.h"

namespace gpusched::policy {

// Pods evicted together: one pod, or every member of a gang on the node.
struct VictimUnit {
  std::vector<std::string> uids;
};

// Extra condition on a victim set besides fitting (e.g. quota after the
// victims are gone). Receives indices into the units vector.
using PlanAccept = std::function<bool(const std::vector<int>& chosen)>;

// Returns `node` without the pods whose uid is in `uids` (devices, CPU and
// memory released; whole_free recomputed).
NodeInfo WithoutPods(const NodeInfo& node, const std::vector<std::string>& uids);

// Returns `node` with `pod` placed on `devices` (a hypothetical pod: used
// devices, CPU and memory taken, the pod listed with uid "hypothetical").
NodeInfo WithPod(const NodeInfo& node, const PodRequest& pod, DeviceMask devices);

// True if the pod of `ctx` passes every filter on `node` and gets devices.
bool FitsWithDevices(const Framework& fw, const PodContext& ctx, const NodeInfo& node);

// Returns the indices (ascending) of the units to evict so that the pod of
// `ctx` fits on `node` and `accept` (if set) holds; {} if it fits already;
// nullopt if even all units are not enough. Units are taken in the given
// order (most preferred victims first).
std::optional<std::vector<int>> PlanVictims(const Framework& fw, const PodContext& ctx,
                                            const NodeInfo& node,
                                            const std::vector<VictimUnit>& units,
                                            const PlanAccept& accept = nullptr);

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_PREEMPTION_PLANNER_H_
