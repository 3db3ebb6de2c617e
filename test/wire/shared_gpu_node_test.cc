// A GPU shared through the node agent, as the extender reads the node: the
// agent's device plugin advertises a GPU that holds shared pods as unhealthy
// for nvidia.com/gpu (so the kubelet never gives it to a whole-GPU pod), and
// the kubelet's allocatable nvidia.com/gpu drops by one. That GPU is in
// service, not lost: every other GPU stays offered to whole-GPU pods, and
// further shared pods pack onto it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gpusched/core/extender_service.h"
#include "gpusched/policy/framework.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/extender_codec.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

constexpr char kNode[] = "dgx1";
constexpr DeviceMask kAll = 0xff;

// A DGX-1 V100 as the kubelet reports it: 8 GPUs, `allocatable` of them
// offered, and (with the node agent's plugin) 10 gpusched.io/gpu-shares per
// GPU.
std::string NodeText(int allocatable, bool shares) {
  const std::string share_cap = shares ? R"(,"gpusched.io/gpu-shares":"80")" : "";
  const std::string share_alloc = shares ? R"(,"gpusched.io/gpu-shares":"80")" : "";
  return std::string(R"({"metadata":{"name":")") + kNode +
         R"(","labels":{"nvidia.com/gpu.product":"Tesla-V100-SXM2-32GB",)"
         R"("nvidia.com/gpu.memory":"32768","nvidia.com/gpu.count":"8"}},)"
         R"("status":{"capacity":{"cpu":"80","memory":"512Gi","nvidia.com/gpu":"8")" +
         share_cap + R"(},"allocatable":{"cpu":"80","memory":"512Gi","nvidia.com/gpu":")" +
         std::to_string(allocatable) + "\"" + share_alloc + "}}}";
}

// A pod asking for half a GPU through gpusched.io/gpu-shares; bound to the
// node on `device` when it is >= 0.
std::string SharedPodText(const std::string& name, int device) {
  std::string ann = R"("gpusched.io/gpu-milli":"500")";
  if (device >= 0) ann += R"(,"gpusched.io/gpu-ids":")" + std::to_string(device) + "\"";
  return R"({"metadata":{"name":")" + name + R"(","namespace":"t","uid":"uid-)" + name +
         R"(","creationTimestamp":"2026-01-01T00:00:00Z","annotations":{)" + ann +
         R"(}},"spec":{)" + (device >= 0 ? R"("nodeName":"dgx1",)" : std::string()) +
         R"("containers":[{"name":"main","resources":{"limits":{"gpusched.io/gpu-shares":"1"},)"
         R"("requests":{"gpusched.io/gpu-shares":"1"}}}]},"status":{"phase":")" +
         (device >= 0 ? "Running" : "Pending") + "\"}}";
}

class SharedGpuNodeTest : public ::testing::Test {
 protected:
  void Start(int allocatable, bool shares, int shared_device) {
    auto config =
        codec::LoadConfigFile(std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json");
    ASSERT_TRUE(config.ok()) << config.status();
    auto fw = policy::Framework::Create(config->scoring);
    ASSERT_TRUE(fw.ok()) << fw.status();
    std::string node = NodeText(allocatable, shares);
    auto spec = decoder_.DecodeNodeObject(node);
    ASSERT_TRUE(spec.ok()) << spec.status();
    std::vector<PodRequest> pods;
    if (shared_device >= 0) pods.push_back(Pod(SharedPodText("s1", shared_device)));
    state_ = MakeState({*spec}, pods);
    service_ = std::make_unique<ExtenderService>(
        state_.get(), std::shared_ptr<const policy::Framework>(std::move(*fw)));
    service_->SetReady(true);
  }

  PodRequest Pod(std::string text) {
    auto pod = decoder_.DecodePodObject(text);
    EXPECT_TRUE(pod.ok()) << pod.status();
    return pod.ok() ? *pod : PodRequest{};
  }

  // Filter then bind `pod` on the node; the devices bound, or the reason.
  std::string Place(const PodRequest& pod, DeviceMask* devices) {
    state_->UpsertPod(pod);
    state_->Commit();
    ExtenderArgs args;
    args.pod = pod;
    args.node_names = {kNode};
    FilterOutcome out = service_->Filter(args);
    if (!out.failed.empty()) return out.reason(out.failed[0]);
    if (!out.unresolvable.empty()) return out.reason(out.unresolvable[0]);
    if (out.passed.empty()) return "no node passed: " + out.error;
    return service_->Bind(BindingArgs{pod.name, pod.ns, pod.uid, kNode}, devices);
  }

  const NodeInfo& Node() { return *state_->Snapshot()->Find(kNode); }

  codec::RequestDecoder decoder_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
};

TEST_F(SharedGpuNodeTest, TheSharedGpuIsInServiceAndNoOtherGpuIdles) {
  for (int k = 0; k < 8; ++k) {
    SCOPED_TRACE("shared pod on GPU " + std::to_string(k));
    const DeviceMask shared = DeviceMask{1} << k;
    Start(/*allocatable=*/7, /*shares=*/true, k);
    ASSERT_EQ(Node().healthy, kAll);
    EXPECT_EQ(Node().whole_free, kAll & ~shared);
    EXPECT_TRUE(Node().partial_share);
    EXPECT_EQ(Node().used_milli[k], 500);
    // Every whole GPU but the shared one, never all eight.
    PodRequest w8 = PodBuilder("w8", "t").Gpus(8).Build();
    DeviceMask got = 0;
    EXPECT_NE(Place(w8, &got), "");
    state_->RemovePod(w8.uid);
    // A second shared pod packs onto the shared GPU.
    ASSERT_EQ(Place(Pod(SharedPodText("s2", -1)), &got), "");
    EXPECT_EQ(got, shared);
    PodRequest w7 = PodBuilder("w7", "t").Gpus(7).Build();
    ASSERT_EQ(Place(w7, &got), "");
    EXPECT_EQ(got, kAll & ~shared);
    EXPECT_EQ(Node().whole_free, 0u);
  }
}

TEST_F(SharedGpuNodeTest, AGpuLostBesideTheSharedOneIsStillCountedOut) {
  // One GPU lost and one shared: 6 allocatable. The shared GPU stays in
  // service; one other GPU (which, the kubelet does not say) is out.
  Start(/*allocatable=*/6, /*shares=*/true, 7);
  EXPECT_EQ(Node().healthy_count(), 7);
  EXPECT_NE(Node().healthy & (DeviceMask{1} << 7), 0u);
  EXPECT_EQ(Node().free_count(), 6);
}

TEST_F(SharedGpuNodeTest, WithoutTheAgentsSharesAMissingGpuIsUnhealthy) {
  // NVIDIA's plugin (no gpusched.io/gpu-shares): allocatable below the
  // count means a GPU is unhealthy, whatever shared pods there are.
  Start(/*allocatable=*/7, /*shares=*/false, 2);
  EXPECT_EQ(Node().healthy_count(), 7);
  EXPECT_EQ(Node().free_count(), 6);
}

TEST_F(SharedGpuNodeTest, NoSharedPodNoAllocatableGap) {
  Start(/*allocatable=*/8, /*shares=*/true, -1);
  EXPECT_EQ(Node().healthy, kAll);
  EXPECT_EQ(Node().whole_free, kAll);
  EXPECT_FALSE(Node().partial_share);
}

}  // namespace
}  // namespace gpusched::testing
