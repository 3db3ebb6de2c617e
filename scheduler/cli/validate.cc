#include <iostream>

#include "gpusched/core/cluster_state.h"
#include "gpusched/policy/framework.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/source/file_source.h"

namespace gpusched::cli {

int Validate(const std::vector<std::string>& args) {
  Flags flags({"config", "cluster"}, {});
  if (auto s = flags.Parse(args); !s.ok()) {
    std::cerr << "gpusched validate: " << s.message() << "\n";
    return 2;
  }
  const std::string path = flags.Get("config", "config/scheduler-policy.json");
  auto config = codec::LoadConfigFile(path);
  if (!config.ok()) {
    std::cerr << "gpusched validate: " << config.status().message() << "\n";
    return 2;
  }
  auto fw = policy::Framework::Create(config->scoring);
  if (!fw.ok()) {
    std::cerr << "gpusched validate: config " << path << ": " << fw.status().message() << "\n";
    return 2;
  }
  std::cout << "config " << path << ": ok (" << config->topology_templates.size()
            << " topology templates, quotas " << (config->quotas.enabled ? "on" : "off") << ", "
            << config->quotas.namespaces.size() << " namespaces)\n";
  if (flags.Has("cluster")) {
    ClusterState state(config->topology_templates);
    FileClusterSource source(flags.Get("cluster"));
    if (auto s = source.Start(&state, nullptr); !s.ok()) {
      std::cerr << "gpusched validate: " << s.message() << "\n";
      return 2;
    }
    auto snap = state.Snapshot();
    std::cout << "cluster " << flags.Get("cluster") << ": ok (" << snap->nodes().size()
              << " nodes, " << snap->TotalGpus() << " healthy GPUs, "
              << snap->AllocatedGpuMilli() / 1000.0 << " allocated)\n";
    for (const auto& [node, err] : state.TopologyErrors()) {
      std::cout << "  warning: node " << node << ": " << err << "\n";
    }
  }
  return 0;
}

}  // namespace gpusched::cli
