// Topology-shaped clusters (see topo_cluster.h).
#include "scheduler/sim/topo_cluster.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gpusched/util/strings.h"

namespace gpusched::sim {
namespace {

// GPU Feature Discovery writes the clique as <NVLink cluster UUID>.<clique
// id>; one made-up cluster UUID for the whole simulated fabric.
constexpr char kFabricUuid[] = "7c2a9e14-58b3-4f0e-9d61-2b8f0c4e7a15";
constexpr int kMaxCount = 100000;

absl::StatusOr<std::vector<int>> Counts(std::string_view spec, std::string_view what) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(ToAbsl(spec), 'x')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1 || v > kMaxCount) {
      return absl::InvalidArgumentError(
          StrCat("--topology ", what, ": '", part, "' is not a count (1..", kMaxCount, ")"));
    }
    out.push_back(v);
  }
  return out;
}

NodeSpec Node(std::string name, int gpus) {
  NodeSpec s;
  s.name = std::move(name);
  s.product = gpus == 4 ? "NVIDIA-GB200" : "NVIDIA-H100-80GB-HBM3";
  s.gpu_memory_mib = gpus == 4 ? 189471 : 81559;
  s.gpu_count = s.gpu_allocatable = gpus;
  s.cpu_milli = int64_t{1} << 40;
  s.memory_mib = int64_t{1} << 40;
  return s;
}

}  // namespace

absl::StatusOr<TopoShape> ParseTopoShape(std::string_view spec) {
  TopoShape shape;
  const size_t colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view rest = colon == std::string_view::npos ? "" : spec.substr(colon + 1);
  if (kind == "racks") {
    auto c = Counts(rest, "racks:BLOCKSxRACKSxNODES");
    if (!c.ok()) return c.status();
    if (c->size() != 3) {
      return absl::InvalidArgumentError(
          StrCat("--topology racks:BLOCKSxRACKSxNODES needs three counts, got '", rest, "'"));
    }
    shape.blocks = (*c)[0];
    shape.racks_per_block = (*c)[1];
    shape.nodes_per_rack = (*c)[2];
    return shape;
  }
  if (kind == "cliques") {
    auto c = Counts(rest, "cliques:CLIQUES[xNODES]");
    if (!c.ok()) return c.status();
    if (c->size() > 2) {
      return absl::InvalidArgumentError(
          StrCat("--topology cliques:CLIQUES[xNODES] takes one or two counts, got '", rest, "'"));
    }
    shape.cliques = true;
    shape.gpus_per_node = 4;
    shape.cliques_count = (*c)[0];
    if (c->size() == 2) shape.nodes_per_clique = (*c)[1];
    return shape;
  }
  return absl::InvalidArgumentError(
      StrCat("--topology: '", spec, "' is neither racks:BxRxN nor cliques:C[xN]"));
}

TopoCluster MakeTopoCluster(const TopoShape& shape) {
  TopoCluster c;
  c.gpus_per_node = shape.gpus_per_node;
  if (shape.cliques) {
    c.levels = {kCliqueLabel, kHostnameLabel};
    c.domain_of.assign(2, {});
    for (int q = 0; q < shape.cliques_count; ++q) {
      for (int n = 0; n < shape.nodes_per_clique; ++n) {
        const int index = static_cast<int>(c.nodes.size());
        std::string name = StrCat("gb200-c", q, "-n", absl::Dec(n, absl::kZeroPad2));
        c.labels.push_back({{kCliqueLabel, StrCat(kFabricUuid, ".", q)}, {kHostnameLabel, name}});
        c.domain_of[0].push_back(q);
        c.domain_of[1].push_back(index);
        c.nodes.push_back(Node(std::move(name), shape.gpus_per_node));
      }
    }
    c.domain_count = {shape.cliques_count, static_cast<int>(c.nodes.size())};
    return c;
  }
  c.levels = {kBlockLabel, kRackLabel, kHostnameLabel};
  c.domain_of.assign(3, {});
  for (int b = 0; b < shape.blocks; ++b) {
    for (int r = 0; r < shape.racks_per_block; ++r) {
      const int rack = b * shape.racks_per_block + r;
      for (int n = 0; n < shape.nodes_per_rack; ++n) {
        const int index = static_cast<int>(c.nodes.size());
        std::string name = StrCat("h100-b", b, "-r", r, "-n", n);
        c.labels.push_back({{kBlockLabel, StrCat("block-", b)},
                            {kRackLabel, StrCat("block-", b, "-rack-", r)},
                            {kHostnameLabel, name}});
        c.domain_of[0].push_back(b);
        c.domain_of[1].push_back(rack);
        c.domain_of[2].push_back(index);
        c.nodes.push_back(Node(std::move(name), shape.gpus_per_node));
      }
    }
  }
  c.domain_count = {shape.blocks, shape.blocks * shape.racks_per_block,
                    static_cast<int>(c.nodes.size())};
  return c;
}

int TopoCluster::Level(std::string_view key) const {
  for (size_t i = 0; i < levels.size(); ++i) {
    if (levels[i] == key) return static_cast<int>(i);
  }
  return -1;
}

int64_t TopoCluster::DomainGpus(int level) const {
  if (level < 0 || domain_count[level] == 0) return 0;
  return Capacity() / domain_count[level];
}

int TopoCluster::DomainsSpanned(int level, const std::vector<int>& node_indices) const {
  std::set<int> seen;
  for (int n : node_indices) seen.insert(domain_of[level][n]);
  return static_cast<int>(seen.size());
}

int TopoCluster::WholeDomains(int level, const std::vector<int>& free) const {
  std::vector<bool> broken(domain_count[level], false);
  for (size_t n = 0; n < free.size(); ++n) {
    if (free[n] < gpus_per_node) broken[domain_of[level][n]] = true;
  }
  return static_cast<int>(std::count(broken.begin(), broken.end(), false));
}

}  // namespace gpusched::sim
