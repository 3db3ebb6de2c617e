// BM_QueueInvariantSimulation: the property test's random sequence of
// submit/filter/bind/finish/delete/quota change/preempt/tick/restart with
// every invariant checked after each step; 1,000,000 steps per iteration.
#include <benchmark/benchmark.h>

#include "test/queue/simulation.h"

namespace {

void BM_QueueInvariantSimulation(benchmark::State& state) {
  const int64_t steps = state.range(0);
  uint32_t seed = 100;
  for (auto _ : state) {
    auto r = gpusched::queue::testing::RunSimulation(steps, seed++);
    if (!r.violation.empty()) {
      state.SkipWithError(r.violation.c_str());
      return;
    }
    state.counters["binds"] = static_cast<double>(r.binds);
    state.counters["preemptions"] = static_cast<double>(r.preemptions);
    state.counters["evictions"] = static_cast<double>(r.evictions);
  }
  state.SetItemsProcessed(state.iterations() * steps);
}
BENCHMARK(BM_QueueInvariantSimulation)->Arg(1'000'000)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
