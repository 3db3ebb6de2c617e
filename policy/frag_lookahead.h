// FragLookahead: gpusched's fragmentation scorer. FGD's fragmentation change
// (fgd_scorer.h, against the target workload M) plus look-ahead terms, all
// in milli-GPU and evaluated on the devices the pod will really get
// (ChoosePlacement, the device rule serve binds with):
//
//   v = (F_before - F_after)                       FGD's gain
//       - cpu_guard * (S_after - S_before)         GPUs stranded for lack of CPU
//       - cpu_guard * 0.3 * L                      CPU slack taken (CPU-only pods)
//       - capacity  * (C_before - C_after)         expected future pods lost
//       - 2 * P                                    GPU models others need
//   score = floor(100 * sigmoid(v / scale))
//
// S (stranded): r = CPU milli per GPU milli asked by M's GPU shapes;
//   S = max(0, idle GPU milli - free CPU milli / r): idle GPU milli the
//   node's remaining CPU cannot feed at M's ratio. Placing a CPU-only pod on
//   a GPU node whose CPU the GPU pods need raises S; placing it where CPU is
//   in surplus (or on a node with no idle GPU) does not.
// L (slack, CPU-only pods only): min(idle GPU milli, pod CPU / r), the GPU
//   milli the pod's CPU could feed on this node. S does not change while a
//   node keeps CPU to spare for its idle GPUs, so without L a CPU-only pod is
//   as welcome on a node with idle GPUs as on one whose GPUs are all taken;
//   L sends it where no GPU is left to feed, keeping the spare CPU of nodes
//   with idle GPUs for GPU pods that ask more CPU per GPU than r.
// C (capacity): sum over M's GPU shapes m of p_m * copies_m * milli(m), where
//   copies_m = how many m fit on the node (model allowed; per-device
//   floor(free/milli) for shared shapes, whole free devices / count
//   otherwise; capped by free CPU / cpu(m)).
// P (model pressure, model_pressure.h): only when M has model-constrained
//   GPU shapes; (rho_X^2 - rho_min^2) * the pod's GPU milli, rho_X the share
//   of the node's product X that M's constrained pods are expected to need,
//   rho_min the least among the products the pod allows. Keeps pods that may
//   go anywhere off scarce models that constrained pods need. The weight 2
//   and the square were chosen on the TUNE half of the openb variant grid
//   (docs/simulator.md); the capacity per product is computed once per node
//   set of the snapshot and cached.
//
// Example: r = 10 CPU milli per GPU milli (M: one shape, 1 GPU + 10 CPUs), node with
// 8 idle GPUs and 96,000 free CPU milli: S = max(0, 8000 - 9600) = 0; a 30-CPU
// CPU-only pod leaves 66,000, S = 8000 - 6600 = 1400 milli, and L = min(8000,
// 30000 / 10) = 3000, so with cpu_guard 1 v falls by 1400 + 0.3 * 3000 = 2300
// (plus FGD's own change).
//
// Callers: the registry ("FragLookahead"; the config's fragmentationPolicy
// "lookahead"), the simulator. Pure (the pressure cache is a function of the
// node set); thread-safe.
#ifndef GPUSCHED_POLICY_FRAG_LOOKAHEAD_H_
#define GPUSCHED_POLICY_FRAG_LOOKAHEAD_H_

#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "gpusched/policy/policy.h"
#include "gpusched/policy/scoring_spec.h"
#include "policy/fgd_scorer.h"

namespace gpusched::policy {

struct FragLookaheadParams {
  double scale = 1000;   // milli-GPU per sigmoid unit
  double cpu_guard = 1;  // weight of the stranded-GPU term
  double capacity = 0;   // weight of the lost-capacity term
};

// Weight of the model-pressure term P, and of the slack term L relative to
// cpu_guard (see above); both chosen on the TUNE half of the openb grid.
inline constexpr double kModelPressureWeight = 2;
inline constexpr double kCpuSlackWeight = 0.3;

// The parts of v for one node state, exposed for tests.
struct FragTerms {
  double frag = 0;      // F (milli-GPU)
  double stranded = 0;  // S (milli-GPU)
  double capacity = 0;  // C (milli-GPU)
  double idle = 0;      // idle GPU milli
};

class FragLookaheadScorer final : public ScorePolicy {
 public:
  static constexpr char kName[] = "FragLookahead";
  FragLookaheadScorer(std::shared_ptr<const std::vector<FragmentationShape>> target,
                      FragLookaheadParams params);
  std::string_view Name() const override { return kName; }
  int64_t Score(const PodContext& ctx, const NodeInfo& node) const override;
  // Reads the product, devices (MakeFragView, ChoosePlacement) and free CPU.
  bool DependsOnlyOnGpuStateAndFreeCpu() const override { return true; }
  // v for placing the pod on the node (see above); false if it cannot be placed.
  bool Value(const PodContext& ctx, const NodeInfo& node, double* v) const;
  FragTerms Terms(const std::vector<uint8_t>& allowed, const FragView& view) const;

 private:
  // Model pressure of the target on one node set (model_pressure.h).
  struct Pressure {
    const void* node_set = nullptr;
    size_t nodes = 0, products = 0;
    std::vector<int64_t> capacity;
    std::vector<double> rho;
  };
  // The pressure for the snapshot's node set, computed once per node set.
  std::shared_ptr<const Pressure> PressureFor(const ClusterSnapshot& snapshot) const;
  // M's pressure cost of placing the pod on the node (0 if M has no
  // model-constrained shape or the pod no GPU).
  double PressureCost(const PodContext& ctx, const NodeInfo& node) const;
  // cpu_guard * 0.3 * L for a CPU-only pod (see above), 0 for a GPU pod.
  double SlackCost(const PodRequest& pod, const FragTerms& before) const;

  std::shared_ptr<const std::vector<FragmentationShape>> target_;
  FragLookaheadParams params_;
  double cpu_per_gpu_ = 0;
  bool constrained_ = false;  // M has model-constrained GPU shapes
  mutable std::mutex mu_;
  mutable std::shared_ptr<const Pressure> pressure_;  // guarded by mu_
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_FRAG_LOOKAHEAD_H_
