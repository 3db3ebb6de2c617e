// Placement: which devices of a node a pod would get. The one device-set
// selector used by scoring, bind and the simulator, so the devices recorded
// at bind are the devices the score was computed for.
//
// Whole-GPU pods: the best set from GpuTopology::Choose (most NVLink inside
// the set, then the most useful free devices left, then lowest indices;
// all-NVLink only for gpusched.io/topology: nvlink-required).
// Shared pods (gpu-milli < 1000): the device with the least free share that
// still fits (already-shared devices first, so whole GPUs stay whole); ties
// to the lowest index.
//
// Pure; thread-safe.
#ifndef GPUSCHED_POLICY_PLACEMENT_H_
#define GPUSCHED_POLICY_PLACEMENT_H_

#include <optional>

#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"
#include "gpusched/model/topology.h"

namespace gpusched::policy {

struct Placement {
  DeviceMask devices = 0;
  DeviceChoice choice;  // quality of the set (whole-GPU pods)
};

// Returns the devices `gpu` would get on `node` now, or nullopt if they are
// not free. Ignores model and memory (filters check those).
std::optional<Placement> ChoosePlacement(const GpuRequest& gpu, const NodeInfo& node);

// Returns the healthy devices whose free share is at least `milli`.
DeviceMask DevicesWithFreeMilli(const NodeInfo& node, int milli);

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_PLACEMENT_H_
