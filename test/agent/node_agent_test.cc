// The node agent against a fake kubelet (device plugin registration,
// ListAndWatch, GetPreferredAllocation + Allocate per container, PodResources,
// restarts) and the fake API server, with gpusched's extender in the same
// process binding pods on a DGX-1 V100.
#include "scheduler/agent/node_agent.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/policy/framework.h"
#include "scheduler/agent/nvidia_smi_topo.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/kube_source.h"
#include "scheduler/kube/kube_writer.h"
#include "scheduler/kube/node_pod_client.h"
#include "test/agent/fake_kubelet.h"
#include "test/kube/kube_test_util.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

constexpr char kNode[] = "dgx1";
constexpr char kGpu[] = "nvidia.com/gpu";
constexpr char kShares[] = "gpusched.io/gpu-shares";

const TestPki& Pki() {
  static const TestPki pki = MakeTestPki();
  return pki;
}

std::string Testdata(const std::string& name) { return StrCat(GPUSCHED_AGENT_TESTDATA, "/", name); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Uuid(int i) { return StrCat("GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d4000", i); }

// A pending pod bound to the node (as gpusched's bind leaves it, or not).
Json BoundPod(const std::string& name, int gpus, const std::string& ids,
              const std::string& phase = "Pending") {
  return PodJson("t", name, gpus, kNode, ids, phase);
}

Json SharedPod(const std::string& name, const std::string& milli) {
  Json p = PodJson("t", name, 0);
  auto& res = p["spec"]["containers"][0]["resources"];
  res["limits"].erase("nvidia.com/gpu");
  res["requests"].erase("nvidia.com/gpu");
  res["limits"][kShares] = "1";
  res["requests"][kShares] = "1";
  p["metadata"]["annotations"]["gpusched.io/gpu-milli"] = milli;
  return p;
}

std::string Annotation(const FakeApiServer& api, const std::string& name, const std::string& key) {
  auto p = api.Get("pods", "t/" + name);
  if (!p) return "(no pod)";
  return (*p)["metadata"]["annotations"].value(key, "");
}

class NodeAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gsa-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    query_ = dir_ + "/query.csv";
    std::filesystem::copy_file(Testdata("dgx1_v100_query.csv"), query_);
    api_ = std::make_unique<FakeApiServer>(Pki(), kToken);
    api_->Start();
    Json node = NodeJson(kNode, 8, "Tesla-V100-SXM2-32GB");
    node["metadata"]["annotations"]["gpusched.io/gpu-topology"] = codec::EncodeTopologyAnnotation(
        *agent::ParseNvidiaSmiTopo(ReadFile(Testdata("dgx1_v100.txt"))));
    api_->Put("nodes", node);
    client_ = ClientFor(*api_, Pki());
    events_ = std::make_unique<kube::EventRecorder>(client_.get(), kube::EventRecorder::Options{},
                                                    &metrics_);
    pods_ = std::make_unique<kube::NodePodClient>(client_.get(), kNode, events_.get(),
                                                  std::chrono::milliseconds(2000));
    kubelet_ = std::make_unique<FakeKubelet>(dir_ + "/dp", dir_ + "/pr");
    kubelet_->Start();
  }

  void TearDown() override {
    if (agent_ != nullptr) agent_->Stop();
    agent_.reset();
    kubelet_.reset();
    if (source_ != nullptr) source_->Stop();
    events_.reset();
    std::filesystem::remove_all(dir_);
  }

  void MakeAgent(bool device_plugin) {
    agent::NodeAgentOptions o;
    o.node = kNode;
    o.device_plugin = device_plugin;
    o.device_plugin_dir = dir_ + "/dp";
    o.pod_resources_socket = dir_ + "/pr/kubelet.sock";
    o.query_input = query_;
    o.topo_input = Testdata("dgx1_v100.txt");
    o.inventory_interval = std::chrono::milliseconds(100);
    o.reconcile_interval = std::chrono::milliseconds(100);
    agent_ = std::make_unique<agent::NodeAgent>(o, pods_.get(), &metrics_);
    ASSERT_TRUE(agent_->RefreshInventory().ok());
    if (device_plugin) {
      ASSERT_TRUE(agent_->RegisterTick().ok());
      ASSERT_TRUE(kubelet_->WaitForDevices(kGpu, [](const auto& d) { return d.size() == 8; }));
    }
  }

  // gpusched's extender over the same API server.
  void StartExtender() {
    auto config =
        codec::LoadConfigFile(std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json");
    ASSERT_TRUE(config.ok()) << config.status();
    auto fw = policy::Framework::Create(config->scoring);
    ASSERT_TRUE(fw.ok());
    state_ = std::make_unique<ClusterState>(ShippedTemplates());
    service_ = std::make_unique<ExtenderService>(
        state_.get(), std::shared_ptr<const policy::Framework>(std::move(*fw)));
    kube::SourceOptions so;
    so.watch_timeout_seconds = 5;
    source_ = std::make_unique<kube::KubeClusterSource>(client_.get(), so, &metrics_);
    ASSERT_TRUE(source_->Start(state_.get(), [this](bool v) { service_->SetReady(v); }).ok());
    ASSERT_TRUE(WaitFor([&] { return source_->synced(); }));
    binder_ = std::make_unique<kube::KubeBinder>(
        client_.get(), source_.get(), state_.get(), [] { return true; }, kube::WriteOptions{},
        &metrics_);
  }

  // What the bind route does (assume, then write back).
  std::string Bind(const std::string& name) {
    EXPECT_TRUE(WaitFor([&] { return state_->FindPodByName("t", name).has_value(); }));
    BindingArgs args{name, "t", "uid-t-" + name, kNode};
    DeviceMask devices = 0;
    std::string err = service_->Bind(args, &devices);
    if (err.empty()) err = binder_->AfterBind(args, devices);
    return err;
  }

  FilterOutcome Filter(const std::string& name) {
    ExtenderArgs args;
    args.pod = *state_->FindPodByName("t", name);
    args.node_names = {kNode};
    return service_->Filter(args);
  }

  absl::StatusOr<std::vector<ContainerGrant>> Admit(const std::string& name, const std::string& res,
                                                    int n) {
    ContainerAsk ask;
    ask.resources[res] = n;
    return kubelet_->Admit("t", name, {ask});
  }

  std::string dir_, query_;
  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<kube::KubeHttpClient> client_;
  Metrics metrics_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::unique_ptr<kube::NodePodClient> pods_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<agent::NodeAgent> agent_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
  std::unique_ptr<kube::KubeClusterSource> source_;
  std::unique_ptr<kube::KubeBinder> binder_;
};

TEST_F(NodeAgentTest, ContainerGetsExactlyTheDevicesTheExtenderBound) {
  MakeAgent(true);
  // Two pods bound earlier, admitted back to back: each gets its record.
  api_->Put("pods", BoundPod("c", 4, "0,1,2,3"));
  api_->Put("pods", BoundPod("d", 2, "6,7"));
  auto c = Admit("c", kGpu, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)[0].envs["NVIDIA_VISIBLE_DEVICES"],
            absl::StrJoin({Uuid(0), Uuid(1), Uuid(2), Uuid(3)}, ","));
  auto d = Admit("d", kGpu, 2);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)[0].envs["NVIDIA_VISIBLE_DEVICES"], Uuid(6) + "," + Uuid(7));
  api_->Put("pods", BoundPod("c", 4, "0,1,2,3", "Running"));
  api_->Put("pods", BoundPod("d", 2, "6,7", "Running"));

  StartExtender();
  api_->Put("pods", PodJson("t", "a", 2));
  ASSERT_EQ(Bind("a"), "");
  ASSERT_EQ(Annotation(*api_, "a", "gpusched.io/gpu-ids"), "4,5");
  auto a = Admit("a", kGpu, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].devices[kGpu], (std::vector<std::string>{Uuid(4), Uuid(5)}));
  EXPECT_EQ((*a)[0].envs["NVIDIA_VISIBLE_DEVICES"], Uuid(4) + "," + Uuid(5));
  EXPECT_EQ(kubelet_->preferred_calls(), 3);

  auto stats = agent_->ReconcileOnce();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->kubelet_pods, 3);
  EXPECT_EQ(stats->corrections, 0);
  EXPECT_EQ(stats->confirmations, 3);
  EXPECT_EQ(Annotation(*api_, "a", "gpusched.io/gpu-ids-confirmed"), "4,5");
  EXPECT_EQ(Annotation(*api_, "a", "gpusched.io/gpu-ids"), "4,5");
  EXPECT_EQ(Annotation(*api_, "c", "gpusched.io/gpu-ids-confirmed"), "0,1,2,3");
  stats = agent_->ReconcileOnce();  // nothing left to write
  EXPECT_EQ(stats->confirmations + stats->corrections, 0);
}

TEST_F(NodeAgentTest, DriftFromAnotherAllocatorIsCorrectedAndTheFilterFollows) {
  // NVIDIA's plugin allocates (builtin here); the agent only reconciles.
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Uuid(i));
  kubelet_->SetBuiltinDevices(kGpu, ids);
  MakeAgent(false);
  api_->Put("pods", BoundPod("d", 2, "2,3", "Running"));
  ContainerAsk on23;
  on23.resources[kGpu] = 2;
  on23.builtin_choice[kGpu] = {Uuid(2), Uuid(3)};
  ASSERT_TRUE(kubelet_->Admit("t", "d", {on23}).ok());

  StartExtender();
  api_->Put("pods", PodJson("t", "a", 2));
  ASSERT_EQ(Bind("a"), "");
  const std::string recorded = Annotation(*api_, "a", "gpusched.io/gpu-ids");
  ASSERT_NE(recorded, "0,1");
  // The allocator hands a 0,1 (lowest free) whatever gpusched recorded.
  auto a = Admit("a", kGpu, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ((*a)[0].devices[kGpu], (std::vector<std::string>{Uuid(0), Uuid(1)}));

  Json b = PodJson("t", "b", 4);
  b["metadata"]["annotations"]["gpusched.io/topology"] = "nvlink-required";
  api_->Put("pods", b);
  ASSERT_TRUE(WaitFor([&] { return state_->FindPodByName("t", "b").has_value(); }));
  // gpusched's view before the correction: a's record breaks the 4-7 group.
  FilterOutcome before = Filter("b");
  EXPECT_TRUE(before.passed.empty());

  auto stats = agent_->ReconcileOnce();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->corrections, 1);
  EXPECT_EQ(Annotation(*api_, "a", "gpusched.io/gpu-ids"), "0,1");
  EXPECT_EQ(Annotation(*api_, "a", "gpusched.io/gpu-ids-confirmed"), "0,1");
  ASSERT_TRUE(WaitFor([&] {
    auto p = state_->FindPodByName("t", "a");
    return p && p->has_gpu_ids && p->gpu_ids == 0b11;
  }));
  // The true free set 4,5,6,7 is an all-NVLink group.
  FilterOutcome after = Filter("b");
  EXPECT_EQ(after.passed.size(), 1u) << (after.failed.empty() ? "" : after.reason(after.failed[0]));
  events_->Flush();
  bool corrected_event = false;
  for (const Json& e : api_->Events()) {
    corrected_event |= e.value("reason", "") == "GpuschedRecordCorrected";
  }
  EXPECT_TRUE(corrected_event);
}

TEST_F(NodeAgentTest, TwoSharedPodsOnOneDeviceAndAWholeGpuPodKeptOff) {
  MakeAgent(true);
  ASSERT_TRUE(kubelet_->WaitForDevices(kShares, [](const auto& d) { return d.size() == 80; }));
  StartExtender();
  api_->Put("pods", SharedPod("s1", "500"));
  api_->Put("pods", SharedPod("s2", "500"));
  ASSERT_EQ(Bind("s1"), "");
  ASSERT_EQ(Bind("s2"), "");
  const std::string device = Annotation(*api_, "s1", "gpusched.io/gpu-ids");
  ASSERT_EQ(Annotation(*api_, "s2", "gpusched.io/gpu-ids"), device);
  const std::string uuid = Uuid(std::stoi(device));
  for (std::string name : {"s1", "s2"}) {
    auto g = Admit(name, kShares, 1);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_EQ((*g)[0].devices[kShares].size(), 1u);
    EXPECT_TRUE(absl::StartsWith((*g)[0].devices[kShares][0], uuid + "::")) << name;
    EXPECT_EQ((*g)[0].envs["NVIDIA_VISIBLE_DEVICES"], uuid);
    EXPECT_EQ((*g)[0].envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=16384M");
    EXPECT_EQ((*g)[0].envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  }
  // The kubelet no longer offers that device as a whole GPU.
  ASSERT_TRUE(kubelet_->WaitForDevices(kGpu, [&](const auto& d) { return !d.at(uuid); }));
  EXPECT_FALSE(Admit("w8", kGpu, 8).ok());
  api_->Put("pods", BoundPod("w7", 7, ""));
  auto w = Admit("w7", kGpu, 7);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const std::string& id : (*w)[0].devices[kGpu]) EXPECT_NE(id, uuid);
  // And the whole GPUs' shares are not offered any more.
  ASSERT_TRUE(kubelet_->WaitForDevices(kShares, [&](const auto& d) {
    int healthy = 0;
    for (const auto& [id, h] : d) healthy += h;
    return healthy == 10;  // only the shared device's
  }));
}

// The kubelet's node status: per resource, the devices the plugin lists as
// capacity and the healthy ones as allocatable (what the extender reads).
void PutKubeletNodeStatus(FakeApiServer& api, const FakeKubelet& kubelet, const std::string& cpu) {
  Json node = *api.Get("nodes", kNode);
  for (const char* res : {kGpu, kShares}) {
    int healthy = 0;
    const auto devices = kubelet.Devices(res);
    for (const auto& [id, h] : devices) healthy += h;
    node["status"]["capacity"][res] = std::to_string(devices.size());
    node["status"]["allocatable"][res] = std::to_string(healthy);
  }
  node["status"]["allocatable"]["cpu"] = cpu;
  api.Put("nodes", node);
}

TEST_F(NodeAgentTest, ASharedGpuLeavesEveryOtherGpuToWholeGpuPods) {
  MakeAgent(true);
  ASSERT_TRUE(kubelet_->WaitForDevices(kShares, [](const auto& d) { return d.size() == 80; }));
  StartExtender();
  api_->Put("pods", SharedPod("s1", "500"));
  ASSERT_EQ(Bind("s1"), "");
  const int device = std::stoi(Annotation(*api_, "s1", "gpusched.io/gpu-ids"));
  const std::string uuid = Uuid(device);
  ASSERT_TRUE(Admit("s1", kShares, 1).ok());
  ASSERT_TRUE(kubelet_->WaitForDevices(kGpu, [&](const auto& d) { return !d.at(uuid); }));
  // The kubelet now reports 7 of 8 nvidia.com/gpu allocatable (and 95 CPUs,
  // a mark to see the status reach the extender).
  PutKubeletNodeStatus(*api_, *kubelet_, "95");
  ASSERT_TRUE(WaitFor([&] {
    const NodeInfo* n = state_->Snapshot()->Find(kNode);
    return n != nullptr && n->cpu_milli == 95000;
  }));
  // A 7-GPU pod gets every GPU but the shared one, and the kubelet agrees.
  api_->Put("pods", PodJson("t", "w7", 7));
  ASSERT_EQ(Bind("w7"), "");
  std::vector<std::string> want;
  for (int i = 0; i < 8; ++i) {
    if (i != device) want.push_back(StrCat(i));
  }
  EXPECT_EQ(Annotation(*api_, "w7", "gpusched.io/gpu-ids"), absl::StrJoin(want, ","));
  auto w = Admit("w7", kGpu, 7);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const std::string& id : (*w)[0].devices[kGpu]) EXPECT_NE(id, uuid);
  // A second shared pod packs onto the shared GPU.
  api_->Put("pods", SharedPod("s2", "500"));
  ASSERT_EQ(Bind("s2"), "");
  EXPECT_EQ(Annotation(*api_, "s2", "gpusched.io/gpu-ids"), StrCat(device));
  auto s2 = Admit("s2", kShares, 1);
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ((*s2)[0].envs["NVIDIA_VISIBLE_DEVICES"], uuid);
}

TEST_F(NodeAgentTest, ReRegistersAfterAKubeletRestartAndKeepsAllocating) {
  MakeAgent(true);
  agent_->Start();
  kubelet_->Restart();
  ASSERT_TRUE(WaitFor([&] { return kubelet_->registrations(kGpu) == 2; }));
  ASSERT_TRUE(kubelet_->WaitForDevices(kGpu, [](const auto& d) { return d.size() == 8; }));
  api_->Put("pods", BoundPod("a", 2, "4,5"));
  auto a = Admit("a", kGpu, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].envs["NVIDIA_VISIBLE_DEVICES"], Uuid(4) + "," + Uuid(5));
  ASSERT_TRUE(
      WaitFor([&] { return Annotation(*api_, "a", "gpusched.io/gpu-ids-confirmed") == "4,5"; }));
}

TEST_F(NodeAgentTest, LostDeviceIsReportedUnhealthy) {
  MakeAgent(true);
  std::filesystem::copy_file(Testdata("dgx1_v100_query_lost.csv"), query_,
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_TRUE(agent_->RefreshInventory().ok());
  ASSERT_TRUE(kubelet_->WaitForDevices(kGpu, [](const auto& d) {
    return d.size() == 8 && !d.at(Uuid(3)) && !d.at(Uuid(6)) && d.at(Uuid(0));
  }));
  // A pod recorded on the lost device gets healthy ones instead, and an Event.
  api_->Put("pods", BoundPod("a", 2, "3,7"));
  auto a = Admit("a", kGpu, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  for (const std::string& id : (*a)[0].devices[kGpu]) {
    EXPECT_NE(id, Uuid(3));
    EXPECT_NE(id, Uuid(6));
  }
  events_->Flush();
  bool mismatch = false;
  for (const Json& e : api_->Events())
    mismatch |= e.value("reason", "") == "GpuschedDeviceMismatch";
  EXPECT_TRUE(mismatch);
}

}  // namespace
}  // namespace gpusched::testing
