// Simulator speed: one fgd-protocol run of openb default per policy, and a
// replay of the Philly trace. Skipped (no iterations) without the traces.
#include <benchmark/benchmark.h>

#include "scheduler/sim/fgd_protocol.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/replay.h"

namespace gpusched::sim {
namespace {

const std::string kDir = std::string(GPUSCHED_SHARED_DIR) + "/traces/";

void BM_FgdRun(benchmark::State& state, const char* policy) {
  auto nodes = ReadFile(kDir + "openb/openb_node_list_gpu_node.csv");
  auto pods = ReadFile(kDir + "openb/openb_pod_list_default.csv");
  if (!nodes.ok() || !pods.ok()) {
    state.SkipWithError("openb traces absent");
    return;
  }
  auto cluster = SimCluster::Create(*ParseOpenbNodes(*nodes), {});
  auto trace = ParseOpenbPods(*pods);
  FgdOptions o;
  o.policy = policy;
  for (auto _ : state) {
    auto r = RunFgd(*cluster, *trace, SchedulerConfig{}, o);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK_CAPTURE(BM_FgdRun, random, "random")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FgdRun, bestfit, "bestfit")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FgdRun, fgd, "fgd")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FgdRun, gpusched, "gpusched")->Unit(benchmark::kMillisecond);

void BM_Replay(benchmark::State& state, const char* policy) {
  auto jobs_text = ReadFile(kDir + "philly/philly_jobs_pollux.csv");
  auto vc_text = ReadFile(kDir + "philly/helios_qssf_philly_vc_nodes.csv");
  if (!jobs_text.ok() || !vc_text.ok()) {
    state.SkipWithError("philly traces absent");
    return;
  }
  auto pools = ParseVcNodes(*vc_text);
  std::vector<std::string> vcs;
  for (const auto& [v, n] : *pools) vcs.push_back(v);
  auto jobs = ParsePhillyJobs(*jobs_text, vcs);
  ReplayOptions o;
  o.policy = policy;
  o.load = 4;
  for (auto _ : state) benchmark::DoNotOptimize(RunReplay(*jobs, *pools, o));
}
BENCHMARK_CAPTURE(BM_Replay, srtf_x4, "srtf")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Replay, gpusched_x4, "gpusched")->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace gpusched::sim

BENCHMARK_MAIN();
