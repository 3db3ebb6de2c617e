// The `gpusched simulate` driver: loads the cluster and workload named by
// the options, runs the chosen protocol (one fgd run, a grid, or a replay)
// and writes result.json / CSV / markdown / HTML. Progress goes to stderr.
//
// Callers: scheduler/cli/simulate.cc. Single call per process; the grid
// uses worker threads internally.
#ifndef GPUSCHED_SIM_DRIVER_H_
#define GPUSCHED_SIM_DRIVER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpusched/core/config.h"
#include "scheduler/sim/extender_mode.h"

namespace gpusched::sim {

struct DriverOptions {
  std::string protocol = "fgd";
  std::string nodes_csv, cluster_json, nodes_spec;
  std::string pods_csv, jobs_csv, jobs_json, vc_nodes;
  std::string policy = "bestfit";
  std::vector<std::string> policies;
  std::vector<std::string> traces;
  std::vector<uint64_t> seeds;
  uint64_t seed = 42;
  double tune = 1.3;
  double load = 1;
  int threads = 2;
  bool grid = false;
  bool progress = true;
  // replay, gpusched: model kube-scheduler's pod backoff (ReplayOptions).
  bool kube_backoff = false;
  // Where results go; the driver writes nowhere else (a grid needs out_dir).
  std::string out, out_dir, html, extender, trace_name;
  // fgd: writes the cluster as a Kubernetes List (for `serve --cluster`);
  // without a workload, that is all the run does.
  std::string write_cluster;
  // topology: the cluster shape (racks:BxRxN or cliques:C[xN]) and the
  // workload's knobs (topo_workload.h); the run's --seed and --load.
  std::string topology;
  int topo_jobs = 400;
  double gang_share = 0.3, required_share = 0.5, span_slowdown = 0.25;
  // The slowdown models every placement runs under ("levels", "span"; one
  // CSV row each) and the levels model's factors ("racks=1.2,...", over the
  // defaults; topo_slowdown.h).
  std::vector<std::string> slowdown_models = {"levels"};
  std::string level_slowdown;
  bool gangs_only = false;
  // topology: gpusched's kube cycle breaks score ties at random (seeded by
  // --seed) instead of by node index.
  bool random_ties = false;
  SchedulerConfig config;
  ExtenderTransport transport;  // for --extender (set by the CLI)
};

absl::Status RunDriver(const DriverOptions& options);

// --protocol topology (scheduler/sim/topo_driver.cc).
absl::Status RunTopologyDriver(const DriverOptions& options);

// The scenario rows every report opens with (protocol, cluster, workload,
// policies, seeds or load, scoring); file names without their folders.
std::vector<std::pair<std::string, std::string>> ScenarioParams(const DriverOptions& options);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_DRIVER_H_
