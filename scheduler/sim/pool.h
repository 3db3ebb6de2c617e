// The replay baselines' cluster: a pool of equal nodes counted in free GPUs,
// Helios' consolidate placer and the restart penalty of a preempted job
// (philly-calibration.md). Shared by the per-VC/pooled baselines (replay.cc)
// and the Kueue-like baseline (kueue_like.cc). Pure; thread-compatible.
#ifndef GPUSCHED_SIM_POOL_H_
#define GPUSCHED_SIM_POOL_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace gpusched::sim {

struct Pool {
  int g = 8;              // GPUs per node
  std::vector<int> free;  // per node
  int64_t total_free = 0;
  int64_t capacity = 0;
};

// Nodes `gpus` GPUs each, all free.
Pool MakePool(int64_t gpus, int gpus_per_node);

using Alloc = std::vector<std::pair<int, int>>;  // (node, gpus)

// Helios' consolidate placer: a job of at most one node's GPUs on the
// fullest node it fits; a larger one on whole free nodes plus the emptiest
// node for the remainder. False (and `out` empty) if it does not fit.
bool Consolidate(const Pool& p, int need, Alloc* out);
void Take(Pool& p, const Alloc& a);
void Give(Pool& p, const Alloc& a);

// Seconds a preempted job of `gpus` GPUs loses when it restarts (7/30/60).
double Penalty(int gpus);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_POOL_H_
