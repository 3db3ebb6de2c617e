// Baseline scorers from the FGD paper's comparison (ATC '23) and
// kube-scheduler's default, used by `gpusched simulate` and available to
// serve through the registry. Each returns 0..100, higher is better.
//
// BestFit:   s = 0.5*(freeCPU-reqCPU)/128000 + 0.5*(freeGPU-reqGPU)/8000
//            (free GPU = total free milli, partly used devices included);
//            score = floor((1-s)*100).
// DotProd:   Tetris alignment of free (CPU, total GPU milli) and request,
//            both divided by (128000, 8000): d = dot/2; score = floor((1-d)*100).
// GpuSharePacking: 1) already-shared devices: max(100 - sum(free%)/10, 50);
//            2) must use fully free devices of a used node: max(50 - k, 33);
//            3) idle node: max(33 - free devices, free devices). CPU-only: 0.
// GpuClustering: bands by the GPU request types (count, milli) on the node:
//            only the pod's type 75+, mixed with it 50+, none 25+, others 0+,
//            plus 25*(8000 - free GPU milli)/8000. CPU-only: 0.
// LeastAllocated: kube-scheduler's default: mean over CPU and memory of
//            (allocatable - requested after placement) * 100 / allocatable.
// MostAllocated: kube-scheduler's bin-packing strategy: mean over CPU and
//            memory of requested after placement * 100 / allocatable.
//
// Private to policy/; reached through the registry. Pure; thread-safe.
#ifndef GPUSCHED_POLICY_BASELINE_SCORERS_H_
#define GPUSCHED_POLICY_BASELINE_SCORERS_H_

#include "gpusched/policy/policy.h"

namespace gpusched::policy {

#define GPUSCHED_DECLARE_SCORER(Class, name)                                   \
  class Class final : public ScorePolicy {                                     \
   public:                                                                     \
    static constexpr char kName[] = name;                                      \
    std::string_view Name() const override { return kName; }                   \
    int64_t Score(const PodContext& ctx, const NodeInfo& node) const override; \
  };

GPUSCHED_DECLARE_SCORER(BestFitScorer, "BestFit")
GPUSCHED_DECLARE_SCORER(DotProdScorer, "DotProd")
GPUSCHED_DECLARE_SCORER(GpuSharePackingScorer, "GpuSharePacking")
GPUSCHED_DECLARE_SCORER(GpuClusteringScorer, "GpuClustering")
GPUSCHED_DECLARE_SCORER(LeastAllocatedScorer, "LeastAllocated")
GPUSCHED_DECLARE_SCORER(MostAllocatedScorer, "MostAllocated")

#undef GPUSCHED_DECLARE_SCORER

// Total free milli over the node's healthy devices.
int64_t FreeGpuMilli(const NodeInfo& node);

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_BASELINE_SCORERS_H_
