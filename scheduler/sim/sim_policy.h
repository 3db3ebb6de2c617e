// SimPolicy and Placer: the simulator's kube-scheduler cycle for one pod:
// NodeResourcesFit (CPU, memory), the GPU filters and scorers of the shared
// policy Framework, node selection (highest score; ties to a fixed per-run
// random node priority, as the FGD authors' simulator does; or a uniform
// random feasible node for "random"), then the device choice (ChoosePlacement,
// a random feasible device, or FGD's own device).
//
// Policies: random, bestfit, dotprod, packing, clustering, fgd, k8s-default,
// gpusched (the configured pipeline), gpusched-extender (the same, scored as
// serve answers). Every policy is a Framework::Create over registered scorers.
//
// Placer caches each (pod shape, node) answer until that node changes; the
// policies are pure, so the cache is exact. Callers: scheduler/sim. Not
// thread-safe; one Placer per run.
#ifndef GPUSCHED_SIM_SIM_POLICY_H_
#define GPUSCHED_SIM_SIM_POLICY_H_

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "gpusched/policy/framework.h"
#include "scheduler/sim/sim_cluster.h"

namespace gpusched::policy {
class FgdScorer;
}

namespace gpusched::sim {

enum class DeviceRule { kPlacement, kRandom, kFgd };

struct SimPolicy {
  std::string name;
  std::unique_ptr<policy::Framework> framework;
  bool random_node = false;
  DeviceRule devices = DeviceRule::kPlacement;
  // gpusched: scores come from Framework::Score exactly as serve computes
  // them (CPU-only pods score 0 everywhere); baselines score every pod.
  bool extender_scoring = false;
  // fgd: the paper's scorer, asked for a shared pod's device (DeviceRule::kFgd).
  std::shared_ptr<const policy::FgdScorer> fgd;
  // kube-scheduler's in-tree score added to extender score x 10 x weight
  // (extender_scoring only); null = none.
  std::unique_ptr<policy::ScorePolicy> in_tree;
  int extender_weight = 10;
};

// The policy names, in table order.
const std::vector<std::string>& PolicyNames();

// `config` supplies the gpusched pipeline; `target` is the fragmentation
// target workload (fgd, and gpusched when its config names none).
absl::StatusOr<SimPolicy> MakeSimPolicy(std::string_view name, const SchedulerConfig& config,
                                        const std::vector<FragmentationShape>& target);

class Placer {
 public:
  // `shapes`: number of distinct pod shapes (ids given to Place).
  Placer(const SimPolicy& policy, SimCluster* cluster, int shapes, std::mt19937_64* rng);

  // The node priority used for ties (a permutation of node indices).
  void SetTiePriority(std::vector<int32_t> rank) { rank_ = std::move(rank); }

  // Chooses a node and devices for `pod` (shape id `shape`) without placing
  // it. Returns the node index, or -1 if no node fits.
  int Choose(const PodRequest& pod, int shape, DeviceMask* devices);
  // Choose + SimCluster::Place.
  int Schedule(const PodRequest& pod, int shape, DeviceMask* devices);

 private:
  struct Entry {
    uint32_t version = 0;
    int16_t score = -1;  // -1 = infeasible
  };
  int16_t Evaluate(const policy::PodContext& ctx, int node);

  const SimPolicy& policy_;
  SimCluster* cluster_;
  std::mt19937_64* rng_;
  std::vector<std::vector<Entry>> cache_;  // [shape][node]
  std::vector<int32_t> rank_;
  std::vector<int> feasible_;
};

// Returns uniform in [0, n).
inline uint64_t Uniform(std::mt19937_64& rng, uint64_t n) {
  return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng);
}

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_SIM_POLICY_H_
