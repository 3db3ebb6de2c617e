// The pure pipeline on a synthetic cluster (mixed DGX-1 V100 / DGX A100 /
// HGX H100 / 4xT4, about half the GPUs in use): filter, prioritize, the whole
// decode+filter+encode path of one request, device-set choice, and the
// precomputed topology tables.
#include <benchmark/benchmark.h>

#include "gpusched/core/extender_service.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/extender_codec.h"
#include "test/testing/builders.h"

namespace gpusched {
namespace {

// Labels every node with a block (128 nodes) and a rack (16 nodes).
void LabelRacks(std::vector<NodeSpec>* nodes) {
  for (size_t i = 0; i < nodes->size(); ++i) {
    NodeLabels labels = {{"cloud.provider.com/topology-block", StrCat("b", i / 128)},
                         {"cloud.provider.com/topology-rack", StrCat("r", i / 16)},
                         {"kubernetes.io/hostname", (*nodes)[i].name}};
    (*nodes)[i].labels = std::make_shared<const NodeLabels>(std::move(labels));
  }
}

struct Fixture {
  // `scoring` with levels: the nodes carry them (LabelRacks).
  explicit Fixture(int nodes, const ScoringConfig& scoring = ScoringConfig{}) {
    std::string cluster = testing::SyntheticClusterJson(nodes, 7);
    codec::RequestDecoder d(256);
    auto objs = d.DecodeClusterList(cluster);
    if (!scoring.topology_levels.empty()) LabelRacks(&objs->nodes);
    state = std::make_unique<ClusterState>(testing::ShippedTemplates());
    state->Reset(std::move(objs->nodes), std::move(objs->pods));
    state->Commit();
    service = std::make_unique<ExtenderService>(state.get(), *policy::Framework::Create(scoring));
    service->SetReady(true);
    body = testing::SyntheticFilterRequest(nodes, 4);
  }
  std::unique_ptr<ClusterState> state;
  std::unique_ptr<ExtenderService> service;
  std::string body;
};

void BM_Filter(benchmark::State& st) {
  Fixture f(static_cast<int>(st.range(0)));
  codec::RequestDecoder d;
  std::string body = f.body;
  auto args = d.DecodeExtenderArgs(body);
  for (auto _ : st) benchmark::DoNotOptimize(f.service->Filter(*args));
  st.SetItemsProcessed(st.iterations() * st.range(0));
}
BENCHMARK(BM_Filter)->Arg(500)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);

void BM_Prioritize(benchmark::State& st) {
  Fixture f(static_cast<int>(st.range(0)));
  codec::RequestDecoder d;
  std::string body = f.body;
  auto args = d.DecodeExtenderArgs(body);
  for (auto _ : st) benchmark::DoNotOptimize(f.service->Prioritize(*args));
  st.SetItemsProcessed(st.iterations() * st.range(0));
}
BENCHMARK(BM_Prioritize)->Arg(500)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);

// Decode + filter + encode + decode + prioritize + encode: one scheduling cycle
// as the HTTP handlers run it, without sockets.
void BM_FilterPrioritizeCycle(benchmark::State& st) {
  Fixture f(static_cast<int>(st.range(0)));
  codec::RequestDecoder d;
  for (auto _ : st) {
    std::string body = f.body;
    auto args = d.DecodeExtenderArgs(body);
    benchmark::DoNotOptimize(codec::EncodeFilterResult(*args, f.service->Filter(*args)));
    std::string body2 = f.body;
    auto args2 = d.DecodeExtenderArgs(body2);
    benchmark::DoNotOptimize(codec::EncodePrioritizeResult(*args2, f.service->Prioritize(*args2)));
  }
}
BENCHMARK(BM_FilterPrioritizeCycle)->Arg(500)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);

// The shipped scoring (GpuTopology 10, FragLookahead 90) on nodes labelled
// with blocks and racks; range(1) = 1 adds DomainFit (policy/domain_fit.h)
// by both levels at the measured weight (30): its cost is the difference. Filter
// does not run scorers; prioritize builds the per-domain figures once per
// request and looks each node's score up.
ScoringConfig ShippedScoring(bool domain_fit) {
  ScoringConfig s;
  s.scorers = {{"GpuTopology", 10, {}}, {"FragLookahead", 90, {}}};
  s.topology_levels = {"cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"};
  s.domain_weight = domain_fit ? policy::kMeasuredDomainWeight : 0;
  return s;
}

void BM_PrioritizeDomainFit(benchmark::State& st) {
  Fixture f(static_cast<int>(st.range(0)), ShippedScoring(st.range(1) != 0));
  codec::RequestDecoder d;
  std::string body = f.body;
  auto args = d.DecodeExtenderArgs(body);
  for (auto _ : st) benchmark::DoNotOptimize(f.service->Prioritize(*args));
  st.SetItemsProcessed(st.iterations() * st.range(0));
}
BENCHMARK(BM_PrioritizeDomainFit)
    ->Args({5000, 0})
    ->Args({5000, 1})
    ->Args({20000, 0})
    ->Args({20000, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_FilterDomainFit(benchmark::State& st) {
  Fixture f(static_cast<int>(st.range(0)), ShippedScoring(st.range(1) != 0));
  codec::RequestDecoder d;
  std::string body = f.body;
  auto args = d.DecodeExtenderArgs(body);
  for (auto _ : st) benchmark::DoNotOptimize(f.service->Filter(*args));
  st.SetItemsProcessed(st.iterations() * st.range(0));
}
BENCHMARK(BM_FilterDomainFit)->Args({5000, 0})->Args({5000, 1})->Unit(benchmark::kMicrosecond);

void BM_TopologyChoose(benchmark::State& st) {
  auto t = *GpuTopology::FromCodes(testing::Dgx1V100Codes());
  DeviceMask free = 0;
  for (auto _ : st) {
    free = (free * 37 + 11) & 0xff;
    benchmark::DoNotOptimize(t->Choose(free, 4, false));
  }
}
BENCHMARK(BM_TopologyChoose);

void BM_TopologyTableBuild(benchmark::State& st) {
  auto codes = testing::Dgx1V100Codes();
  for (auto _ : st) benchmark::DoNotOptimize(GpuTopology::FromCodes(codes));
}
BENCHMARK(BM_TopologyTableBuild)->Unit(benchmark::kMicrosecond);

void BM_SnapshotPublishAfterBind(benchmark::State& st) {
  Fixture f(5000);
  int i = 0;
  for (auto _ : st) {
    PodRequest p = testing::PodBuilder("p" + std::to_string(i++)).Gpus(1).Build();
    f.state->UpsertPod(p);
    benchmark::DoNotOptimize(f.state->Commit());
    f.state->RemovePod(p.uid);
  }
}
BENCHMARK(BM_SnapshotPublishAfterBind)->Unit(benchmark::kMicrosecond);

// Publishing after a bind onto a node and after its release (two patched
// snapshots), while the previous snapshots stay referenced as the queue's
// usage index and in-flight requests keep them.
void BM_SnapshotPatchAfterAssume(benchmark::State& st) {
  Fixture f(static_cast<int>(st.range(0)));
  const auto& nodes = f.state->Snapshot()->nodes();
  std::vector<std::string> free_on;
  for (const NodeInfo* n : nodes) {
    if (n->whole_free != 0) free_on.push_back(n->name);
  }
  std::vector<std::shared_ptr<const ClusterSnapshot>> kept(8);
  int i = 0;
  for (auto _ : st) {
    const std::string& node = free_on[i % free_on.size()];
    const NodeInfo* n = f.state->Snapshot()->Find(node);
    const DeviceMask device = n->whole_free & (~n->whole_free + 1);
    PodRequest p = testing::PodBuilder("p" + std::to_string(i)).Gpus(1).Build();
    if (!f.state->Assume(p, node, device).ok()) st.SkipWithError("assume failed");
    kept[i % kept.size()] = f.state->Snapshot();
    f.state->RemovePod(p.uid);
    kept[(i + 4) % kept.size()] = f.state->Commit();
    ++i;
  }
}
BENCHMARK(BM_SnapshotPatchAfterAssume)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);

void BM_CacheBytesPerNode(benchmark::State& st) {
  Fixture f(5000);
  size_t bytes = 0;
  for (auto _ : st) {
    bytes = 0;
    for (const auto& n : f.state->Snapshot()->nodes()) bytes += n->MemoryBytes();
  }
  st.counters["bytes_per_node"] = static_cast<double>(bytes) / 5000.0;
}
BENCHMARK(BM_CacheBytesPerNode)->Iterations(1);

}  // namespace
}  // namespace gpusched

namespace gpusched {
namespace {
void BM_SnapshotFind(benchmark::State& st) {
  Fixture f(static_cast<int>(st.range(0)));
  codec::RequestDecoder d;
  std::string body = f.body;
  auto args = d.DecodeExtenderArgs(body);
  auto snap = f.state->Snapshot();
  for (auto _ : st) {
    int64_t sum = 0;
    for (auto name : args->node_names) sum += snap->Find(name)->gpu_count;
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_SnapshotFind)->Arg(5000)->Unit(benchmark::kMicrosecond);
}  // namespace
}  // namespace gpusched

BENCHMARK_MAIN();
