// NodeInfo: one node's GPUs as the scheduler sees them at one moment: the
// product, memory per device, which devices are healthy, which are free (and
// how much of each shared device is used), the interconnect, and the pods
// holding devices. Built by ClusterState from a NodeSpec plus the pods bound
// to it; immutable once published in a ClusterSnapshot. Thread-compatible.
#ifndef GPUSCHED_MODEL_NODE_H_
#define GPUSCHED_MODEL_NODE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/model/pod.h"
#include "gpusched/model/topology.h"

namespace gpusched {

// A node's labels that name where it is (topology domains, docs/queue.md
// "Topology-aware gangs"), sorted by key. The decoder keeps every label but
// the hardware descriptions of Node Feature Discovery
// (feature.node.kubernetes.io/*) and GPU Feature Discovery (nvidia.com/*
// other than nvidia.com/gpu.clique). Shared, never copied, between a node's
// versions.
using NodeLabels = std::vector<std::pair<std::string, std::string>>;

// The value of label `key`, or nullptr if the node has no such label.
const std::string* FindLabel(const NodeLabels* labels, std::string_view key);

// The facts about a node that come from its v1.Node object (labels,
// annotations, allocatable), already decoded. Produced by the codec.
struct NodeSpec {
  std::string name;
  std::string product;         // nvidia.com/gpu.product ("" if none)
  int64_t gpu_memory_mib = 0;  // nvidia.com/gpu.memory
  int32_t gpu_count = 0;       // nvidia.com/gpu.count, else capacity
  int32_t gpu_allocatable = 0;
  // status.capacity has gpusched.io/gpu-shares: the node agent's device
  // plugin serves nvidia.com/gpu, and leaves a GPU that holds shared pods out
  // of its allocatable (that GPU is in service, not unhealthy).
  bool gpu_shares_offered = false;
  int64_t cpu_milli = 0;   // allocatable
  int64_t memory_mib = 0;  // allocatable
  bool unschedulable = false;
  // gpusched.io/gpu-topology decoded, or empty (template or none applies).
  std::vector<std::vector<std::string>> topology_codes;
  std::string topology_error;                // why an annotation present was rejected
  std::shared_ptr<const NodeLabels> labels;  // null: none kept
};

// A pod holding devices on a node (enough to plan preemption and account).
struct PodOnNode {
  std::string uid;
  std::string ns;
  std::string name;
  int32_t priority = 0;
  int64_t start_unix = 0;
  int32_t gpus = 0;
  int32_t milli_per_gpu = 1000;
  DeviceMask devices = 0;  // the devices it holds (assigned if unknown)
  bool devices_known = true;
  std::string gang;
  std::string model_product;  // product of the node (for per-model quota)
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  bool reservation = false;  // a gang reservation holder (PodRequest::reservation)
  std::string workload;      // PodRequest::WorkloadKey()
};

struct NodeInfo {
  std::string name;
  uint16_t product_id = 0;  // index into ClusterSnapshot::products()
  int64_t gpu_memory_mib = 0;
  int32_t gpu_count = 0;             // physical devices
  DeviceMask healthy = 0;            // devices that may be offered
  DeviceMask whole_free = 0;         // healthy devices with nothing on them
  std::vector<uint16_t> used_milli;  // per device
  std::shared_ptr<const GpuTopology> topology;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t cpu_used_milli = 0;
  int64_t memory_used_mib = 0;
  bool unschedulable = false;
  int32_t device_conflicts = 0;  // claims that could not all be honoured
  bool partial_share = false;    // some device is partly used by shared pods
  std::vector<PodOnNode> pods;
  std::shared_ptr<const NodeLabels> labels;  // NodeSpec::labels

  int healthy_count() const { return PopCount(healthy); }
  int free_count() const { return PopCount(whole_free); }
  // Bytes this entry holds on the heap and inline (for the cache-size metric).
  size_t MemoryBytes() const;
};

}  // namespace gpusched

#endif  // GPUSCHED_MODEL_NODE_H_
