// The queue manager's invariants, checked after each fault of the kube tests
// (read-only: ClusterState snapshots and QueueManager::Report, or, for a
// gpusched process, the API server's pods and its GET /debug/queues):
//
//  - no device twice: on every node the shares held on a device sum to at
//    most one GPU, and no pod is bound to a device index the node lacks;
//  - no quota overrun: with quotas on, no namespace holds more GPUs than its
//    limit or than one of its per-model limits, and the queue's usage of each
//    namespace (and of each of its models, where the nodes' products are
//    known) equals the GPUs its pods hold (the queue counts exactly what is
//    held);
//  - no leaked reservation: the gang placeholders holding devices are
//    exactly the queue's live reservations, none is past its deadline; every
//    pod still queued is pending (holds nothing); and, when the caller can
//    tell, every pod holding devices is bound in the API server (no
//    assumption of a failed bind is left behind).
//
// Each check returns "" or the violations, one per line. Not thread-safe;
// call from the test's thread.
#ifndef GPUSCHED_TEST_KUBE_QUEUE_INVARIANTS_H_
#define GPUSCHED_TEST_KUBE_QUEUE_INVARIANTS_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpusched/core/cluster_state.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/queue_report.h"

namespace gpusched::testing {

// Devices one pod (or gang placeholder) holds on one node.
struct Holding {
  std::string uid;
  std::string ns;
  std::string node;
  std::string product;    // the node's GPU product; "" if the caller cannot tell
  int32_t node_gpus = 0;  // devices the node has
  int32_t gpus = 0;
  int32_t milli_per_gpu = 1000;
  DeviceMask devices = 0;
  bool devices_known = true;
  bool reservation = false;  // a gang reservation holder
};

// The invariants over plain values: `holdings` against the queue's `report`
// (taken on the same cluster state) and its live reservation placeholders.
std::string CheckQueueInvariants(const std::vector<Holding>& holdings,
                                 const queue::QueueReport& report,
                                 const std::vector<std::string>& reservation_uids);

// In-process: `state` and the QueueManager installed as its gate.
// `bound_in_api` (optional) says whether a pod holding devices (not a
// placeholder) is bound in the API server.
std::string CheckQueueInvariants(
    const ClusterState& state, queue::QueueManager& queue,
    const std::function<bool(const PodRequest&)>& bound_in_api = nullptr);

// A gpusched process: the API server's pods (their spec.nodeName and
// gpusched.io/gpu-ids) and the process's GET /debug/queues body. `node_gpus`
// gives each node's device count.
std::string CheckQueueInvariants(const std::vector<nlohmann::json>& api_pods,
                                 const std::function<int32_t(const std::string&)>& node_gpus,
                                 const std::string& debug_queues_body);

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_KUBE_QUEUE_INVARIANTS_H_
