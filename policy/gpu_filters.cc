#include "policy/gpu_filters.h"

#include "gpusched/policy/placement.h"
#include "gpusched/util/strings.h"

namespace gpusched::policy {

FilterResult GpuModelFilter::Filter(const PodContext& ctx, const NodeInfo& node) const {
  if (!ctx.wants_gpus()) return FilterResult::Fits();
  if (node.gpu_count == 0) return FilterResult::Unresolvable("gpusched: node has no GPUs");
  if (!ctx.ProductAllowed(node.product_id)) {
    const std::string& product = ctx.snapshot->product(node);
    return FilterResult::Unresolvable(StrCat("gpusched: GPU ",
                                             product.empty() ? "(unlabelled)" : product,
                                             " not in requested models ", ctx.models_text));
  }
  return FilterResult::Fits();
}

FilterResult GpuMemoryFilter::Filter(const PodContext& ctx, const NodeInfo& node) const {
  const GpuRequest& gpu = ctx.pod->gpu;
  if (gpu.count == 0 || gpu.min_memory_mib == 0) return FilterResult::Fits();
  if (node.gpu_memory_mib < gpu.min_memory_mib) {
    return FilterResult::Unresolvable(StrCat("gpusched: GPU memory ", node.gpu_memory_mib,
                                             " MiB per GPU, pod needs ", gpu.min_memory_mib,
                                             " MiB"));
  }
  return FilterResult::Fits();
}

FilterResult GpuCountFilter::Filter(const PodContext& ctx, const NodeInfo& node) const {
  const GpuRequest& gpu = ctx.pod->gpu;
  if (gpu.count == 0) return FilterResult::Fits();
  const int healthy = node.healthy_count();
  if (healthy < gpu.count) {
    return FilterResult::Unresolvable(
        StrCat("gpusched: node has ", healthy, " healthy GPUs, pod needs ", gpu.count));
  }
  if (gpu.shared()) {
    if (DevicesWithFreeMilli(node, gpu.milli_per_gpu) == 0) {
      return FilterResult::Unschedulable(
          StrCat("gpusched: no GPU with ", gpu.milli_per_gpu, " milli free (shared pod)"));
    }
    return FilterResult::Fits();
  }
  const int free = node.free_count();
  if (free < gpu.count) {
    return FilterResult::Unschedulable(
        StrCat("gpusched: ", free, " of ", healthy, " GPUs free, pod needs ", gpu.count));
  }
  return FilterResult::Fits();
}

FilterResult GpuTopologyFilter::Filter(const PodContext& ctx, const NodeInfo& node) const {
  const GpuRequest& gpu = ctx.pod->gpu;
  if (gpu.count < 2 || gpu.topology != TopologyMode::kNvlinkRequired) return FilterResult::Fits();
  if (node.topology == nullptr || node.healthy_count() < gpu.count) return FilterResult::Fits();
  if (node.topology->Choose(node.healthy, gpu.count, true).devices == 0) {
    return FilterResult::Unresolvable(
        StrCat("gpusched: no all-NVLink set of ", gpu.count, " GPUs on this node"));
  }
  if (node.free_count() < gpu.count) return FilterResult::Fits();  // GpuCount reports it
  if (node.topology->Choose(node.whole_free, gpu.count, true).devices == 0) {
    return FilterResult::Unschedulable(StrCat("gpusched: no all-NVLink set of ", gpu.count,
                                              " among free GPUs ", FormatMask(node.whole_free)));
  }
  return FilterResult::Fits();
}

}  // namespace gpusched::policy
