// ClusterSnapshot: an immutable view of every node's GPUs at one generation.
// Request handlers and the simulator take one snapshot per decision and run
// pure policies over it without locks, as kube-scheduler does per cycle.
//
// Built only by ClusterState (scheduler/core). Nodes are shared between
// consecutive snapshots (copy-on-write per node), so publishing after one
// pod change costs a vector of pointers, not a copy of the cluster.
// Immutable; thread-safe.
#ifndef GPUSCHED_MODEL_SNAPSHOT_H_
#define GPUSCHED_MODEL_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/model/node.h"
#include "gpusched/util/strings.h"

namespace gpusched {

class ClusterSnapshot {
 public:
  using NodeIndex = absl::flat_hash_map<std::string, int32_t>;

  ClusterSnapshot(uint64_t generation, std::vector<std::shared_ptr<const NodeInfo>> nodes,
                  std::shared_ptr<const NodeIndex> index,
                  std::shared_ptr<const std::vector<std::string>> products)
      : generation_(generation),
        nodes_(std::move(nodes)),
        index_(std::move(index)),
        products_(std::move(products)) {}

  uint64_t generation() const { return generation_; }
  const std::vector<std::shared_ptr<const NodeInfo>>& nodes() const { return nodes_; }
  // Returns the node or nullptr.
  const NodeInfo* Find(std::string_view name) const {
    auto it = index_->find(ToAbsl(name));
    return it == index_->end() ? nullptr : nodes_[it->second].get();
  }
  const std::vector<std::string>& products() const { return *products_; }
  const std::string& product(const NodeInfo& n) const { return (*products_)[n.product_id]; }

  int64_t TotalGpus() const;
  int64_t AllocatedGpuMilli() const;

 private:
  uint64_t generation_;
  std::vector<std::shared_ptr<const NodeInfo>> nodes_;
  std::shared_ptr<const NodeIndex> index_;
  std::shared_ptr<const std::vector<std::string>> products_;
};

// True if `entry` (e.g. "A100") matches `product` (e.g.
// "NVIDIA-A100-SXM4-80GB"): its dash-separated tokens appear contiguously
// among the product's tokens, case-insensitively.
bool ProductMatches(std::string_view entry, std::string_view product);

}  // namespace gpusched

#endif  // GPUSCHED_MODEL_SNAPSHOT_H_
