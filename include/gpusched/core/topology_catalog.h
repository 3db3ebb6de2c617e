// TopologyCatalog: decides the interconnect of a node: its own
// gpusched.io/gpu-topology annotation when valid, else the first configured
// template whose product entry matches, else "no NVLink" (every pair SYS).
// Identical matrices share one GpuTopology (and its precomputed tables).
//
// Not thread-safe; owned by ClusterState under its lock, or by one simulator.
#ifndef GPUSCHED_CORE_TOPOLOGY_CATALOG_H_
#define GPUSCHED_CORE_TOPOLOGY_CATALOG_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/core/config.h"
#include "gpusched/model/node.h"
#include "gpusched/model/topology.h"

namespace gpusched {

class TopologyCatalog {
 public:
  explicit TopologyCatalog(std::vector<TopologyTemplate> templates = {});

  // Returns the topology for a node with `gpus` devices. `error` receives why
  // an annotation was rejected ("" if none was rejected).
  std::shared_ptr<const GpuTopology> ForNode(const NodeSpec& spec, int gpus, std::string* error);

  // Returns the template topology for `product` with `gpus` devices.
  std::shared_ptr<const GpuTopology> ForProduct(const std::string& product, int gpus);

 private:
  std::shared_ptr<const GpuTopology> Intern(const std::vector<std::vector<std::string>>& codes,
                                            std::string* error);

  std::vector<TopologyTemplate> templates_;
  absl::flat_hash_map<std::string, std::shared_ptr<const GpuTopology>> by_codes_;
};

}  // namespace gpusched

#endif  // GPUSCHED_CORE_TOPOLOGY_CATALOG_H_
