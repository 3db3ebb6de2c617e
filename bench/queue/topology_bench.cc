// Topology-aware gang placement at scale (README "Topology-aware gangs"):
// a 64-member gang (8 GPUs each) that requires one nvidia.com/gpu.clique, on
// 5,000 HGX H100 nodes in 50 cliques of 100. Clique d has 40 + d whole free
// nodes (the rest full), so 26 cliques can hold the gang and best fit must
// find clique 24.
//
// BM_TopologyGangPlacement: the placement alone (domains from the labels,
// room per domain, best-fit order, the members placed inside the chosen
// clique), as the reservation runs it without the queue mutex.
// BM_TopologyGangReserve: the whole decision through the extender: a
// member's filter request that admits the gang, places it and commits the
// 64 reservation holders.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "gpusched/model/topology_domains.h"
#include "scheduler/queue/domain_placement.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

constexpr char kClique[] = "nvidia.com/gpu.clique";
constexpr int kDomains = 50;
constexpr int kPerDomain = 100;
constexpr int kMembers = 64;

std::vector<NodeSpec> Nodes() {
  std::vector<NodeSpec> out;
  for (int d = 0; d < kDomains; ++d) {
    auto labels =
        std::make_shared<const NodeLabels>(NodeLabels{{kClique, "clique-" + std::to_string(d)}});
    for (int i = 0; i < kPerDomain; ++i) {
      NodeSpec n = ::gpusched::testing::Hgx8H100("n" + std::to_string(d * kPerDomain + i));
      n.labels = labels;
      out.push_back(std::move(n));
    }
  }
  return out;
}

std::vector<PodRequest> Busy() {
  std::vector<PodRequest> out;
  for (int d = 0; d < kDomains; ++d) {
    for (int i = 40 + d; i < kPerDomain; ++i) {
      const std::string node = "n" + std::to_string(d * kPerDomain + i);
      out.push_back(::gpusched::testing::PodBuilder("busy-" + node, "other")
                        .Gpus(8)
                        .OnNode(node, 0xff)
                        .Build());
    }
  }
  return out;
}

PodRequest Member(const std::string& name) {
  PodRequest p =
      ::gpusched::testing::PodBuilder(name, "team-a").Gpus(8).Gang("g", kMembers).Build();
  p.topology_request = {TopologyRule::kRequired, kClique, 0, kAnnotationTopologyRequired, ""};
  return p;
}

void BM_TopologyGangPlacement(benchmark::State& state) {
  auto cluster = ::gpusched::testing::MakeState(Nodes(), Busy());
  const auto snapshot = cluster->Snapshot();
  auto fw = policy::Framework::Create(ScoringConfig{});
  const PodRequest member = Member("m0");
  const QuotaConfig no_quotas;  // the ledger keeps a reference
  const QuotaLedger ledger(no_quotas, *snapshot);
  const ResolvedTopology topology{TopologyRule::kRequired, kClique, "", ""};
  for (auto _ : state) {
    TopologyPlacement p =
        PlaceInDomains(*snapshot, **fw, member, ledger, kMembers, /*by_scan=*/false, topology);
    if (p.picks.size() != kMembers || p.domain != "clique-24") {
      state.SkipWithError(("placed " + std::to_string(p.picks.size()) + " in " + p.domain).c_str());
      return;
    }
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_TopologyGangPlacement)->Unit(benchmark::kMillisecond);

void BM_TopologyGangReserve(benchmark::State& state) {
  QueueOptions o;
  o.gang.topology_levels = {kClique};
  testing::Harness h(Nodes(), Busy(), o);
  const PodRequest member = Member("m0");
  for (auto _ : state) {
    std::string reason;
    const auto nodes = h.Filter(member, &reason);
    if (nodes.size() != 1) {
      state.SkipWithError(reason.c_str());
      return;
    }
    state.PauseTiming();
    h.now_ms += int64_t{o.gang.reservation_seconds} * 1000 + 1;  // the reservation expires
    h.queue->Tick();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_TopologyGangReserve)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusched::queue

BENCHMARK_MAIN();
