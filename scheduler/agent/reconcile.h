// The kubelet's truth: compares the devices the kubelet's PodResources API
// reports for each pod on this node with gpusched's record
// (gpusched.io/gpu-ids) and says which records to correct and which to
// confirm (gpusched.io/gpu-ids-confirmed). Works whoever allocated the
// devices: this agent's device plugin or NVIDIA's (its device IDs are UUIDs,
// indices, or "UUID::n" time-slicing replicas).
//
// Pure functions over values; thread-safe.
#ifndef GPUSCHED_SCHEDULER_AGENT_RECONCILE_H_
#define GPUSCHED_SCHEDULER_AGENT_RECONCILE_H_

#include <string>
#include <vector>

#include "gpusched/model/topology.h"
#include "scheduler/agent/gpu_inventory.h"
#include "scheduler/agent/handshake.h"
#include "scheduler/codec/agent_codec.h"

namespace gpusched::agent {

// One pod of a PodResources List: its device IDs per resource, all
// containers together.
struct KubeletPod {
  std::string ns, name;
  std::vector<std::string> gpu_ids;    // nvidia.com/gpu device IDs
  std::vector<std::string> share_ids;  // gpusched.io/gpu-shares device IDs
};

// A pod's devices as the kubelet assigned them, in device indices.
struct KubeletAssignment {
  std::string ns, name, uid;  // uid "" when the pod is not in the API list
  DeviceMask whole = 0;
  DeviceMask shared = 0;
  std::vector<std::string> unknown_ids;  // IDs that name no device of this node
};

// Resolves each pod's device IDs through `table` and joins the API list by
// namespace/name.
std::vector<KubeletAssignment> ResolveKubeletPods(const std::vector<KubeletPod>& kubelet,
                                                  const DeviceTable& table,
                                                  const std::vector<codec::NodePodRecord>& pods);

// The allocations the kubelet reports, as the plugin's state (pods missing
// from the API list are kept by namespace/name: they still hold devices).
NodeAllocations AllocationsFrom(const std::vector<KubeletAssignment>& assigned);

struct RecordFix {
  std::string ns, name, uid;
  std::string recorded;     // the gpu-ids value before ("" when absent)
  std::string actual;       // the kubelet's devices, "4,5"
  bool correction = false;  // gpu-ids changes (else: only confirmed is written)
};

// For every pod with devices from the kubelet: a correction when its record
// differs from them (absent, malformed or other devices), else a
// confirmation when gpu-ids-confirmed is not yet that set. Pods already
// recorded and confirmed as the kubelet says need nothing.
std::vector<RecordFix> PlanRecordFixes(const std::vector<KubeletAssignment>& assigned,
                                       const std::vector<codec::NodePodRecord>& pods);

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_RECONCILE_H_
