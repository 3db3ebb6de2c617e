#include "test/testing/builders.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "gpusched/util/strings.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/extender_codec.h"

namespace gpusched::testing {
namespace {

NodeSpec Gpu(const std::string& name, const char* product, int64_t mem, int count) {
  NodeSpec s;
  s.name = name;
  s.product = product;
  s.gpu_memory_mib = mem;
  s.gpu_count = count;
  s.gpu_allocatable = count;
  s.cpu_milli = 96000;
  s.memory_mib = 1024 * 1024;
  return s;
}

}  // namespace

NodeSpec Dgx1V100(const std::string& name) { return Gpu(name, kV100, 32510, 8); }
NodeSpec DgxA100(const std::string& name) { return Gpu(name, kA100, 81920, 8); }
NodeSpec Hgx8H100(const std::string& name) { return Gpu(name, kH100, 81559, 8); }

NodeSpec Hgx8H100InRack(const std::string& name, const std::string& rack,
                        const std::string& block) {
  NodeSpec n = Hgx8H100(name);
  NodeLabels labels;
  if (!block.empty()) labels.emplace_back(kBlockLabel, block);
  if (!rack.empty()) labels.emplace_back(kRackLabel, rack);
  std::sort(labels.begin(), labels.end());
  n.labels = std::make_shared<const NodeLabels>(std::move(labels));
  return n;
}
NodeSpec Pcie4xT4(const std::string& name) { return Gpu(name, kT4, 15360, 4); }
NodeSpec CpuOnly(const std::string& name) {
  NodeSpec s;
  s.name = name;
  s.cpu_milli = 64000;
  s.memory_mib = 256 * 1024;
  return s;
}

std::vector<std::vector<std::string>> Dgx1V100Codes() {
  return {{"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"},
          {"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
          {"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"},
          {"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
          {"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"},
          {"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
          {"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"},
          {"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"}};
}

std::vector<TopologyTemplate> ShippedTemplates() {
  auto c = codec::DecodeConfig(ReadSourceFile("config/scheduler-policy.json"));
  if (!c.ok()) return {};
  return c->topology_templates;
}

std::string ReadSourceFile(const std::string& relative_path) {
  std::ifstream in(std::string(GPUSCHED_TESTING_SOURCE_DIR) + "/" + relative_path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<ClusterState> DemoClusterState() {
  codec::RequestDecoder decoder(256);
  std::string body = ReadSourceFile("config/demo-cluster.json");
  auto objs = decoder.DecodeClusterList(body);
  if (!objs.ok()) return nullptr;
  auto state = std::make_unique<ClusterState>(ShippedTemplates());
  state->Reset(objs->nodes, objs->pods);
  state->Commit();
  return state;
}

PodBuilder::PodBuilder(std::string name, std::string ns) {
  pod_.name = std::move(name);
  pod_.ns = std::move(ns);
  pod_.uid = "uid-" + pod_.ns + "-" + pod_.name;
}
PodBuilder& PodBuilder::Gpus(int n) {
  pod_.gpu.count = n;
  return *this;
}
PodBuilder& PodBuilder::Milli(int milli) {
  pod_.gpu.milli_per_gpu = milli;
  return *this;
}
PodBuilder& PodBuilder::Models(std::vector<std::string> m) {
  pod_.gpu.models = std::move(m);
  return *this;
}
PodBuilder& PodBuilder::MemoryMiB(int64_t mib) {
  pod_.gpu.min_memory_mib = mib;
  return *this;
}
PodBuilder& PodBuilder::Topology(TopologyMode mode) {
  pod_.gpu.topology = mode;
  return *this;
}
PodBuilder& PodBuilder::Priority(int32_t p) {
  pod_.priority = p;
  return *this;
}
PodBuilder& PodBuilder::OnNode(std::string node, DeviceMask ids) {
  pod_.node_name = std::move(node);
  pod_.phase = PodPhase::kRunning;
  pod_.has_gpu_ids = true;
  pod_.gpu_ids = ids;
  return *this;
}
PodBuilder& PodBuilder::OnNodeUnknownIds(std::string node) {
  pod_.node_name = std::move(node);
  pod_.phase = PodPhase::kRunning;
  pod_.has_gpu_ids = false;
  return *this;
}
PodBuilder& PodBuilder::Phase(PodPhase phase) {
  pod_.phase = phase;
  return *this;
}
PodBuilder& PodBuilder::Created(int64_t t) {
  pod_.creation_unix = t;
  pod_.start_unix = t;
  return *this;
}
PodBuilder& PodBuilder::Gang(std::string gang, int size) {
  pod_.gang = std::move(gang);
  pod_.gang_size = size;
  return *this;
}

std::unique_ptr<ClusterState> MakeState(std::vector<NodeSpec> nodes, std::vector<PodRequest> pods) {
  auto state = std::make_unique<ClusterState>(ShippedTemplates());
  state->Reset(std::move(nodes), std::move(pods));
  state->Commit();
  return state;
}

DeviceMask Devices(std::initializer_list<int> ids) {
  DeviceMask m = 0;
  for (int i : ids) m |= DeviceMask{1} << i;
  return m;
}

std::string SyntheticNodeName(int i) { return StrCat("gpu-node-", 100000 + i); }

std::string SyntheticClusterJson(int nodes, uint32_t seed) {
  std::mt19937 rng(seed);
  struct Machine {
    const char* product;
    int mem;
    int gpus;
  };
  const Machine machines[] = {
      {kV100, 32510, 8}, {kA100, 81920, 8}, {kH100, 81559, 8}, {kT4, 15360, 4}};
  std::string out = "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[";
  for (int i = 0; i < nodes; ++i) {
    const Machine& m = machines[i % 4];
    const std::string name = SyntheticNodeName(i);
    StrAppend(&out, i ? "," : "", "{\"kind\":\"Node\",\"metadata\":{\"name\":\"", name,
              "\",\"labels\":{\"kubernetes.io/hostname\":\"", name,
              "\",\"nvidia.com/gpu.product\":\"", m.product, "\",\"nvidia.com/gpu.memory\":\"",
              m.mem, "\",\"nvidia.com/gpu.count\":\"", m.gpus,
              "\"}},\"status\":{\"allocatable\":{\"cpu\":\"95\",\"memory\":\"1000Gi\",\"nvidia.com/"
              "gpu\":\"",
              m.gpus, "\"},\"capacity\":{\"nvidia.com/gpu\":\"", m.gpus, "\"}}}");
  }
  for (int i = 0; i < nodes; ++i) {
    const Machine& m = machines[i % 4];
    int used = static_cast<int>(rng() % (m.gpus + 1));
    if (used == 0) continue;
    std::string ids;
    for (int d = 0; d < used; ++d) StrAppend(&ids, d ? "," : "", d);
    StrAppend(&out, ",{\"kind\":\"Pod\",\"metadata\":{\"name\":\"job-", i,
              "\",\"namespace\":\"team-", i % 7, "\",\"uid\":\"uid-job-", i,
              "\",\"annotations\":{\"gpusched.io/gpu-ids\":\"", ids,
              "\"}},\"spec\":{\"nodeName\":\"", SyntheticNodeName(i),
              "\",\"priority\":1000,\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
              "\"nvidia.com/gpu\":\"",
              used, "\"}}}]},\"status\":{\"phase\":\"Running\"}}");
  }
  out += "]}";
  return out;
}

std::string SyntheticFilterRequest(int names, int gpus) {
  std::string out = StrCat(
      "{\"Pod\":{\"metadata\":{\"name\":\"bench-pod\",\"namespace\":\"team-a\",\"uid\":\"uid-"
      "bench\","
      "\"creationTimestamp\":\"2026-11-02T10:15:02Z\",\"annotations\":{}},\"spec\":{\"containers\":"
      "[{"
      "\"name\":\"trainer\",\"resources\":{\"limits\":{\"cpu\":\"32\",\"memory\":\"256Gi\","
      "\"nvidia.com/gpu\":\"",
      gpus, "\"},\"requests\":{\"cpu\":\"32\",\"memory\":\"256Gi\",\"nvidia.com/gpu\":\"", gpus,
      "\"}}}],\"priority\":100000,\"priorityClassName\":\"training-high\"},\"status\":{\"phase\":"
      "\"Pending\"}},\"Nodes\":null,\"NodeNames\":[");
  for (int i = 0; i < names; ++i) StrAppend(&out, i ? "," : "", "\"", SyntheticNodeName(i), "\"");
  out += "]}";
  return out;
}

std::vector<std::string> ReservationHolders(const ClusterState& state) {
  std::vector<std::string> out;
  for (const auto& node : state.Snapshot()->nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (p.reservation) out.push_back(p.uid);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpusched::testing
