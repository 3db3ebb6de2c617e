#include "scheduler/queue/pod_devices.h"

namespace gpusched::queue {

void AddPodDevices(const ClusterState& state, PodReport* report) {
  if (report->state != "bound") return;
  auto pod = state.FindPodByName(report->ns, report->name);
  if (!pod.has_value() || pod->uid != report->uid || !pod->HoldsGpus() || pod->gpu.count == 0) {
    return;
  }
  report->shows_devices = true;
  if (pod->has_gpu_ids) report->recorded_devices = pod->gpu_ids;
  if (pod->has_gpu_ids_confirmed) report->confirmed_devices = pod->gpu_ids_confirmed;
  const NodeInfo* node = state.Snapshot()->Find(pod->node_name);
  if (node == nullptr) return;
  for (const PodOnNode& p : node->pods) {
    if (p.uid == pod->uid) report->counted_devices = p.devices;
  }
}

std::optional<PodReport> ExplainPodWithDevices(QueueManager& queue, const ClusterState& state,
                                               const std::string& ns, const std::string& name) {
  std::optional<PodReport> report = queue.ExplainPod(ns, name);
  if (report.has_value()) AddPodDevices(state, &*report);
  return report;
}

}  // namespace gpusched::queue
