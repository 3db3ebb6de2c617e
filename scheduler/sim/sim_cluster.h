// SimCluster: the simulator's mutable cluster: one NodeInfo per node that the
// simulator updates in place as pods are placed and released, plus a
// ClusterSnapshot over the same NodeInfo objects so the shared policy code
// (Framework, ChoosePlacement) runs on it unchanged. A per-node version
// counter lets callers cache per-node policy answers.
//
// Plays kube-scheduler's NodeResourcesFit (CPU and memory) for the simulator.
// Callers: scheduler/sim only. Not thread-safe; one per simulation run
// (Clone() for another run).
#ifndef GPUSCHED_SIM_SIM_CLUSTER_H_
#define GPUSCHED_SIM_SIM_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"
#include "gpusched/model/snapshot.h"

namespace gpusched::sim {

class SimCluster {
 public:
  // Builds the cluster; topologies come from `templates` (as in serve), else
  // "no NVLink".
  static absl::StatusOr<SimCluster> Create(const std::vector<NodeSpec>& specs,
                                           const std::vector<TopologyTemplate>& templates);
  SimCluster Clone() const;

  int size() const { return static_cast<int>(nodes_.size()); }
  const NodeInfo& node(int i) const { return *nodes_[i]; }
  const ClusterSnapshot& snapshot() const { return *snapshot_; }
  const std::vector<NodeSpec>& specs() const { return *specs_; }
  uint32_t version(int i) const { return versions_[i]; }
  int64_t total_gpus() const { return total_gpus_; }
  int64_t allocated_milli() const { return allocated_milli_; }

  // kube-scheduler's NodeResourcesFit: CPU and memory requests fit.
  bool ResourcesFit(int i, const PodRequest& pod) const {
    const NodeInfo& n = *nodes_[i];
    return !n.unschedulable && n.cpu_used_milli + pod.cpu_milli <= n.cpu_milli &&
           n.memory_used_mib + pod.memory_mib <= n.memory_mib;
  }
  // Binds `pod` to node `i` on `devices`. REQUIRES: the devices have room.
  void Place(int i, const PodRequest& pod, DeviceMask devices);
  // Undoes Place (same arguments).
  void Release(int i, const PodRequest& pod, DeviceMask devices);

 private:
  SimCluster() = default;
  void BuildSnapshot();

  std::shared_ptr<const std::vector<NodeSpec>> specs_;
  std::vector<std::shared_ptr<NodeInfo>> nodes_;
  std::shared_ptr<const ClusterSnapshot::NodeIndex> index_;
  std::shared_ptr<const std::vector<std::string>> products_;
  std::shared_ptr<ClusterSnapshot> snapshot_;
  std::vector<uint32_t> versions_;
  int64_t total_gpus_ = 0;
  int64_t allocated_milli_ = 0;
};

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_SIM_CLUSTER_H_
