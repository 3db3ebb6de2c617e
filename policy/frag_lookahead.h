// FragLookahead: gpusched's fragmentation scorer. FGD's fragmentation change
// (fgd_scorer.h, against the target workload M) plus two look-ahead terms,
// all in milli-GPU and evaluated on the devices the pod will really get
// (ChoosePlacement, the device rule serve binds with):
//
//   v = (F_before - F_after)                       FGD's gain
//       - cpu_guard * (S_after - S_before)         GPUs stranded for lack of CPU
//       - capacity  * (C_before - C_after)         expected future pods lost
//   score = floor(100 * sigmoid(v / scale))
//
// S (stranded): r = CPU milli per GPU milli asked by M's GPU shapes;
//   S = max(0, idle GPU milli - free CPU milli / r): idle GPU milli the
//   node's remaining CPU cannot feed at M's ratio. Placing a CPU-only pod on
//   a GPU node whose CPU the GPU pods need raises S; placing it where CPU is
//   in surplus (or on a node with no idle GPU) does not.
// C (capacity): sum over M's GPU shapes m of p_m * copies_m * milli(m), where
//   copies_m = how many m fit on the node (model allowed; per-device
//   floor(free/milli) for shared shapes, whole free devices / count
//   otherwise; capped by free CPU / cpu(m)).
//
// Example: r = 10 CPU milli per GPU milli (M: one shape, 1 GPU + 10 CPUs), node with
// 8 idle GPUs and 96,000 free CPU milli: S = max(0, 8000 - 9600) = 0; a 30-CPU
// CPU-only pod leaves 66,000, S = 8000 - 6600 = 1400 milli, so with cpu_guard 1
// v falls by 1400 (plus FGD's own change).
//
// Callers: the registry ("FragLookahead"; the config's fragmentationPolicy
// "lookahead"), the simulator. Pure; immutable after construction; thread-safe.
#ifndef GPUSCHED_POLICY_FRAG_LOOKAHEAD_H_
#define GPUSCHED_POLICY_FRAG_LOOKAHEAD_H_

#include <memory>
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

// The parts of v for one node state, exposed for tests.
struct FragTerms {
  double frag = 0;      // F (milli-GPU)
  double stranded = 0;  // S (milli-GPU)
  double capacity = 0;  // C (milli-GPU)
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
  std::shared_ptr<const std::vector<FragmentationShape>> target_;
  FragLookaheadParams params_;
  double cpu_per_gpu_ = 0;
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_FRAG_LOOKAHEAD_H_
