#include "scheduler/sim/sim_cluster.h"

#include <bit>

#include "gpusched/core/cluster_state.h"
#include "gpusched/core/topology_catalog.h"
#include "gpusched/util/strings.h"

namespace gpusched::sim {

absl::StatusOr<SimCluster> SimCluster::Create(const std::vector<NodeSpec>& specs,
                                              const std::vector<TopologyTemplate>& templates) {
  SimCluster c;
  TopologyCatalog catalog(templates);
  auto products = std::make_shared<std::vector<std::string>>();
  std::vector<std::string> names;
  names.reserve(specs.size());
  for (const NodeSpec& spec : specs) names.push_back(spec.name);
  auto index = std::make_shared<const ClusterSnapshot::NodeIndex>(names);
  for (size_t k = 0; k < specs.size(); ++k) {
    const NodeSpec& spec = specs[k];
    if (index->Find(spec.name) != static_cast<int32_t>(k)) {
      return absl::InvalidArgumentError(StrCat("duplicate node name ", spec.name));
    }
    uint16_t pid = 0;
    for (; pid < products->size(); ++pid) {
      if ((*products)[pid] == spec.product) break;
    }
    if (pid == products->size()) products->push_back(spec.product);
    const int gpus = spec.gpu_count;
    std::string error;
    auto topo = gpus > 0 ? catalog.ForNode(spec, gpus, &error) : nullptr;
    auto info = std::make_shared<NodeInfo>(BuildNodeInfo(spec, topo, {}, pid));
    c.total_gpus_ += info->healthy_count();
    c.nodes_.push_back(std::move(info));
  }
  c.specs_ = std::make_shared<const std::vector<NodeSpec>>(specs);
  c.index_ = std::move(index);
  c.products_ = std::move(products);
  c.versions_.assign(c.nodes_.size(), 1);
  c.BuildSnapshot();
  return c;
}

SimCluster SimCluster::Clone() const {
  SimCluster c;
  c.specs_ = specs_;
  c.index_ = index_;
  c.products_ = products_;
  for (const auto& n : nodes_) c.nodes_.push_back(std::make_shared<NodeInfo>(*n));
  c.versions_ = versions_;
  c.total_gpus_ = total_gpus_;
  c.allocated_milli_ = allocated_milli_;
  c.BuildSnapshot();
  return c;
}

void SimCluster::BuildSnapshot() {
  // The snapshot aliases the mutable nodes: the simulator is single-threaded
  // and reads it only between its own updates.
  std::vector<std::shared_ptr<const NodeInfo>> view(nodes_.begin(), nodes_.end());
  snapshot_ = std::make_shared<ClusterSnapshot>(1, std::move(view), index_, products_);
}

void SimCluster::Place(int i, const PodRequest& pod, DeviceMask devices) {
  NodeInfo& n = *nodes_[i];
  n.cpu_used_milli += pod.cpu_milli;
  n.memory_used_mib += pod.memory_mib;
  if (pod.gpu.count > 0) {
    const int milli = pod.gpu.shared() ? pod.gpu.milli_per_gpu : 1000;
    for (DeviceMask m = devices; m != 0; m &= m - 1) {
      const int d = std::countr_zero(m);
      n.used_milli[d] = static_cast<uint16_t>(n.used_milli[d] + milli);
      n.whole_free &= ~(DeviceMask{1} << d);
      allocated_milli_ += milli;
    }
    PodOnNode p;
    p.uid = pod.uid;
    p.gpus = pod.gpu.count;
    p.milli_per_gpu = pod.gpu.milli_per_gpu;
    p.devices = devices;
    p.cpu_milli = pod.cpu_milli;
    p.memory_mib = pod.memory_mib;
    n.pods.push_back(std::move(p));
  }
  ++versions_[i];
}

void SimCluster::Release(int i, const PodRequest& pod, DeviceMask devices) {
  NodeInfo& n = *nodes_[i];
  n.cpu_used_milli -= pod.cpu_milli;
  n.memory_used_mib -= pod.memory_mib;
  if (pod.gpu.count > 0) {
    const int milli = pod.gpu.shared() ? pod.gpu.milli_per_gpu : 1000;
    for (DeviceMask m = devices; m != 0; m &= m - 1) {
      const int d = std::countr_zero(m);
      n.used_milli[d] = static_cast<uint16_t>(n.used_milli[d] - milli);
      if (n.used_milli[d] == 0) n.whole_free |= DeviceMask{1} << d;
      allocated_milli_ -= milli;
    }
    for (size_t k = 0; k < n.pods.size(); ++k) {
      if (n.pods[k].uid == pod.uid && n.pods[k].devices == devices) {
        n.pods[k] = std::move(n.pods.back());
        n.pods.pop_back();
        break;
      }
    }
  }
  ++versions_[i];
}

}  // namespace gpusched::sim
