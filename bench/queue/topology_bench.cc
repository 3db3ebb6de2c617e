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
// BM_FailedGangFilters: the same cluster, a gang of 8 x 8 GPUs that
// requires (preferred:0) or prefers (preferred:1) one rack and fits
// nowhere, its 8 members filtered one after another through the extender
// with nothing changing in between (kube-scheduler trying each member of a
// new Job, or retrying one): reuse:1 answers the later filters from the
// failed placement (the default), reuse:0 places the gang afresh on every
// filter (QueueDeps::reuse_failed_placements off). Time per member filter.
// BM_PreferredGangPreemptPlan: the preempt verb's whole-gang plan for a
// gang of 8 x 8 GPUs that prefers one rack, on the same 5,000 nodes (313
// racks of 16, 79 blocks of 64), every GPU taken by lower-priority pods of
// 1-8 GPUs (priorities 0, 10, 50, seeded): arg 0, every rack can be freed,
// so PlanInOneDomain plans all 313 and keeps the cheapest; arg 1, 9 nodes
// of every rack hold a pod the gang may not preempt, so all 313 racks fail
// and it climbs to the 79 blocks; arg 2, the same cluster as arg 0 without
// topology levels (one plan over every node, as before).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
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

// queue_scale --topology's nodes: 5,000, block of 64, rack of 16.
std::vector<NodeSpec> ScaleNodes() {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < kDomains * kPerDomain; ++i) {
    NodeLabels labels = {{kBlock, "block-" + std::to_string(i / 64)},
                         {kRack, "rack-" + std::to_string(i / 16)}};
    std::sort(labels.begin(), labels.end());
    NodeSpec n = ::gpusched::testing::Hgx8H100("h" + std::to_string(i));
    n.labels = std::make_shared<const NodeLabels>(std::move(labels));
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// queue_scale --topology's cluster: ScaleNodes with GPUs 0-6 of every node
// busy.
std::unique_ptr<ClusterState> ScaleCluster() {
  std::vector<PodRequest> pods;
  for (int i = 0; i < kDomains * kPerDomain; ++i) {
    for (int d = 0; d < 7; ++d) {
      pods.push_back(::gpusched::testing::PodBuilder(
                         "run-" + std::to_string(i) + "-" + std::to_string(d), "other")
                         .Gpus(1)
                         .OnNode("h" + std::to_string(i), DeviceMask{1} << d)
                         .Build());
    }
  }
  return ::gpusched::testing::MakeState(ScaleNodes(), pods);
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

void BM_FailedGangFilters(benchmark::State& state) {
  QueueOptions o;
  o.gang.topology_levels = {kBlock, kRack};
  auto cluster = ScaleCluster();
  std::vector<PodRequest> pods;
  for (const NodeInfo* node : cluster->Snapshot()->nodes()) {
    for (const PodOnNode& p : node->pods) pods.push_back(*cluster->FindPod(p.uid));
  }
  testing::Harness h(ScaleNodes(), pods, o);
  h.reuse_failed_placements = state.range(0) == 1;
  h.Restart();
  std::vector<PodRequest> members;
  for (int i = 0; i < 8; ++i) {
    PodRequest m = ::gpusched::testing::PodBuilder("m" + std::to_string(i), "team-a")
                       .Gpus(8)
                       .Gang("g", 8)
                       .Build();
    m.topology_request = {state.range(1) == 0 ? TopologyRule::kRequired : TopologyRule::kPreferred,
                          kRack, 0, kAnnotationTopologyPreferred, ""};
    h.Submit(m);
    members.push_back(std::move(m));
  }
  size_t next = 0;
  for (auto _ : state) {
    std::string reason;
    if (!h.Filter(members[next++ % members.size()], &reason).empty()) {
      state.SkipWithError("the gang should not fit");
      return;
    }
    benchmark::DoNotOptimize(reason);
  }
}
BENCHMARK(BM_FailedGangFilters)
    ->ArgNames({"reuse", "preferred"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMicrosecond);

// 5,000 nodes as ScaleCluster, every GPU held by pods of priority 0-50;
// with `pinned`, nodes 0-8 of every rack of 16 hold a 1-GPU pod of
// priority 1000 instead of one low-priority GPU.
std::vector<PodRequest> FullOfVictims(bool pinned) {
  static constexpr int kMixes[][4] = {
      {8, 0, 0, 0}, {4, 4, 0, 0}, {4, 2, 2, 0}, {2, 2, 2, 2}, {4, 2, 1, 1}};
  static constexpr int kLow[] = {0, 10, 50};
  std::mt19937 rng(42);
  std::vector<PodRequest> pods;
  for (int i = 0; i < kDomains * kPerDomain; ++i) {
    const std::string node = "h" + std::to_string(i);
    std::vector<std::pair<int, int32_t>> sizes;  // (GPUs, priority)
    if (pinned && i % 16 < 9) {
      sizes = {{1, 1000}, {4, kLow[rng() % 3]}, {2, kLow[rng() % 3]}, {1, kLow[rng() % 3]}};
    } else {
      for (int g : kMixes[rng() % 5]) {
        if (g > 0) sizes.emplace_back(g, kLow[rng() % 3]);
      }
    }
    int first = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const auto [gpus, priority] = sizes[k];
      const DeviceMask mask = ((DeviceMask{1} << gpus) - 1) << first;
      first += gpus;
      pods.push_back(::gpusched::testing::PodBuilder(node + "-p" + std::to_string(k), "batch")
                         .Gpus(gpus)
                         .OnNode(node, mask)
                         .Priority(priority)
                         .Build());
    }
  }
  return pods;
}

void BM_PreferredGangPreemptPlan(benchmark::State& state) {
  QueueOptions o;
  if (state.range(0) != 2) o.gang.topology_levels = {kBlock, kRack};
  o.gang_plan_ms = 0;  // every call plans afresh
  testing::Harness h(ScaleNodes(), FullOfVictims(state.range(0) == 1), o);
  h.capture_log = true;
  PodRequest member =
      ::gpusched::testing::PodBuilder("m0", "team-a").Gpus(8).Priority(100).Gang("g", 8).Build();
  member.topology_request = {TopologyRule::kPreferred, kRack, 0, kAnnotationTopologyPreferred, ""};
  if (!h.Filter(member).empty()) {
    state.SkipWithError("the gang should not fit as is");
    return;
  }
  PreemptionArgs args;
  args.pod = member;
  for (const NodeInfo* node : h.state().Snapshot()->nodes()) {
    PreemptionArgs::Candidate c{node->name, {}, 0};
    for (const PodOnNode& p : node->pods) {
      if (p.priority < member.priority) c.victim_uids.push_back(p.uid);
    }
    if (!c.victim_uids.empty()) args.candidates.push_back(std::move(c));
  }
  const char* want[] = {"free one cloud.provider.com/topology-rack",
                        "free one cloud.provider.com/topology-block", ""};
  for (auto _ : state) {
    const PreemptionOutcome out = h.service->Preempt(args);
    state.PauseTiming();
    const std::string log = h.log.empty() ? "" : h.log.back();
    h.log.clear();
    if (out.nodes.empty() || log.find(want[state.range(0)]) == std::string::npos) {
      state.SkipWithError(("no plan as expected: " + log).c_str());
      return;
    }
    state.ResumeTiming();
  }
}
BENCHMARK(BM_PreferredGangPreemptPlan)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace
}  // namespace gpusched::queue

BENCHMARK_MAIN();
