// ClusterSource: where ClusterState's nodes and pods come from. A source
// feeds the state (Reset on a full list, Upsert/Remove on changes) and says
// when it has synced; filter answers with an Error until then.
//
// Implementations: FileClusterSource (a `kubectl get nodes,pods -A -o json`
// List, for --cluster), the Kubernetes list+watch source (scheduler/kube).
// Each implementation documents its own threading.
#ifndef GPUSCHED_CORE_CLUSTER_SOURCE_H_
#define GPUSCHED_CORE_CLUSTER_SOURCE_H_

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpusched/core/cluster_state.h"

namespace gpusched {

// Applies changes that gpusched itself decided (evictions of preemption or
// reclaim victims). The file source applies them to the in-memory state and
// logs them; the Kubernetes source calls the Eviction API.
class ClusterWriter {
 public:
  virtual ~ClusterWriter() = default;
  virtual absl::Status Evict(const PodRequest& pod, const std::string& reason) = 0;
  // Several evictions handed over together, in order; failures are reported
  // by the writer as for Evict. By default one Evict each; a writer that
  // applies them to a ClusterState itself may do so in one commit.
  virtual void EvictAll(const std::vector<std::pair<PodRequest, std::string>>& pods) {
    for (const auto& [pod, reason] : pods) (void)Evict(pod, reason);
  }
  // Waits until every eviction handed over so far has been sent (and, for a
  // writer that applies them to a ClusterState itself, committed), at most
  // `within`; true if nothing is left in flight. A writer that sends as it
  // is called has nothing in flight.
  virtual bool AwaitSent(std::chrono::milliseconds within) {
    (void)within;
    return true;
  }
};

class ClusterSource {
 public:
  virtual ~ClusterSource() = default;
  // Starts feeding `state`; `on_synced(true)` once the first full view is in,
  // `on_synced(false)` while a relist makes the view stale.
  virtual absl::Status Start(ClusterState* state, std::function<void(bool)> on_synced) = 0;
  virtual void Stop() = 0;
};

}  // namespace gpusched

#endif  // GPUSCHED_CORE_CLUSTER_SOURCE_H_
