// Test and benchmark fixtures: canonical machines (DGX-1 V100, DGX A100,
// HGX H100, 4xT4 PCIe) as NodeSpecs, fluent pod builders, and a ClusterState
// with the shipped topology templates. Not part of the product. Not
// thread-safe.
#ifndef GPUSCHED_TEST_TESTING_BUILDERS_H_
#define GPUSCHED_TEST_TESTING_BUILDERS_H_

#include <memory>
#include <string>
#include <vector>

#include "gpusched/core/cluster_state.h"
#include "gpusched/core/config.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"

namespace gpusched::testing {

// Product labels as GPU Feature Discovery writes them.
inline constexpr char kV100[] = "Tesla-V100-SXM2-32GB";
inline constexpr char kA100[] = "NVIDIA-A100-SXM4-80GB";
inline constexpr char kH100[] = "NVIDIA-H100-80GB-HBM3";
inline constexpr char kT4[] = "Tesla-T4";

NodeSpec Dgx1V100(const std::string& name);
NodeSpec DgxA100(const std::string& name);
NodeSpec Hgx8H100(const std::string& name);
// The rack and block labels the topology tests use, and an HGX H100 node in
// `rack` of `block` ("" leaves that label out).
inline constexpr char kRackLabel[] = "cloud.provider.com/topology-rack";
inline constexpr char kBlockLabel[] = "cloud.provider.com/topology-block";
NodeSpec Hgx8H100InRack(const std::string& name, const std::string& rack, const std::string& block);
NodeSpec Pcie4xT4(const std::string& name);
NodeSpec CpuOnly(const std::string& name);

// The DGX-1 V100 matrix (research/traces.md 4.3) as nvidia-smi codes.
std::vector<std::vector<std::string>> Dgx1V100Codes();

// The topology templates of config/scheduler-policy.json.
std::vector<TopologyTemplate> ShippedTemplates();

// The text of a file of the source tree, e.g. "config/demo-cluster.json";
// empty if it cannot be read.
std::string ReadSourceFile(const std::string& relative_path);

// A committed ClusterState of config/demo-cluster.json with the shipped
// templates, as `gpusched serve` starts; nullptr if the file does not decode.
std::unique_ptr<ClusterState> DemoClusterState();

class PodBuilder {
 public:
  explicit PodBuilder(std::string name, std::string ns = "default");
  PodBuilder& Gpus(int n);
  PodBuilder& Milli(int milli);
  PodBuilder& Models(std::vector<std::string> models);
  PodBuilder& MemoryMiB(int64_t mib);
  PodBuilder& Topology(TopologyMode mode);
  PodBuilder& Priority(int32_t p);
  PodBuilder& OnNode(std::string node, DeviceMask ids);
  PodBuilder& OnNodeUnknownIds(std::string node);
  PodBuilder& Phase(PodPhase phase);
  PodBuilder& Created(int64_t unix_seconds);
  PodBuilder& Gang(std::string gang, int size);
  PodRequest Build() const { return pod_; }

 private:
  PodRequest pod_;
};

// Returns a ClusterState with the shipped templates, `nodes` and `pods`, committed.
std::unique_ptr<ClusterState> MakeState(std::vector<NodeSpec> nodes,
                                        std::vector<PodRequest> pods = {});

// Mask from indices: Devices({0, 3}) == 0b1001.
DeviceMask Devices(std::initializer_list<int> ids);

// Returns a Kubernetes List JSON with `nodes` synthetic GPU nodes (mixed
// DGX-1 V100 / DGX A100 / HGX H100 / 4xT4) and about one running pod per
// node; deterministic for a given `seed`. For benchmarks and load tests.
std::string SyntheticClusterJson(int nodes, uint32_t seed);
// Returns an ExtenderArgs body for a pod with `gpus` GPUs listing the first
// `names` node names of SyntheticClusterJson.
std::string SyntheticFilterRequest(int names, int gpus);
std::string SyntheticNodeName(int i);

// The uids of the gang reservation holders (PodRequest::reservation) on
// the nodes of `state`'s current snapshot, sorted.
std::vector<std::string> ReservationHolders(const ClusterState& state);

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_TESTING_BUILDERS_H_
