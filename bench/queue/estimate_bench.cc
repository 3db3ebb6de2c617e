// The estimate refresh at scale (issue goal: 5,000 nodes and 50,000 waiting
// pods within 1 s of CPU on one core): EstimateStarts alone on a cluster of
// HGX H100 nodes about 90 % busy with pods of known runtimes, and the whole
// QueueManager::RefreshEstimates (copies under the mutex, history, the
// simulation) on the same cluster with the pods queued, with all, a tenth or
// none of the namespaces' queues changed since the last refresh. No time budget: the
// whole queue is simulated (to the 7-day horizon). BM_EstimateStarts' third
// argument turns guarantee reclaim and preemption on, with the even
// namespaces guaranteed more than they hold (their heads reclaim) and the
// odd ones borrowing (every priority is equal: preemption is looked for and
// never found, its whole cost).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpusched/util/metrics.h"
#include "scheduler/queue/start_estimator.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::PodBuilder;

constexpr int64_t kNowS = 1000;

struct Scale {
  std::vector<NodeSpec> nodes;
  std::vector<PodRequest> running;
  std::vector<PodRequest> waiting;  // in creation order
};

Scale Make(int nodes, int waiting, int namespaces) {
  std::mt19937 rng(7);
  Scale s;
  const int sizes[] = {1, 2, 4, 8};
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "h" + std::to_string(n);
    s.nodes.push_back(Hgx8H100(node));
    int used = 0;
    for (int i = 0; used < 8; ++i) {
      const int gpus = sizes[rng() % 4];
      if (used + gpus > 8 || rng() % 10 == 0) break;
      PodRequest p = PodBuilder("r" + std::to_string(n) + "-" + std::to_string(i),
                                "ns" + std::to_string(rng() % namespaces))
                         .Gpus(gpus)
                         .OnNode(node, ((DeviceMask{1} << gpus) - 1) << used)
                         .Build();
      p.start_unix = kNowS - static_cast<int64_t>(rng() % 7200);
      p.expected_runtime = std::to_string(600 + rng() % 28800) + "s";
      s.running.push_back(std::move(p));
      used += gpus;
    }
  }
  for (int i = 0; i < waiting; ++i) {
    PodRequest p = PodBuilder("w" + std::to_string(i), "ns" + std::to_string(i % namespaces))
                       .Gpus(sizes[rng() % 4])
                       .Created(i)
                       .Build();
    if (rng() % 2 == 0) p.expected_runtime = std::to_string(300 + rng() % 14400) + "s";
    s.waiting.push_back(std::move(p));
  }
  return s;
}

QueueOptions Options(int namespaces) {
  QueueOptions o;
  o.quotas.enabled = true;
  o.quotas.default_quota.gpus = {0, kUnlimitedGpus};
  for (int i = 0; i < namespaces; ++i) {
    o.quotas.namespaces["ns" + std::to_string(i)].gpus = {0, kUnlimitedGpus};
  }
  return o;
}

void BM_EstimateStarts(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0)), waiting = static_cast<int>(state.range(1));
  const bool reclaim = state.range(2) != 0;
  Scale s = Make(nodes, waiting, 50);
  auto cluster = gpusched::testing::MakeState(s.nodes, s.running);
  auto snapshot = cluster->Snapshot();
  QueueOptions o = Options(50);
  if (reclaim) {  // an even namespace is guaranteed about twice its 1/50 share
    for (int i = 0; i < 50; i += 2) {
      o.quotas.namespaces["ns" + std::to_string(i)].gpus.guaranteed = nodes * 8 / 25;
    }
  }
  QuotaLedger ledger(o.quotas, *snapshot);
  auto fw = std::move(*policy::Framework::Create(ScoringConfig{}));
  StartEstimatorInput in{snapshot.get(), fw.get(), &ledger};
  std::map<std::string, size_t> queue_of;
  for (const PodRequest& p : s.waiting) {
    auto [it, fresh] = queue_of.try_emplace(p.ns, in.queues.size());
    if (fresh) in.queues.push_back({p.ns, {}});
    EstimateUnit u;
    u.members.push_back(std::make_shared<const PodRequest>(p));
    if (!p.expected_runtime.empty()) u.runtime = EstimateRuntime(p, RuntimeHistory{}, kNowS);
    in.queues[it->second].units.push_back(std::move(u));
  }
  in.running_seconds = [](const PodOnNode&) { return int64_t{3600}; };
  in.now_s = kNowS;
  in.reclaim = reclaim;
  in.reclaim_lower_priority_only = false;
  in.preempt = reclaim;
  StartEstimates out;
  for (auto _ : state) {
    out = EstimateStarts(in);
    benchmark::DoNotOptimize(out);
  }
  int64_t estimated = 0;
  for (const auto& [uid, e] : out.by_uid) estimated += e.start_s >= 0 ? 1 : 0;
  state.counters["steps"] = out.steps;
  state.counters["estimated"] = static_cast<double>(estimated);
  state.counters["running"] = static_cast<double>(s.running.size());
  int64_t reclaimed = 0;
  for (const auto& [uid, e] : out.by_uid)
    reclaimed += e.basis.starts_with("after guarantee") ? 1 : 0;
  state.counters["by_reclaim"] = static_cast<double>(reclaimed);
}
BENCHMARK(BM_EstimateStarts)
    ->Args({500, 5000, 0})
    ->Args({500, 5000, 1})
    ->Args({5000, 50000, 0})
    ->Args({5000, 50000, 1})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Seconds the queue mutex was held at `site` so far (the hold histogram's
// sum, gpusched_queue_lock_hold_seconds).
double HeldSeconds(const Metrics& metrics, const std::string& site) {
  const std::string text = metrics.Render();
  const std::string key = "gpusched_queue_lock_hold_seconds_sum{site=\"" + site + "\"} ";
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}

// The whole refresh, after a first one (untimed) copied every namespace:
// before each timed refresh one waiting pod of each of the first `changed`
// namespaces (of 50) changes in place, so only those namespaces' queues are
// copied under the mutex again (the others' copies are reused). Counters:
// the holds of the queue mutex per refresh and the time the copies held it.
void BM_RefreshEstimates(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0)), waiting = static_cast<int>(state.range(1));
  const int changed = static_cast<int>(state.range(2));
  constexpr int kNamespaces = 50;
  Scale s = Make(nodes, waiting, kNamespaces);
  std::vector<PodRequest> all = s.running;
  all.insert(all.end(), s.waiting.begin(), s.waiting.end());
  testing::Harness h(s.nodes, all, Options(kNamespaces));
  Metrics metrics;
  h.metrics = &metrics;
  h.Restart();
  const auto budget = std::chrono::milliseconds(60'000);
  h.queue->RefreshEstimates(budget);
  const int64_t holds_before = h.queue->lock_stats().count.load();
  const double copy_before = HeldSeconds(metrics, "estimate-copy");
  int64_t round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ++round;
    for (int i = 0; i < changed && i < waiting; ++i) {  // s.waiting[i] is in namespace i % 50
      PodRequest p = s.waiting[i];
      p.expected_runtime = std::to_string(600 + round) + "s";
      h.Submit(p);
    }
    state.ResumeTiming();
    h.queue->RefreshEstimates(budget);
  }
  const double holds = static_cast<double>(h.queue->lock_stats().count.load() - holds_before);
  const double refreshes = static_cast<double>(state.iterations());
  state.counters["holds_per_refresh"] = holds / refreshes;
  state.counters["copy_held_ms_per_refresh"] =
      (HeldSeconds(metrics, "estimate-copy") - copy_before) * 1e3 / refreshes;
}
BENCHMARK(BM_RefreshEstimates)
    ->Args({5000, 50000, 50})
    ->Args({5000, 50000, 5})
    ->Args({5000, 50000, 0})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace
}  // namespace gpusched::queue

BENCHMARK_MAIN();
