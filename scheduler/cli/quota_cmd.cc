// gpusched quota export: prints the GPUQuota objects equivalent to a policy
// file's quotas.namespaces, one YAML document per namespace, for
// `kubectl apply -f -`: the step from quotas in the ConfigMap to quotas as
// objects (docs/queue.md, "Quotas as objects").
#include <iostream>

#include "gpusched/util/strings.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/quota_object_codec.h"

namespace gpusched::cli {
namespace {

constexpr char kUsage[] =
    "usage: gpusched quota export [--config FILE] [--name NAME]\n"
    "\n"
    "Prints one GPUQuota (gpusched.io/v1alpha1) per entry of the policy file's\n"
    "quotas.namespaces, as YAML documents for `kubectl apply -f -`. The file's\n"
    "quotas.default and reclaim settings stay in the file (they are cluster-wide).\n"
    "  --config FILE   policy file (default config/scheduler-policy.json)\n"
    "  --name NAME     the objects' name in each namespace (default gpu-quota)\n";

}  // namespace

int Quota(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "export") {
    if (WantsHelp(args)) {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << "gpusched quota: want a subcommand: export\n" << kUsage;
    return 2;
  }
  Flags flags({"config", "name"}, {}, kUsage);
  if (auto exit = flags.ParseOrExit("quota export", {args.begin() + 1, args.end()})) return *exit;
  const std::string path = flags.Get("config", "config/scheduler-policy.json");
  auto config = codec::LoadConfigFile(path);
  if (!config.ok()) {
    std::cerr << "gpusched quota export: " << config.status().message() << "\n";
    return 2;
  }
  if (!config->quotas.enabled || config->quotas.namespaces.empty()) {
    std::cerr << "gpusched quota export: " << path << " has no quotas.namespaces entries\n";
    return 1;
  }
  const std::string name = flags.Get("name", "gpu-quota");
  std::cout << "# GPUQuota objects equivalent to quotas.namespaces of " << path << "\n"
            << codec::EncodeQuotaExport(config->quotas, name);
  return 0;
}

}  // namespace gpusched::cli
