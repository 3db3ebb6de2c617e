// What GET /debug/pods/<ns>/<name> answers: the queue manager's account of
// the pod (QueueManager::ExplainPod) and, for a bound GPU pod, its devices
// as gpusched recorded them, as the node agent confirmed them from the
// kubelet, and as gpusched's accounting counts them (PodReport). Called by
// the serve command's debug route and tests; thread-safe as QueueManager
// and ClusterState are.
#ifndef GPUSCHED_QUEUE_POD_DEVICES_H_
#define GPUSCHED_QUEUE_POD_DEVICES_H_

#include <optional>
#include <string>

#include "gpusched/core/cluster_state.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/queue_report.h"

namespace gpusched::queue {

// Fills report->shows_devices and the device fields from `state` when the
// report is of a bound pod (state "bound", same uid) that holds GPUs.
void AddPodDevices(const ClusterState& state, PodReport* report);

// ExplainPod, then AddPodDevices; nullopt for a pod gpusched does not know.
std::optional<PodReport> ExplainPodWithDevices(QueueManager& queue, const ClusterState& state,
                                               const std::string& ns, const std::string& name);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_POD_DEVICES_H_
