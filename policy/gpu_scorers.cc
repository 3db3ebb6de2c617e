#include "policy/gpu_scorers.h"

#include <algorithm>
#include <bit>

#include "gpusched/policy/placement.h"

namespace gpusched::policy {
namespace {

int NvlinkPairs(const GpuTopology& t, DeviceMask m) {
  int n = 0;
  for (DeviceMask a = m; a != 0; a &= a - 1) {
    int i = std::countr_zero(a);
    for (DeviceMask b = a & (a - 1); b != 0; b &= b - 1) {
      if (t.link(i, std::countr_zero(b)).nvlinks > 0) ++n;
    }
  }
  return n;
}

}  // namespace

int64_t GpuTopologyScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const GpuRequest& gpu = ctx.pod->gpu;
  if (gpu.count < 2 || gpu.topology == TopologyMode::kNone) return kMaxNodeScore;
  auto p = ChoosePlacement(gpu, node);
  if (!p.has_value()) return kMinNodeScore;
  const GpuTopology& t = *node.topology;
  const int pairs = gpu.count * (gpu.count - 1) / 2;
  const int best = std::max(1, t.BestInternal(2));
  const int64_t nvl = NvlinkPairs(t, p->devices);
  const int64_t score = (70 * nvl) / pairs + (30 * int64_t{p->choice.internal}) / (pairs * best);
  return std::clamp<int64_t>(score, kMinNodeScore, kMaxNodeScore);
}

int64_t GpuPackingScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const GpuRequest& gpu = ctx.pod->gpu;
  const int64_t capacity = int64_t{node.healthy_count()} * 1000;
  if (gpu.count == 0 || capacity == 0) return kMinNodeScore;
  auto p = ChoosePlacement(gpu, node);
  if (!p.has_value()) return kMinNodeScore;
  int64_t used = 0;
  for (DeviceMask m = node.healthy; m != 0; m &= m - 1)
    used += node.used_milli[std::countr_zero(m)];
  const int64_t after = std::min(capacity, used + gpu.total_milli());
  int64_t fill = (80 * after) / capacity;
  if (spread_) fill = 80 - (80 * (used + gpu.total_milli())) / capacity;
  int64_t keep = 20;
  if (!gpu.shared()) {
    const int before = node.topology->SetScore(node.whole_free);
    if (before > 0) keep = (20 * int64_t{p->choice.leftover}) / before;
  }
  return std::clamp<int64_t>(fill + keep, kMinNodeScore, kMaxNodeScore);
}

}  // namespace gpusched::policy
