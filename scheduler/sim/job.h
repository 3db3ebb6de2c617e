// A job of the replay protocol's trace: what scheduler/sim/inputs.cc reads
// from the Philly CSV and scheduler/codec/sim_codec reads from a jobs file,
// and scheduler/sim/replay runs. A plain value type in gpusched_sim_types,
// the one library both the simulator and its codec link, so the codec needs
// nothing else of the simulator. Thread-compatible.
#ifndef GPUSCHED_SIM_JOB_H_
#define GPUSCHED_SIM_JOB_H_

#include <cstdint>
#include <string>

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

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_JOB_H_
