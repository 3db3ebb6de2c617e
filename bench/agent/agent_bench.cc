// Node agent benchmarks (issue goals: Allocate answered in <= 5 ms with 8
// devices and 100 pods on the node; PodResources reconciliation of 110 pods
// in <= 20 ms CPU):
//
//  - BM_PreferAndAllocate: one container's GetPreferredAllocation + Allocate
//    in DeviceState (the pod list in memory: the API round trip is not
//    counted here);
//  - BM_PreferAndAllocateGrpc: the same over the plugin's unix socket, as the
//    kubelet calls it;
//  - BM_DecodeNodePods: the API's pod list of 110 pods decoded;
//  - BM_ReconcilePlan: PodResources List of 110 pods over a unix socket,
//    resolved and compared with the records (every record drifted, the worst
//    case).
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"
#include "scheduler/agent/device_plugin.h"
#include "scheduler/agent/device_state.h"
#include "scheduler/agent/pod_resources_client.h"
#include "scheduler/agent/reconcile.h"
#include "scheduler/codec/agent_codec.h"

namespace gpusched::agent {
namespace {

std::string Uuid(int i) { return absl::StrCat("GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d4000", i); }

QueryReport Inventory() {
  std::string csv = "index, uuid, memory.total [MiB]\n";
  for (int i = 0; i < 8; ++i) absl::StrAppend(&csv, i, ", ", Uuid(i), ", 32768\n");
  return *ParseNvidiaSmiQuery(csv);
}

// 99 running 1-GPU-share or finished pods and one pending 2-GPU pod.
class MemoryApi : public NodeApi {
 public:
  MemoryApi() {
    for (int i = 0; i < 100; ++i) {
      codec::NodePodRecord p;
      p.ns = "team";
      p.name = absl::StrCat("p", i);
      p.uid = absl::StrCat("uid-", i);
      p.node_name = "node";
      p.phase = i == 99 ? "Pending" : (i % 2 ? "Succeeded" : "Running");
      p.containers.push_back({"main", i == 99 ? 2 : 0, i == 99 ? 0 : 1});
      p.gpu_ids = i == 99 ? "4,5" : "0";
      pods.push_back(p);
    }
  }
  absl::StatusOr<std::vector<codec::NodePodRecord>> ListPods() override { return pods; }
  absl::Status PatchAnnotations(const codec::NodePodRecord&, const AnnotationEdits&) override {
    return absl::OkStatus();
  }
  void RecordEvent(const codec::NodePodRecord&, const std::string&, const std::string&,
                   const std::string&) override {}
  std::vector<codec::NodePodRecord> pods;
};

std::vector<std::string> AllIds() {
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Uuid(i));
  return ids;
}

void BM_PreferAndAllocate(benchmark::State& st) {
  MemoryApi api;
  DeviceState state(DeviceStateOptions{"node", false, 10}, &api, nullptr);
  state.SetInventory(Inventory());
  const std::vector<std::string> all = AllIds();
  for (auto _ : st) {
    auto ids = state.Prefer(ResourceKind::kWholeGpu, all, {}, 2);
    auto answer = state.Allocate(ResourceKind::kWholeGpu, ids);
    benchmark::DoNotOptimize(answer);
    st.PauseTiming();
    state.SetKubeletAllocations({}, state.AllocationSeq() + 100);  // forget it again
    for (int i = 0; i < 3; ++i) state.SetKubeletAllocations({}, state.AllocationSeq());
    st.ResumeTiming();
  }
}
BENCHMARK(BM_PreferAndAllocate)->Unit(benchmark::kMicrosecond);

void BM_PreferAndAllocateGrpc(benchmark::State& st) {
  MemoryApi api;
  DeviceState state(DeviceStateOptions{"node", false, 10}, &api, nullptr);
  state.SetInventory(Inventory());
  const std::string sock = absl::StrCat("/tmp/gpusched-agent-bench-", getpid(), ".sock");
  DevicePluginServer server(&state, ResourceKind::kWholeGpu, sock);
  if (!server.Start().ok()) {
    st.SkipWithError("cannot listen");
    return;
  }
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials()));
  for (auto _ : st) {
    v1beta1::PreferredAllocationRequest preq;
    auto* c = preq.add_container_requests();
    for (const auto& id : AllIds()) c->add_available_deviceids(id);
    c->set_allocation_size(2);
    v1beta1::PreferredAllocationResponse presp;
    grpc::ClientContext pctx;
    if (!stub->GetPreferredAllocation(&pctx, preq, &presp).ok()) st.SkipWithError("preferred");
    v1beta1::AllocateRequest areq;
    auto* ac = areq.add_container_requests();
    for (const auto& id : presp.container_responses(0).deviceids()) ac->add_devices_ids(id);
    v1beta1::AllocateResponse aresp;
    grpc::ClientContext actx;
    if (!stub->Allocate(&actx, areq, &aresp).ok()) st.SkipWithError("allocate");
    st.PauseTiming();
    for (int i = 0; i < 3; ++i) state.SetKubeletAllocations({}, state.AllocationSeq());
    st.ResumeTiming();
  }
  server.Stop();
}
BENCHMARK(BM_PreferAndAllocateGrpc)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A v1.PodList of 110 GPU pods on one node, as the API server sends it.
std::string PodListJson() {
  nlohmann::json items = nlohmann::json::array();
  for (int i = 0; i < 110; ++i) {
    items.push_back(
        {{"metadata",
          {{"name", absl::StrCat("p", i)},
           {"namespace", "team"},
           {"uid", absl::StrCat("uid-", i)},
           {"annotations", {{"gpusched.io/gpu-ids", std::to_string(i % 8)}}},
           {"labels", {{"app", "train"}, {"job-name", absl::StrCat("job-", i)}}}}},
         {"spec",
          {{"nodeName", "node"},
           {"containers",
            {{{"name", "main"},
              {"image", "nvcr.io/nvidia/pytorch:24.05-py3"},
              {"resources",
               {{"limits", {{"nvidia.com/gpu", "1"}, {"cpu", "8"}, {"memory", "64Gi"}}},
                {"requests", {{"nvidia.com/gpu", "1"}, {"cpu", "8"}, {"memory", "64Gi"}}}}}}}}}},
         {"status", {{"phase", "Running"}}}});
  }
  return nlohmann::json{{"kind", "PodList"}, {"items", items}}.dump();
}

void BM_DecodeNodePods(benchmark::State& st) {
  const std::string body = PodListJson();
  for (auto _ : st) benchmark::DoNotOptimize(codec::DecodeNodePodList(body));
  st.counters["bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_DecodeNodePods)->Unit(benchmark::kMicrosecond);

// Serves a PodResources List of 110 pods, each on device (i + 1) % 8.
class PodResourcesServer final : public v1::PodResourcesLister::Service {
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* resp) override {
    for (int i = 0; i < 110; ++i) {
      auto* p = resp->add_pod_resources();
      p->set_name(absl::StrCat("p", i));
      p->set_namespace_("team");
      auto* d = p->add_containers()->add_devices();
      d->set_resource_name("nvidia.com/gpu");
      d->add_device_ids(Uuid((i + 1) % 8));
    }
    return grpc::Status::OK;
  }
};

void BM_ReconcilePlan(benchmark::State& st) {
  PodResourcesServer service;
  const std::string sock = absl::StrCat("/tmp/gpusched-agent-bench-pr-", getpid(), ".sock");
  unlink(sock.c_str());
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + sock, grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  DeviceTable table;
  table.Update(Inventory());
  auto pods = codec::DecodeNodePodList(PodListJson());
  size_t fixes = 0;
  for (auto _ : st) {
    auto kubelet = ListPodResources(sock, std::chrono::milliseconds(3000));
    if (!kubelet.ok()) st.SkipWithError("List");
    auto assigned = ResolveKubeletPods(*kubelet, table, pods->pods);
    benchmark::DoNotOptimize(AllocationsFrom(assigned));
    fixes = PlanRecordFixes(assigned, pods->pods).size();
  }
  st.counters["fixes"] = static_cast<double>(fixes);
  server->Shutdown();
  unlink(sock.c_str());
}
BENCHMARK(BM_ReconcilePlan)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace
}  // namespace gpusched::agent

BENCHMARK_MAIN();
