// NodePodClient: the node agent's view of the Kubernetes API (agent::NodeApi)
// over KubeHttpClient: the pods of one node (a field selector on
// spec.nodeName, checked again on each item), annotation merge-patches with
// the pod's uid as precondition, and Events through an EventRecorder.
//
// Thread-safe (KubeHttpClient and EventRecorder are).
#ifndef GPUSCHED_KUBE_NODE_POD_CLIENT_H_
#define GPUSCHED_KUBE_NODE_POD_CLIENT_H_

#include <chrono>
#include <string>
#include <vector>

#include "scheduler/agent/node_api.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/kube_writer.h"

namespace gpusched::kube {

class NodePodClient final : public agent::NodeApi {
 public:
  // `events` may be null (no Events). `timeout` bounds each API call: the
  // device plugin lists pods inside a kubelet call.
  NodePodClient(KubeHttpClient* client, std::string node, EventRecorder* events,
                std::chrono::milliseconds timeout);

  absl::StatusOr<std::vector<codec::NodePodRecord>> ListPods() override;
  absl::Status PatchAnnotations(const codec::NodePodRecord& pod,
                                const agent::AnnotationEdits& edits) override;
  void RecordEvent(const codec::NodePodRecord& pod, const std::string& type,
                   const std::string& reason, const std::string& message) override;

 private:
  KubeHttpClient* client_;
  const std::string node_;
  EventRecorder* events_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_NODE_POD_CLIENT_H_
