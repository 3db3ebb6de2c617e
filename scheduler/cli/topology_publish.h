// The topology job shared by `gpusched topology-agent` and `gpusched
// node-agent` (implemented in topology_agent.cc). Thread-compatible.
#ifndef GPUSCHED_CLI_TOPOLOGY_PUBLISH_H_
#define GPUSCHED_CLI_TOPOLOGY_PUBLISH_H_

#include <string>

#include "absl/status/status.h"
#include "scheduler/kube/http_client.h"

namespace gpusched::cli {

// One round: `nvidia-smi topo -m` (or the file `input`), parsed, merge-patched
// as the Node's gpusched.io/gpu-topology annotation. Returns an error to log.
absl::Status PublishTopologyOnce(kube::KubeHttpClient& client, const std::string& node,
                                 const std::string& input, const std::string& smi);

}  // namespace gpusched::cli

#endif  // GPUSCHED_CLI_TOPOLOGY_PUBLISH_H_
