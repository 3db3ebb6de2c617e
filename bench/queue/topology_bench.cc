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
//
// The domains per request, before and after their cache (one run compares
// both): BM_DomainsAtPerRequest recomputes the grouping of 5,000 nodes by
// one label, as every gang placement did; BM_CachedDomainsAtPerRequest
// reads it from the snapshot's labels epoch, as it does now.
// BM_TopologyNoRoomPlacement: the queue-scale shape (bench/queue/
// queue_scale --topology): 5,000 nodes in blocks of 64 and racks of 16, 7 of
// 8 GPUs busy on each, and a gang of 8 x 8 GPUs that requires (arg 0) or
// prefers (arg 1) one rack and fits nowhere: what each of its filters
// spends on the placement that fails.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
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

void BM_DomainsAtPerRequest(benchmark::State& state) {
  auto cluster = ::gpusched::testing::MakeState(Nodes(), Busy());
  const auto snapshot = cluster->Snapshot();
  for (auto _ : state) {
    TopologyDomains d = DomainsAt(*snapshot, kClique);
    if (d.names.size() != kDomains) state.SkipWithError("wrong domains");
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_DomainsAtPerRequest)->Unit(benchmark::kMicrosecond);

void BM_CachedDomainsAtPerRequest(benchmark::State& state) {
  auto cluster = ::gpusched::testing::MakeState(Nodes(), Busy());
  const auto snapshot = cluster->Snapshot();
  for (auto _ : state) {
    auto d = CachedDomainsAt(*snapshot, kClique);
    if (d->names.size() != kDomains) state.SkipWithError("wrong domains");
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_CachedDomainsAtPerRequest)->Unit(benchmark::kMicrosecond);

constexpr char kBlock[] = "cloud.provider.com/topology-block";
constexpr char kRack[] = "cloud.provider.com/topology-rack";

// queue_scale --topology's cluster: 5,000 nodes, block of 64, rack of 16,
// GPUs 0-6 of every node busy.
std::unique_ptr<ClusterState> ScaleCluster() {
  std::vector<NodeSpec> nodes;
  std::vector<PodRequest> pods;
  for (int i = 0; i < kDomains * kPerDomain; ++i) {
    NodeLabels labels = {{kBlock, "block-" + std::to_string(i / 64)},
                         {kRack, "rack-" + std::to_string(i / 16)}};
    std::sort(labels.begin(), labels.end());
    NodeSpec n = ::gpusched::testing::Hgx8H100("h" + std::to_string(i));
    n.labels = std::make_shared<const NodeLabels>(std::move(labels));
    nodes.push_back(std::move(n));
    for (int d = 0; d < 7; ++d) {
      pods.push_back(::gpusched::testing::PodBuilder(
                         "run-" + std::to_string(i) + "-" + std::to_string(d), "other")
                         .Gpus(1)
                         .OnNode("h" + std::to_string(i), DeviceMask{1} << d)
                         .Build());
    }
  }
  return ::gpusched::testing::MakeState(nodes, pods);
}

void BM_TopologyNoRoomPlacement(benchmark::State& state) {
  auto cluster = ScaleCluster();
  const auto snapshot = cluster->Snapshot();
  auto fw = policy::Framework::Create(ScoringConfig{});
  PodRequest member = ::gpusched::testing::PodBuilder("m0", "team-a").Gpus(8).Gang("g", 8).Build();
  const TopologyRule rule =
      state.range(0) == 0 ? TopologyRule::kRequired : TopologyRule::kPreferred;
  member.topology_request = {rule, kRack, 0, "bench", ""};
  const ResolvedTopology topology = ResolveTopology(member, {kBlock, kRack});
  const QuotaConfig no_quotas;
  const QuotaLedger ledger(no_quotas, *snapshot);
  for (auto _ : state) {
    TopologyPlacement p =
        PlaceInDomains(*snapshot, **fw, member, ledger, 8, /*by_scan=*/false, topology);
    if (!p.picks.empty()) state.SkipWithError("the gang should not fit");
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_TopologyNoRoomPlacement)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpusched::queue

BENCHMARK_MAIN();
