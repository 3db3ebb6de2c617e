#include "policy/baseline_scorers.h"

#include <algorithm>
#include <bit>

namespace gpusched::policy {
namespace {

constexpr double kMaxSpecCpu = 128000;  // the FGD simulator's constants
constexpr double kMaxSpecGpu = 8000;

}  // namespace

int64_t FreeGpuMilli(const NodeInfo& node) {
  int64_t free = 0;
  for (DeviceMask m = node.healthy; m != 0; m &= m - 1) {
    free += 1000 - node.used_milli[std::countr_zero(m)];
  }
  return free;
}

int64_t BestFitScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const PodRequest& pod = *ctx.pod;
  const double cpu = static_cast<double>(node.cpu_milli - node.cpu_used_milli - pod.cpu_milli);
  const double gpu = static_cast<double>(FreeGpuMilli(node) - pod.gpu.total_milli());
  const double s = 0.5 * cpu / kMaxSpecCpu + 0.5 * gpu / kMaxSpecGpu;
  return std::clamp<int64_t>(static_cast<int64_t>((1 - s) * 100), kMinNodeScore, kMaxNodeScore);
}

int64_t DotProdScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const PodRequest& pod = *ctx.pod;
  const double cf = static_cast<double>(node.cpu_milli - node.cpu_used_milli) / kMaxSpecCpu;
  const double gf = static_cast<double>(FreeGpuMilli(node)) / kMaxSpecGpu;
  const double cr = static_cast<double>(pod.cpu_milli) / kMaxSpecCpu;
  const double gr = static_cast<double>(pod.gpu.total_milli()) / kMaxSpecGpu;
  const double d = (cf * cr + gf * gr) / 2;
  return std::clamp<int64_t>(static_cast<int64_t>((1 - d) * 100), kMinNodeScore, kMaxNodeScore);
}

int64_t GpuSharePackingScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const GpuRequest& gpu = ctx.pod->gpu;
  if (gpu.count == 0) return kMinNodeScore;
  const int healthy = node.healthy_count();
  const int fully_free = node.free_count();
  if (fully_free == healthy) return std::max(33 - fully_free, fully_free);
  // Devices by free milli ascending (lowest index on ties).
  int order[kMaxGpusPerNode];
  int n = 0;
  for (DeviceMask m = node.healthy; m != 0; m &= m - 1) order[n++] = std::countr_zero(m);
  std::stable_sort(order, order + n,
                   [&](int a, int b) { return node.used_milli[a] > node.used_milli[b]; });
  int need = gpu.count;
  int full_used = 0;
  int64_t free_pct = 0;
  for (int i = 0; i < n && need > 0; ++i) {
    const int free = 1000 - node.used_milli[order[i]];
    if (free < gpu.milli_per_gpu) continue;
    --need;
    if (free == 1000) ++full_used;
    free_pct += free * 100 / 1000;
  }
  if (need > 0) return kMinNodeScore;
  if (full_used > 0) return std::max(50 - full_used, 33);
  return std::max<int64_t>(100 - free_pct / 10, 50);
}

int64_t GpuClusteringScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const GpuRequest& gpu = ctx.pod->gpu;
  if (gpu.count == 0) return kMinNodeScore;
  bool same = false;
  bool other = false;
  for (const PodOnNode& p : node.pods) {
    if (p.gpus == 0) continue;
    if (p.gpus == gpu.count && p.milli_per_gpu == gpu.milli_per_gpu) {
      same = true;
    } else {
      other = true;
    }
  }
  const int64_t fill = 25 * (8000 - FreeGpuMilli(node)) / 8000;
  int64_t band = 0;
  if (same) {
    band = other ? 50 : 75;
  } else if (!other) {
    band = 25;
  }
  return std::clamp<int64_t>(band + fill, kMinNodeScore, kMaxNodeScore);
}

int64_t LeastAllocatedScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const PodRequest& pod = *ctx.pod;
  auto part = [](int64_t alloc, int64_t used) -> int64_t {
    if (alloc <= 0 || used > alloc) return 0;
    return (alloc - used) * 100 / alloc;
  };
  const int64_t c = part(node.cpu_milli, node.cpu_used_milli + pod.cpu_milli);
  const int64_t m = part(node.memory_mib, node.memory_used_mib + pod.memory_mib);
  return (c + m) / 2;
}

int64_t MostAllocatedScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  const PodRequest& pod = *ctx.pod;
  auto part = [](int64_t alloc, int64_t used) -> int64_t {
    if (alloc <= 0 || used > alloc) return 0;
    return used * 100 / alloc;
  };
  const int64_t c = part(node.cpu_milli, node.cpu_used_milli + pod.cpu_milli);
  const int64_t m = part(node.memory_mib, node.memory_used_mib + pod.memory_mib);
  return (c + m) / 2;
}

}  // namespace gpusched::policy
