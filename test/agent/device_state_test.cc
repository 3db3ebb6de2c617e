// DeviceState without gRPC: what the plugin answers when the API server is
// unreachable, when the kubelet names an unknown device, and how whole GPUs
// and shares block each other in what is advertised.
#include "scheduler/agent/device_state.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gpusched::agent {
namespace {

std::string Testdata(const std::string& name) {
  std::ifstream in(absl::StrCat(GPUSCHED_AGENT_TESTDATA, "/", name));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string Uuid(int i) { return absl::StrCat("GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d4000", i); }

// Pods in memory; the API can be made to fail.
class MemoryApi : public NodeApi {
 public:
  absl::StatusOr<std::vector<codec::NodePodRecord>> ListPods() override {
    ++lists;
    if (down) return absl::UnavailableError("connection refused");
    return pods;
  }
  absl::Status PatchAnnotations(const codec::NodePodRecord&, const AnnotationEdits&) override {
    return absl::OkStatus();
  }
  void RecordEvent(const codec::NodePodRecord& pod, const std::string&, const std::string& reason,
                   const std::string&) override {
    events.push_back(pod.name + ":" + reason);
  }
  std::vector<codec::NodePodRecord> pods;
  bool down = false;
  int lists = 0;
  std::vector<std::string> events;
};

codec::NodePodRecord Pod(const std::string& name, int gpus, const std::string& ids) {
  codec::NodePodRecord p;
  p.ns = "t";
  p.name = name;
  p.uid = "uid-" + name;
  p.node_name = "dgx1";
  p.phase = "Pending";
  p.containers.push_back({"main", gpus, 0});
  p.gpu_ids = ids;
  return p;
}

class DeviceStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_.SetInventory(*ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv")));
  }
  std::vector<std::string> All() {
    std::vector<std::string> ids;
    for (int i = 0; i < 8; ++i) ids.push_back(Uuid(i));
    return ids;
  }
  MemoryApi api_;
  DeviceState state_{DeviceStateOptions{"dgx1", false, 10}, &api_, nullptr};
};

TEST_F(DeviceStateTest, UnreachableApiServerStillGetsAnAnswerFromTheLastList) {
  api_.pods = {Pod("a", 2, "4,5")};
  EXPECT_EQ(state_.Prefer(ResourceKind::kWholeGpu, All(), {}, 2),
            (std::vector<std::string>{Uuid(4), Uuid(5)}));
  api_.down = true;
  api_.pods = {Pod("b", 2, "6,7")};  // never seen: the API is down
  auto ids = state_.Prefer(ResourceKind::kWholeGpu, All(), {}, 2);
  EXPECT_EQ(ids, (std::vector<std::string>{Uuid(4), Uuid(5)}));  // the last list's answer
  auto answer = state_.Allocate(ResourceKind::kWholeGpu, ids);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->envs["NVIDIA_VISIBLE_DEVICES"], Uuid(4) + "," + Uuid(5));
}

TEST_F(DeviceStateTest, UnknownDeviceIdIsRefusedNamingIt) {
  auto answer = state_.Allocate(ResourceKind::kWholeGpu, {Uuid(1), "GPU-not-here"});
  ASSERT_FALSE(answer.ok());
  EXPECT_TRUE(absl::StrContains(answer.status().message(), "'GPU-not-here'"));
  EXPECT_TRUE(state_.Allocations().whole.empty());
}

TEST_F(DeviceStateTest, AllocateAnswersAreCountedByOutcome) {
  Metrics metrics;
  DeviceState state(DeviceStateOptions{"dgx1", false, 10}, &api_, &metrics);
  state.SetInventory(*ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv")));
  auto count = [&metrics](const char* outcome) {
    return metrics.CounterValue("gpusched_agent_allocations_total",
                                {{"resource", "nvidia.com/gpu"}, {"outcome", outcome}});
  };
  api_.pods = {Pod("a", 2, "4,5")};
  auto ids = state.Prefer(ResourceKind::kWholeGpu, All(), {}, 2);
  ASSERT_TRUE(state.Allocate(ResourceKind::kWholeGpu, ids).ok());
  EXPECT_EQ(count("recorded"), 1);
  // No pod of that size waits for devices: not as gpusched recorded.
  api_.pods = {};
  ASSERT_TRUE(state.Allocate(ResourceKind::kWholeGpu, {Uuid(0)}).ok());
  EXPECT_EQ(count("fallback"), 1);
  ASSERT_FALSE(state.Allocate(ResourceKind::kWholeGpu, {"GPU-not-here"}).ok());
  EXPECT_EQ(count("error"), 1);
  EXPECT_EQ(count("recorded"), 1);
}

TEST_F(DeviceStateTest, CdiNamesInsteadOfTheEnvironment) {
  DeviceState cdi(DeviceStateOptions{"dgx1", true, 0}, &api_, nullptr);
  cdi.SetInventory(*ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv")));
  auto answer = cdi.Allocate(ResourceKind::kWholeGpu, {Uuid(2)});
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->cdi_devices, std::vector<std::string>{"nvidia.com/gpu=" + Uuid(2)});
  EXPECT_FALSE(answer->envs.contains("NVIDIA_VISIBLE_DEVICES"));
}

TEST_F(DeviceStateTest, WholeAndSharedAllocationsBlockEachOther) {
  const uint64_t before = state_.Generation();
  ASSERT_TRUE(state_.Allocate(ResourceKind::kGpuShare, {Uuid(3) + "::0"}).ok());
  ASSERT_TRUE(state_.Allocate(ResourceKind::kWholeGpu, {Uuid(5)}).ok());
  EXPECT_GT(state_.Generation(), before);  // ListAndWatch streams send again
  for (const AdvertisedDevice& d : state_.Advertised(ResourceKind::kWholeGpu)) {
    EXPECT_EQ(d.healthy, d.id != Uuid(3)) << d.id;
  }
  int shares = 0;
  for (const AdvertisedDevice& d : state_.Advertised(ResourceKind::kGpuShare)) {
    ++shares;
    EXPECT_EQ(d.healthy, !absl::StartsWith(d.id, Uuid(5))) << d.id;
  }
  EXPECT_EQ(shares, 80);
  // The kubelet's List without them (the pods ended): both are offered again
  // once the List has missed them three times.
  for (int i = 0; i < 3; ++i) state_.SetKubeletAllocations({}, state_.AllocationSeq());
  for (const AdvertisedDevice& d : state_.Advertised(ResourceKind::kWholeGpu))
    EXPECT_TRUE(d.healthy);
}

}  // namespace
}  // namespace gpusched::agent
