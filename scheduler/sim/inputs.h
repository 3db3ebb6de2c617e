// Simulator inputs: clusters (openb node CSV, a Kubernetes List JSON, a
// generator spec of canonical machines) and workloads (openb pod CSV, the
// Philly job CSV), decoded into the model types. The JSON list of Jobs is
// read by scheduler/codec/sim_codec.h.
//
// Callers: scheduler/sim, the CLI, tests and benchmarks. Pure functions of
// their inputs (file reads only); thread-safe.
#ifndef GPUSCHED_SIM_INPUTS_H_
#define GPUSCHED_SIM_INPUTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"
#include "scheduler/sim/job.h"

namespace gpusched::sim {

absl::StatusOr<std::string> ReadFile(const std::string& path);

// openb_node_list_*.csv: sn,cpu_milli,memory_mib,gpu,model.
absl::StatusOr<std::vector<NodeSpec>> ParseOpenbNodes(std::string_view csv);
// openb_pod_list_*.csv: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...].
absl::StatusOr<std::vector<PodRequest>> ParseOpenbPods(std::string_view csv);
// A Kubernetes List (as for serve --cluster): the nodes only.
absl::StatusOr<std::vector<NodeSpec>> ParseClusterList(std::string json);
// "dgx-a100:100,dgx1-v100:50,t4x4:200" (also dgx-h100, dgx1-p100, a10x1,
// p100x2; NAME:COUNT). Node products match the config's topology templates.
absl::StatusOr<std::vector<NodeSpec>> GenerateNodes(std::string_view spec);

// philly_jobs_pollux.csv (timestamp,duration,num_gpus,gpu_time,cluster):
// jobs with num_gpus > 0 in `vcs` (all if empty); t0 = first such job at or
// after 2017-10-01 00:00; kept if 0 <= submit - t0 <= window_seconds.
absl::StatusOr<std::vector<Job>> ParsePhillyJobs(std::string_view csv,
                                                 const std::vector<std::string>& vcs,
                                                 double window_seconds = 5270340);
// helios_qssf_philly_vc_nodes.csv: vc,node num.
absl::StatusOr<std::vector<std::pair<std::string, int>>> ParseVcNodes(std::string_view csv);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_INPUTS_H_
