// The kubelet's PodResources API v1 (pod-resources/kubelet.sock): List, turned
// into plain values for the reconciliation (reconcile.h).
//
// Thread-safe (a channel per call; the kubelet may restart between calls).
#ifndef GPUSCHED_SCHEDULER_AGENT_POD_RESOURCES_CLIENT_H_
#define GPUSCHED_SCHEDULER_AGENT_POD_RESOURCES_CLIENT_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/agent/reconcile.h"

namespace gpusched::agent {

// Lists every pod's devices of nvidia.com/gpu and gpusched.io/gpu-shares.
// Unavailable (naming the socket) when the kubelet does not answer within
// `timeout`.
absl::StatusOr<std::vector<KubeletPod>> ListPodResources(const std::string& socket,
                                                         std::chrono::milliseconds timeout);

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_POD_RESOURCES_CLIENT_H_
