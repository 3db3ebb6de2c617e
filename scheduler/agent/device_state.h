// DeviceState: the node agent's device plugin without its transport. It holds
// the device table (from nvidia-smi), the node's topology, and what is
// allocated on the node (the kubelet's PodResources, plus the Allocates
// answered since), and answers the kubelet's questions for both resources:
//
//  - nvidia.com/gpu: one device ID per GPU, its UUID;
//  - gpusched.io/gpu-shares: `shares_per_gpu` IDs per GPU ("UUID::0" ...),
//    for pods that ask for part of a GPU (gpusched.io/gpu-milli).
//
// A GPU that holds shared pods is advertised unhealthy as a whole GPU, and a
// GPU allocated whole has its shares advertised unhealthy, so the kubelet
// itself never gives one device to a whole-GPU pod and a shared pod.
//
// Which devices a container gets is the handshake (handshake.h). Allocate
// always answers the devices the kubelet allocated.
//
// Thread-safe: the gRPC threads, the inventory loop and the reconciliation
// loop call it concurrently. Calls to the NodeApi happen outside its mutex.
#ifndef GPUSCHED_SCHEDULER_AGENT_DEVICE_STATE_H_
#define GPUSCHED_SCHEDULER_AGENT_DEVICE_STATE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/model/topology.h"
#include "gpusched/util/metrics.h"
#include "scheduler/agent/gpu_inventory.h"
#include "scheduler/agent/handshake.h"
#include "scheduler/agent/node_api.h"

namespace gpusched::agent {

inline constexpr char kResourceNameGpu[] = "nvidia.com/gpu";

struct DeviceStateOptions {
  std::string node;
  bool cdi = false;         // answer CDI device names instead of NVIDIA_VISIBLE_DEVICES
  int shares_per_gpu = 10;  // IDs per GPU of gpusched.io/gpu-shares; 0: not offered
  // A pod list older than this is listed again before a preference.
  std::chrono::milliseconds pods_max_age{0};
};

struct AdvertisedDevice {
  std::string id;
  bool healthy = true;
};

// What Allocate answers for one container.
struct ContainerAnswer {
  std::map<std::string, std::string> envs;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
};

class DeviceState {
 public:
  DeviceState(DeviceStateOptions options, NodeApi* api, Metrics* metrics);

  const DeviceStateOptions& options() const { return options_; }

  // Inventory and topology (the inventory loop). Returns true if what is
  // advertised changed.
  bool SetInventory(const QueryReport& report) ABSL_LOCKS_EXCLUDED(mu_);
  void SetTopology(std::shared_ptr<const GpuTopology> topology) ABSL_LOCKS_EXCLUDED(mu_);
  DeviceTable Table() const ABSL_LOCKS_EXCLUDED(mu_);

  // ListAndWatch: the devices of one resource, and a generation that grows
  // whenever they change. WaitForChange returns the current generation once
  // it differs from `seen`, or after `timeout`.
  std::vector<AdvertisedDevice> Advertised(ResourceKind kind) const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t Generation() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // GetPreferredAllocation for one container: `size` IDs out of `available`.
  std::vector<std::string> Prefer(ResourceKind kind, const std::vector<std::string>& available,
                                  const std::vector<std::string>& must_include, int size)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Allocate for one container. InvalidArgument when an ID names no device of
  // this node.
  absl::StatusOr<ContainerAnswer> Allocate(ResourceKind kind, const std::vector<std::string>& ids)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Reconciliation: the allocation counter before a PodResources List, then
  // the List's allocations. Allocates answered after `seq` are kept.
  uint64_t AllocationSeq() const ABSL_LOCKS_EXCLUDED(mu_);
  void SetKubeletAllocations(const NodeAllocations& truth, uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);
  NodeAllocations Allocations() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Answered {
    uint64_t seq;
    ResourceKind kind;
    std::string key;  // pod uid, or "unidentified-<seq>"
    DeviceMask devices;
    int missed;  // Lists since that did not show it
  };
  // The pods on the node: listed now, or the last list when the API fails.
  std::vector<codec::NodePodRecord> Pods() ABSL_LOCKS_EXCLUDED(mu_);
  HandshakeInput Input(ResourceKind kind, int size, const std::vector<codec::NodePodRecord>& pods,
                       const NodeAllocations& alloc) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  NodeAllocations CurrentLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  DeviceMask MaskOf(const std::vector<std::string>& ids, std::string* unknown) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> IdsFor(ResourceKind kind, DeviceMask devices, int size,
                                  const std::vector<std::string>& available) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ContainerAnswer Answer(ResourceKind kind, DeviceMask devices,
                         const codec::NodePodRecord* pod) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Report(const DeviceChoiceResult& r, ResourceKind kind, std::string_view call,
              const std::vector<codec::NodePodRecord>& pods);
  // gpusched_agent_allocations_total{resource, outcome}.
  void CountAllocation(ResourceKind kind, std::string_view outcome);

  const DeviceStateOptions options_;
  NodeApi* api_;
  Metrics* metrics_;
  mutable absl::Mutex mu_;
  DeviceTable table_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const GpuTopology> topology_ ABSL_GUARDED_BY(mu_);
  NodeAllocations kubelet_ ABSL_GUARDED_BY(mu_);         // the last PodResources List
  std::vector<Answered> answered_ ABSL_GUARDED_BY(mu_);  // Allocates since
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<codec::NodePodRecord> last_pods_ ABSL_GUARDED_BY(mu_);
  DeviceChoiceResult last_preference_[2] ABSL_GUARDED_BY(mu_);
};

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_DEVICE_STATE_H_
