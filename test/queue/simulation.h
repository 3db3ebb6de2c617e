// Randomised invariant simulation of the queue manager + ClusterState:
// submit / filter / bind / finish / delete / quota change / preempt / tick /
// restart, checking after every step that
//  - no device is allocated twice (no node reports a device conflict);
//  - no namespace grows while above its limit (lowering a limit never
//    evicts by itself, and nothing new is admitted above it);
//  - the head of a namespace's queue within its guarantee passes filter
//    whenever some node has room for it;
//  - every reservation placeholder in the state belongs to a live gang
//    reservation, and none outlives its deadline past a tick;
//  - a filter request for a pod the cluster source never showed (a forged
//    high-priority pod) leaves nothing behind in the state or the queue;
//  - a gang that lost a member to preemption has no member running after
//    the next tick (victim gangs go whole);
//  - with `topology`: no member of a gang that requires a clique holds
//    GPUs outside its one clique (running or reserved).
// Shared by the property test (CI) and the benchmark. Not thread-safe.
#ifndef GPUSCHED_TEST_QUEUE_SIMULATION_H_
#define GPUSCHED_TEST_QUEUE_SIMULATION_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpusched::queue::testing {

struct SimulationResult {
  int64_t steps = 0;
  std::string violation;  // "" if every invariant held
  int64_t binds = 0, rejected_binds = 0, preemptions = 0, evictions = 0, restarts = 0;
  int64_t submits = 0, finishes = 0, cancels = 0, quota_changes = 0;
  int64_t gang_reservations = 0;
  int64_t gang_followups = 0;  // victim gangs whose other members the tick evicted
  // Heads admitted by the work-conservation check after a tick (below their
  // limit with a node that has room): how often that invariant was tested.
  int64_t idle_checks = 0;
  int64_t domain_checks = 0;  // topology: required gangs seen holding GPUs, summed over steps
};

// `from_scratch`: the queue rebuilds its incremental state before every
// decision (QueueOptions::recompute_from_scratch). `decisions`, if given,
// receives one line per decision (filter answer and reason, bind result,
// preempt answer, evictions per tick): the differential test compares the
// lines of both modes. `topology`: nodes labelled in two cliques
// (nvidia.com/gpu.clique is the one level) and gangs that require or
// prefer one.
SimulationResult RunSimulation(int64_t steps, uint32_t seed, bool from_scratch = false,
                               std::vector<std::string>* decisions = nullptr,
                               bool topology = false);

}  // namespace gpusched::queue::testing

#endif  // GPUSCHED_TEST_QUEUE_SIMULATION_H_
