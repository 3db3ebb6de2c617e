// NodeApi: what the node agent needs from the Kubernetes API, and nothing
// more: the pods bound to its node, annotation patches on them, and Events.
// scheduler/kube implements it over the API server (NodePodClient); tests and
// benchmarks may implement it in memory.
//
// Implementations must be thread-safe: the device plugin's gRPC threads and
// the reconciliation loop call them concurrently.
#ifndef GPUSCHED_SCHEDULER_AGENT_NODE_API_H_
#define GPUSCHED_SCHEDULER_AGENT_NODE_API_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/codec/agent_codec.h"

namespace gpusched::agent {

using AnnotationEdits = std::vector<std::pair<std::string, std::optional<std::string>>>;

class NodeApi {
 public:
  virtual ~NodeApi() = default;
  // The pods bound to this node (any phase). Items that cannot be read are
  // left out and logged by the implementation.
  virtual absl::StatusOr<std::vector<codec::NodePodRecord>> ListPods() = 0;
  // Sets (value) or removes (nullopt) annotations of one pod; the uid is a
  // precondition (a pod recreated under the same name is not patched).
  virtual absl::Status PatchAnnotations(const codec::NodePodRecord& pod,
                                        const AnnotationEdits& edits) = 0;
  // Posts an Event on the pod; never blocks on the network.
  virtual void RecordEvent(const codec::NodePodRecord& pod, const std::string& type,
                           const std::string& reason, const std::string& message) = 0;
};

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_NODE_API_H_
