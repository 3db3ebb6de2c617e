// KubeCycle: the kube-scheduler side of the replay protocol's gpusched
// policy. One scheduling cycle for one pod, against the same
// ExtenderService (filter, prioritize, bind, preempt verbs) that serve puts
// behind HTTP, with its QueueManager installed as the gate:
//  1. filter with every node name (nodeCacheCapable form);
//  2. prioritize the passing nodes; the highest score wins (ties: lowest
//     node index, so runs are deterministic; or, with a tie seed, one of
//     the tied nodes drawn uniformly as kube-scheduler's selectHost does,
//     from a generator seeded once per run); bind;
//  3. if no node passed, PostFilter as kube-scheduler's DefaultPreemption
//     does: a dry run per node that did not fail unresolvably (remove every
//     lower-priority pod, reprieve the most important ones while the pod
//     still fits by GPU count), then the preempt verb, which keeps only the
//     victims gpusched agrees to; the node with the least important victims
//     is chosen. The caller evicts them and retries the pod.
//
// Callers: scheduler/sim/queue_replay.cc. Not thread-safe; one per run.
#ifndef GPUSCHED_SIM_KUBE_CYCLE_H_
#define GPUSCHED_SIM_KUBE_CYCLE_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/core/cluster_state.h"
#include "gpusched/core/extender_service.h"

namespace gpusched::sim {

struct CycleResult {
  std::string node;                  // bound here ("" = not bound)
  std::vector<std::string> victims;  // to evict before retrying (preemption)
  std::string reason;                // why it was not bound (first failure)
};

class KubeCycle {
 public:
  // `names`: every node name, in node order (the strings must outlive this).
  // `tie_seed` 0: ties go to the lowest node index; else drawn at random.
  KubeCycle(ExtenderService* service, ClusterState* state, const std::vector<std::string>& names,
            uint64_t tie_seed = 0);

  CycleResult Schedule(const PodRequest& pod);

 private:
  std::vector<std::string> Preempt(const PodRequest& pod, const FilterOutcome& filtered);
  // The lowest priority of any pod on a node of `snapshot` (kube-scheduler's
  // dry run finds no victim for a pod of no higher priority), cached per
  // snapshot generation.
  int32_t LowestRunningPriority(const ClusterSnapshot& snapshot);

  ExtenderService* service_;
  ClusterState* state_;
  ExtenderArgs args_;
  uint64_t tie_seed_ = 0;
  std::mt19937_64 ties_;
  uint64_t lowest_generation_ = 0;
  int32_t lowest_priority_ = 0;
};

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_KUBE_CYCLE_H_
