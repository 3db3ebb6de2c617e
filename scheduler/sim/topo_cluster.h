// Topology-shaped clusters for the simulator's topology comparison: blocks
// of racks of 8-GPU nodes, or NVL72-style NVLink cliques of 18 nodes x 4
// GPUs, each node labelled as a cloud provider or GPU Feature Discovery
// labels it (cloud.provider.com/topology-block, cloud.provider.com/
// topology-rack, nvidia.com/gpu.clique, kubernetes.io/hostname). The
// cluster also keeps, per level, which domain each node belongs to, so the
// simulator can count the domains a gang spans and the domains left whole.
//
// Callers: scheduler/sim (topology comparison), tests. Pure functions;
// thread-safe.
#ifndef GPUSCHED_SIM_TOPO_CLUSTER_H_
#define GPUSCHED_SIM_TOPO_CLUSTER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/model/node.h"

namespace gpusched::sim {

inline constexpr char kBlockLabel[] = "cloud.provider.com/topology-block";
inline constexpr char kRackLabel[] = "cloud.provider.com/topology-rack";
inline constexpr char kCliqueLabel[] = "nvidia.com/gpu.clique";
inline constexpr char kHostnameLabel[] = "kubernetes.io/hostname";

// "racks:BxRxN" = B blocks of R racks of N nodes of 8 GPUs;
// "cliques:C" = C cliques of 18 nodes of 4 GPUs ("cliques:CxN" sets N).
struct TopoShape {
  bool cliques = false;
  int blocks = 2, racks_per_block = 4, nodes_per_rack = 4;  // racks
  int cliques_count = 4, nodes_per_clique = 18;             // cliques
  int gpus_per_node = 8;
};

absl::StatusOr<TopoShape> ParseTopoShape(std::string_view spec);

struct TopoCluster {
  std::vector<NodeSpec> nodes;
  // Label keys from the largest domain to the node (the policy file's
  // topology levels for this cluster).
  std::vector<std::string> levels;
  // Per node: (label key, value) for every level.
  std::vector<std::vector<std::pair<std::string, std::string>>> labels;
  // domain_of[level][node]: index of the node's domain at that level.
  std::vector<std::vector<int>> domain_of;
  std::vector<int> domain_count;  // per level
  int gpus_per_node = 8;

  int Level(std::string_view key) const;  // -1 if not a level
  int64_t Capacity() const { return int64_t{gpus_per_node} * static_cast<int64_t>(nodes.size()); }
  // GPUs of one domain at `level` (domains of a level are equal here).
  int64_t DomainGpus(int level) const;
  // Number of distinct domains at `level` among `node_indices`.
  int DomainsSpanned(int level, const std::vector<int>& node_indices) const;
  // Domains at `level` whose nodes are all completely free (free[n] ==
  // gpus_per_node for each of its nodes).
  int WholeDomains(int level, const std::vector<int>& free) const;
};

TopoCluster MakeTopoCluster(const TopoShape& shape);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_TOPO_CLUSTER_H_
