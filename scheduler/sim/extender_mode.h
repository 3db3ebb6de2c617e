// End-to-end mode: the fgd protocol with placement decided by a running
// `gpusched serve` (filter, prioritize, bind over HTTP) instead of the
// in-process Framework. The simulator still plays kube-scheduler: it filters
// CPU and memory (NodeResourcesFit), sends the survivors to the extender,
// picks the best prioritized node (ties by the same per-run node priority)
// and binds there; the server chooses the devices (ChoosePlacement).
//
// The transport is injected (scheduler/http/client.h supplies one) so this
// library needs no HTTP stack. Callers: the driver, tests. Not thread-safe.
#ifndef GPUSCHED_SIM_EXTENDER_MODE_H_
#define GPUSCHED_SIM_EXTENDER_MODE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"

namespace gpusched::sim {

class SimCluster;
struct FgdOptions;
struct FgdResult;

// POSTs `body` (JSON) to `path` (e.g. "/filter") under the extender URL;
// returns the response body.
using ExtenderTransport =
    std::function<absl::StatusOr<std::string>(const std::string& path, const std::string& body)>;

// A Kubernetes List JSON of `nodes` and `pods` (what `serve --cluster`
// reads).
std::string ClusterListJson(const std::vector<NodeSpec>& nodes,
                            const std::vector<PodRequest>& pods = {});

// The GPU pods an --extender run of `trace` will send, as the API server
// holds them before kube-scheduler filters them (pending, with the unique
// name and UID of their arrival). The server's cluster source must show
// them: it never takes a pod from a filter request. Deterministic in the
// trace, the cluster's GPU count, options.seed and options.tune.
std::vector<PodRequest> ExtenderWorkload(const SimCluster& cluster,
                                         const std::vector<PodRequest>& trace,
                                         const FgdOptions& options);

absl::StatusOr<FgdResult> RunFgdViaExtender(const SimCluster& cluster,
                                            const std::vector<PodRequest>& trace,
                                            const SchedulerConfig& config,
                                            const FgdOptions& options,
                                            const ExtenderTransport& transport);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_EXTENDER_MODE_H_
