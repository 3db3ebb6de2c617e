// The built-in GPU scorers (0..100 each; Framework combines them by weight).
//
// GpuTopology: quality of the device set the pod would get.
//   k = GPUs requested, pairs = k(k-1)/2, nvl = NVLink-connected pairs in the
//   chosen set, internal = sum of pair scores in the set, best = the node's
//   best pair score:  score = 70 * nvl/pairs + 30 * internal/(pairs*best).
//   Example, 4 GPUs: HGX H100 (all NV18): 70 + 30 = 100. DGX-1 V100 quad
//   {0,1,2,3}: internal 900, best pair 200 -> 70 + 30*900/1200 = 92.
//   4xT4 PCIe, {0,1,2,3}: no NVLink, internal 220, best 50 -> 0 + 22 = 22.
//   One GPU, a shared GPU, or topology "none": 100 on every node.
//
// GpuPacking: fill of the node after placement, and what is left intact.
//   fill = (used milli + requested milli) / (healthy GPUs * 1000);
//   keep = free-device pair score left after the choice / before (1 if no
//   pairs): score = 80 * fill + 20 * keep. With spread: 80 * (1 - fill) +
//   20 * keep. Example: 1 GPU on an 8-GPU node with 6 used: 80*7/8 + ... = 70+.
//   Packing keeps empty nodes and intact NVLink groups for large jobs.
//
// Private to policy/; reached through the registry. Pure; thread-safe.
#ifndef GPUSCHED_POLICY_GPU_SCORERS_H_
#define GPUSCHED_POLICY_GPU_SCORERS_H_

#include "gpusched/policy/policy.h"

namespace gpusched::policy {

class GpuTopologyScorer final : public ScorePolicy {
 public:
  static constexpr char kName[] = "GpuTopology";
  std::string_view Name() const override { return kName; }
  int64_t Score(const PodContext& ctx, const NodeInfo& node) const override;
  bool DependsOnlyOnGpuState() const override { return true; }
};

class GpuPackingScorer final : public ScorePolicy {
 public:
  static constexpr char kName[] = "GpuPacking";
  explicit GpuPackingScorer(bool spread) : spread_(spread) {}
  std::string_view Name() const override { return kName; }
  int64_t Score(const PodContext& ctx, const NodeInfo& node) const override;
  bool DependsOnlyOnGpuState() const override { return true; }

 private:
  bool spread_;
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_GPU_SCORERS_H_
