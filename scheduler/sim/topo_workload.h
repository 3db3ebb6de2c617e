// The training-job workload of the topology comparison, derived from the
// Philly trace (the slowdown models are in topo_slowdown.h).
//
// Workload: job shapes and durations are drawn (seeded) from Philly jobs:
// with probability `gang_share` from the jobs larger than a node (they
// become gangs of node-sized members: 16 GPUs on 8-GPU nodes = 2 x 8),
// otherwise from the jobs that fit a node (single pods). Arrivals keep the
// gaps between consecutive Philly submissions from a seeded starting point,
// scaled so that the offered load (GPU-seconds asked / capacity x arrival
// span) is `load`. Each gang names the smallest level whose domain can
// hold it (rack, else block; clique): it requires that level with
// probability `required_share` and prefers it otherwise; a gang larger
// than every domain of the top level prefers the top level.
//
// Callers: scheduler/sim (topology comparison), tests. Pure functions;
// thread-safe.
#ifndef GPUSCHED_SIM_TOPO_WORKLOAD_H_
#define GPUSCHED_SIM_TOPO_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/sim/job.h"
#include "scheduler/sim/topo_cluster.h"

namespace gpusched::sim {

struct TopoJob {
  std::string id;
  double submit = 0;
  double duration = 0;  // running time when placed in one domain
  int32_t pods = 1, gpus_per_pod = 1;
  bool gang = false;
  // The level's label key (gangs only): required, or preferred.
  std::string level;
  bool required = false;
  int64_t gpus() const { return int64_t{pods} * gpus_per_pod; }
};

struct TopoWorkloadOptions {
  uint64_t seed = 1;
  int jobs = 400;
  double load = 0.8;
  double gang_share = 0.3;
  double required_share = 0.5;
  double min_duration = 60;     // shorter Philly jobs are lengthened to this
  double max_duration = 86400;  // longer ones are cut to this
};

absl::StatusOr<std::vector<TopoJob>> MakeTopoWorkload(const std::vector<Job>& philly,
                                                      const TopoCluster& cluster,
                                                      const TopoWorkloadOptions& options);

// The same workload without its single pods (gangs keep their arrivals).
std::vector<TopoJob> GangsOnly(const std::vector<TopoJob>& jobs);

// Default s of the span slowdown model (topo_slowdown.h; docs/simulator.md
// for its source).
inline constexpr double kDefaultSpanSlowdown = 0.25;

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_TOPO_WORKLOAD_H_
