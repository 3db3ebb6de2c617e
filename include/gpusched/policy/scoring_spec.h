// ScoringSpec: what a Framework scores with, in the policies' own words:
// each scorer by its registered name (registry.h), its weight, and the
// parameters it reads. The config codec translates the file's "scoring"
// section into one (core's SchedulerConfig carries it); the simulator builds
// its own. Value types; thread-compatible.
#ifndef GPUSCHED_POLICY_SCORING_SPEC_H_
#define GPUSCHED_POLICY_SCORING_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpusched::policy {

// One pod shape of a fragmentation target workload (FGD): what a typical
// future pod asks for, and how often it comes (weights need not sum to 1).
struct FragmentationShape {
  int64_t cpu_milli = 0;
  int32_t gpu_count = 0;
  int32_t gpu_milli = 1000;         // per GPU
  std::vector<std::string> models;  // allowed products; empty = any
  double weight = 0;
};

// The parameters of the built-in scorers; each reads only its own.
struct ScorerParams {
  // GpuPacking: prefer emptier nodes instead of fuller ones (e.g. inference).
  bool spread = false;
  // Fgd, FragLookahead: divisor of the fragmentation change in the sigmoid
  // (milli-GPU), and the target workload (empty = DefaultFragmentationTarget
  // in policy/fgd_scorer.h).
  double fragmentation_scale = 1000;
  std::vector<FragmentationShape> fragmentation_target;
  // FragLookahead: weights of the stranded-GPU and lost-capacity terms.
  double cpu_guard = 1;
  double capacity = 0;
};

struct ScorerSpec {
  std::string name;  // a registered scorer ("GpuTopology", "BestFit", ...)
  int weight = 1;    // relative weight in Framework::Score; 0 leaves it out
  ScorerParams params;
};

// DomainFit's weight when the policy file does not set scoring.domainWeight:
// off. Measured in the topology simulation (docs/simulator.md, "Single pods
// and whole domains"): at weight 30 it keeps more racks and cliques whole
// when kube-scheduler breaks score ties at random, but single pods wait
// longer and the average JCT did not improve on the held-out seeds.
inline constexpr int kDefaultDomainWeight = 0;
// The weight measured there (the topology comparison's
// gpusched-topology-domainfit placement).
inline constexpr int kMeasuredDomainWeight = 30;

// The default is serve's documented default: GpuTopology 3, GpuPacking 2.
struct ScoringSpec {
  std::vector<ScorerSpec> scorers = {{"GpuTopology", 3, {}}, {"GpuPacking", 2, {}}};
  // DomainFit (policy/domain_fit.h) scores by these topology levels (the
  // policy file's gang.topologyLevels, largest domain first) with
  // domain_weight. No levels, or weight 0: it is not in the framework at
  // all, and every score is exactly what the scorers above give.
  std::vector<std::string> topology_levels;
  int domain_weight = kDefaultDomainWeight;
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_SCORING_SPEC_H_
