// The PriorityClasses the replay protocol knows: the ones deploy/ installs
// (deploy/priorityclasses.yaml). In a cluster, Kubernetes' admission turns a
// pod's priorityClassName into spec.priority (and preemptionPolicy), and the
// queue manager orders and preempts by that number; the replay does the
// same for a JSON Jobs workload's "priorityClass".
//
// Callers: scheduler/sim/queue_replay.cc, tests. Pure; thread-safe.
#ifndef GPUSCHED_SIM_PRIORITY_CLASSES_H_
#define GPUSCHED_SIM_PRIORITY_CLASSES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpusched::sim {

struct PriorityClassValue {
  int32_t value = 0;
  bool preempt_never = false;  // preemptionPolicy: Never
};

// "" = no class (priority 0). Unknown names are an error naming the known
// ones, as the API server rejects a pod naming a missing class.
absl::StatusOr<PriorityClassValue> LookupPriorityClass(const std::string& name);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_PRIORITY_CLASSES_H_
