// The GPU filters, in the order Framework runs them. Each emits reasons
// written for `kubectl describe pod`:
//
//  GpuModel     (unresolvable) "gpusched: GPU Tesla-T4 not in requested models [A100]"
//               (unresolvable) "gpusched: node has no GPUs"
//  GpuMemory    (unresolvable) "gpusched: GPU memory 16384 MiB per GPU, pod needs 40960 MiB"
//  GpuCount     (unresolvable) "gpusched: node has 4 healthy GPUs, pod needs 8"
//               (unschedulable) "gpusched: 2 of 8 GPUs free, pod needs 4"
//               (unschedulable) "gpusched: no GPU with 500 milli free (shared pod)"
//  GpuTopology  (unresolvable) "gpusched: no all-NVLink set of 4 GPUs on this node"
//               (unschedulable) "gpusched: no all-NVLink set of 4 among free GPUs [2 3 4 5]"
//
// Private to policy/; reached through the registry. Pure; thread-safe.
#ifndef GPUSCHED_POLICY_GPU_FILTERS_H_
#define GPUSCHED_POLICY_GPU_FILTERS_H_

#include "gpusched/policy/policy.h"

namespace gpusched::policy {

class GpuModelFilter final : public FilterPolicy {
 public:
  static constexpr char kName[] = "GpuModel";
  std::string_view Name() const override { return kName; }
  FilterResult Filter(const PodContext& ctx, const NodeInfo& node) const override;
};

class GpuMemoryFilter final : public FilterPolicy {
 public:
  static constexpr char kName[] = "GpuMemory";
  std::string_view Name() const override { return kName; }
  FilterResult Filter(const PodContext& ctx, const NodeInfo& node) const override;
};

class GpuCountFilter final : public FilterPolicy {
 public:
  static constexpr char kName[] = "GpuCount";
  std::string_view Name() const override { return kName; }
  FilterResult Filter(const PodContext& ctx, const NodeInfo& node) const override;
};

class GpuTopologyFilter final : public FilterPolicy {
 public:
  static constexpr char kName[] = "GpuTopology";
  std::string_view Name() const override { return kName; }
  FilterResult Filter(const PodContext& ctx, const NodeInfo& node) const override;
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_GPU_FILTERS_H_
