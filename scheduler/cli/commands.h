// The gpusched subcommands. Each takes the arguments after its name and
// returns the process exit code (0 ok, 1 runtime failure, 2 usage/config).
#ifndef GPUSCHED_CLI_COMMANDS_H_
#define GPUSCHED_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace gpusched::cli {

int Serve(const std::vector<std::string>& args);
// serve's flags, one per line (for `gpusched serve --help`).
std::string ServeUsage();
int Validate(const std::vector<std::string>& args);
int Simulate(const std::vector<std::string>& args);
int TopologyAgent(const std::vector<std::string>& args);
// gpusched node-agent: device plugin, PodResources reconciliation, topology.
int NodeAgent(const std::vector<std::string>& args);
// gpusched queue (also `kubectl gpusched queue`): pending pods in queue order.
int Queue(const std::vector<std::string>& args);
// gpusched quota export: a policy file's quotas as GPUQuota manifests.
int Quota(const std::vector<std::string>& args);

}  // namespace gpusched::cli

#endif  // GPUSCHED_CLI_COMMANDS_H_
