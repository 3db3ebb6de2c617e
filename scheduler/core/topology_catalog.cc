#include "gpusched/core/topology_catalog.h"

#include "absl/strings/str_join.h"
#include "gpusched/model/snapshot.h"
#include "gpusched/util/strings.h"

namespace gpusched {

TopologyCatalog::TopologyCatalog(std::vector<TopologyTemplate> templates)
    : templates_(std::move(templates)) {}

std::shared_ptr<const GpuTopology> TopologyCatalog::Intern(
    const std::vector<std::vector<std::string>>& codes, std::string* error) {
  std::string key;
  for (const auto& row : codes) StrAppend(&key, absl::StrJoin(row, ","), ";");
  auto it = by_codes_.find(key);
  if (it != by_codes_.end()) return it->second;
  auto topo = GpuTopology::FromCodes(codes);
  if (!topo.ok()) {
    if (error != nullptr) *error = std::string(topo.status().message());
    return nullptr;
  }
  by_codes_.emplace(std::move(key), *topo);
  return *topo;
}

std::shared_ptr<const GpuTopology> TopologyCatalog::ForProduct(const std::string& product,
                                                               int gpus) {
  for (const TopologyTemplate& t : templates_) {
    bool match = false;
    for (const std::string& entry : t.match) match = match || ProductMatches(entry, product);
    if (!match) continue;
    if (!t.uniform.empty()) {
      std::vector<std::vector<std::string>> codes(gpus, std::vector<std::string>(gpus, t.uniform));
      for (int i = 0; i < gpus; ++i) codes[i][i] = "X";
      if (auto topo = Intern(codes, nullptr)) return topo;
      continue;
    }
    if (t.gpus == gpus) {
      if (auto topo = Intern(t.matrix, nullptr)) return topo;
    }
  }
  std::vector<std::vector<std::string>> codes(gpus, std::vector<std::string>(gpus, "SYS"));
  for (int i = 0; i < gpus; ++i) codes[i][i] = "X";
  return Intern(codes, nullptr);
}

std::shared_ptr<const GpuTopology> TopologyCatalog::ForNode(const NodeSpec& spec, int gpus,
                                                            std::string* error) {
  if (error != nullptr) *error = spec.topology_error;
  if (!spec.topology_codes.empty()) {
    if (static_cast<int>(spec.topology_codes.size()) != gpus) {
      if (error != nullptr) {
        *error = StrCat("topology annotation has ", spec.topology_codes.size(),
                        " rows but the node has ", gpus, " GPUs");
      }
    } else if (auto topo = Intern(spec.topology_codes, error)) {
      return topo;
    }
  }
  return ForProduct(spec.product, gpus);
}

}  // namespace gpusched
