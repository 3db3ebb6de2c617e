// Simulator inputs: clusters (openb node CSV, a Kubernetes List JSON, a
// generator spec of canonical machines) and workloads (openb pod CSV, the
// Philly job CSV), decoded into the model types. The JSON list of Jobs is
// read by scheduler/codec/sim_codec.h.
//
// Callers: scheduler/sim, the CLI, tests and benchmarks. Pure functions of
// their inputs (file reads only); thread-safe.
#ifndef GPUSCHED_SIM_INPUTS_H_
#define GPUSCHED_SIM_INPUTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"

namespace gpusched::sim {

// A unit of work for the replay protocol: `pods` pods of `gpus_per_pod` GPUs
// each, run together (gang) for `duration` seconds once all are placed.
struct Job {
  std::string id;
  std::string ns;              // virtual cluster / namespace
  std::string priority_class;  // "" = default
  int32_t priority = 0;
  int32_t gpus_per_pod = 1;
  int32_t pods = 1;
  double submit = 0;    // seconds from trace start
  double duration = 0;  // seconds of running time
  bool gang = true;
  int64_t cpu_milli_per_pod = 0;
  int64_t memory_mib_per_pod = 0;
  int32_t total_gpus() const { return gpus_per_pod * pods; }
};

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
