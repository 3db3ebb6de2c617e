#include <iostream>

#include "gpusched/core/cluster_state.h"
#include "gpusched/model/snapshot.h"
#include "gpusched/policy/framework.h"
#include "gpusched/util/strings.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/queue/quota_coverage.h"
#include "scheduler/queue/usage_index.h"
#include "scheduler/source/file_source.h"

namespace gpusched::cli {
namespace {

constexpr char kUsage[] =
    "usage: gpusched validate [--config FILE] [--cluster LIST.json]\n"
    "\n"
    "Checks a policy config (default config/scheduler-policy.json): errors name the\n"
    "JSON field (or line and column for a syntax error) and exit 2. Warnings (exit 0)\n"
    "name quotas under which a namespace can never get GPUs and, with --cluster,\n"
    "GPUs no quota can ever use and guarantees that over-promise the cluster.\n"
    "  --config FILE        the policy config\n"
    "  --cluster LIST.json  also load a `kubectl get nodes,pods -A -o json` List and\n"
    "                       report its nodes, GPUs, topology problems and device\n"
    "                       conflicts (pods claiming the same gpusched.io/gpu-ids)\n";

// Why an amount can never admit a pod, or "" if it can. Idle GPUs are lent
// to every namespace up to its limit (docs/queue.md), so only a limit of 0
// shuts a namespace out.
std::string NeverAdmits(const QuotaAmount& a) { return a.limit == 0 ? "limit 0" : ""; }

// Warnings about quotas under which a namespace never gets a GPU: the whole
// namespace, or a model (and, with a cluster, every model the cluster has).
std::vector<std::string> QuotaWarnings(const QuotaConfig& q, const ClusterSnapshot* snap) {
  std::vector<std::string> out;
  if (!q.enabled) return out;
  auto check = [&](const std::string& field, const std::string& who, const NamespaceQuota& quota) {
    std::string why = NeverAdmits(quota.gpus);
    if (!why.empty()) {
      out.push_back(StrCat(field, ": ", why, ": pods in ", who, " can never get GPUs"));
      return;
    }
    std::vector<std::string> blocked;
    for (const auto& [model, amount] : quota.models) {
      std::string m = NeverAdmits(amount);
      if (m.empty()) continue;
      blocked.push_back(model);
      out.push_back(StrCat(field, ".models.", model, ": ", m, ": pods in ", who, " can never get ",
                           model, " GPUs"));
    }
    if (snap == nullptr || blocked.empty()) return;
    bool any_usable = false;
    for (const auto& node : snap->nodes()) {
      const std::string& product = snap->product(*node);
      bool usable = !product.empty();
      for (const std::string& model : blocked) usable = usable && !ProductMatches(model, product);
      any_usable = any_usable || usable;
    }
    if (!any_usable) {
      out.push_back(StrCat(field, ".models: no GPU model of the cluster is usable: pods in ", who,
                           " can never get GPUs"));
    }
  };
  check("quotas.default", "any namespace not listed in quotas.namespaces (default included)",
        q.default_quota);
  for (const auto& [ns, quota] : q.namespaces) {
    check(StrCat("quotas.namespaces.", ns), StrCat("namespace ", ns), quota);
  }
  if (snap != nullptr) {
    int64_t capacity = 0;
    for (const auto& node : snap->nodes()) capacity += queue::NodeCapacityMilli(*node);
    for (std::string& w : queue::CoverageWarnings(queue::CoverageOf(q, capacity))) {
      out.push_back(StrCat("quotas: ", std::move(w)));
    }
  }
  return out;
}

}  // namespace

int Validate(const std::vector<std::string>& args) {
  Flags flags({"config", "cluster"}, {}, kUsage);
  if (auto exit_code = flags.ParseOrExit("validate", args)) return *exit_code;
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
  std::shared_ptr<const ClusterSnapshot> snap;
  if (flags.Has("cluster")) {
    ClusterState state(config->topology_templates);
    FileClusterSource source(flags.Get("cluster"));
    if (auto s = source.Start(&state, nullptr); !s.ok()) {
      std::cerr << "gpusched validate: " << s.message() << "\n";
      return 2;
    }
    snap = state.Snapshot();
    const auto conflicts = state.DeviceConflicts();
    std::cout << "cluster " << flags.Get("cluster") << ": "
              << (conflicts.empty()
                      ? "ok"
                      : StrCat(conflicts.size(),
                               conflicts.size() == 1 ? " device conflict" : " device conflicts"))
              << " (" << snap->nodes().size() << " nodes, " << snap->TotalGpus()
              << " healthy GPUs, " << snap->AllocatedGpuMilli() / 1000.0 << " allocated)\n";
    for (const auto& [node, err] : state.TopologyErrors()) {
      std::cout << "  warning: node " << node << ": " << err << "\n";
    }
    // Conflicting gpusched.io/gpu-ids claims: every claim is counted (the
    // devices are held), but the cluster's annotations disagree.
    for (const auto& [node, what] : conflicts) {
      std::cout << "  warning: node " << node << ": device conflict: " << what << "\n";
    }
  }
  for (const std::string& w : QuotaWarnings(config->quotas, snap.get())) {
    std::cout << "WARNING: " << w << "\n";
  }
  return 0;
}

}  // namespace gpusched::cli
