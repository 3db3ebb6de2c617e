#include "gpusched/policy/preemption_planner.h"

#include <algorithm>
#include <bit>

#include "gpusched/policy/placement.h"

namespace gpusched::policy {
namespace {

std::vector<std::string> Collect(const std::vector<VictimUnit>& units,
                                 const std::vector<int>& chosen) {
  std::vector<std::string> uids;
  for (int i : chosen) uids.insert(uids.end(), units[i].uids.begin(), units[i].uids.end());
  return uids;
}

}  // namespace

NodeInfo WithoutPods(const NodeInfo& node, const std::vector<std::string>& uids) {
  NodeInfo n = node;
  auto removed = [&](const PodOnNode& p) {
    return std::find(uids.begin(), uids.end(), p.uid) != uids.end();
  };
  for (const PodOnNode& p : node.pods) {
    if (!removed(p)) continue;
    n.cpu_used_milli = std::max<int64_t>(0, n.cpu_used_milli - p.cpu_milli);
    n.memory_used_mib = std::max<int64_t>(0, n.memory_used_mib - p.memory_mib);
    const int share = (p.gpus == 1 && p.milli_per_gpu < 1000) ? p.milli_per_gpu : 1000;
    for (DeviceMask m = p.devices; m != 0; m &= m - 1) {
      const int d = std::countr_zero(m);
      if (d >= static_cast<int>(n.used_milli.size())) continue;
      n.used_milli[d] = static_cast<uint16_t>(std::max(0, n.used_milli[d] - share));
    }
  }
  n.pods.erase(std::remove_if(n.pods.begin(), n.pods.end(), removed), n.pods.end());
  n.whole_free = 0;
  for (DeviceMask m = n.healthy; m != 0; m &= m - 1) {
    const int d = std::countr_zero(m);
    if (n.used_milli[d] == 0) n.whole_free |= DeviceMask{1} << d;
  }
  return n;
}

NodeInfo WithPod(const NodeInfo& node, const PodRequest& pod, DeviceMask devices) {
  NodeInfo n = node;
  const int share = pod.gpu.shared() ? pod.gpu.milli_per_gpu : 1000;
  for (DeviceMask m = devices; m != 0; m &= m - 1) {
    const int d = std::countr_zero(m);
    n.used_milli[d] = static_cast<uint16_t>(std::min(1000, n.used_milli[d] + share));
    n.whole_free &= ~(DeviceMask{1} << d);
  }
  n.cpu_used_milli += pod.cpu_milli;
  n.memory_used_mib += pod.memory_mib;
  PodOnNode on;
  on.uid = "hypothetical";
  on.ns = pod.ns;
  on.gpus = pod.gpu.count;
  on.milli_per_gpu = pod.gpu.milli_per_gpu;
  on.devices = devices;
  on.gang = pod.gang;
  n.pods.push_back(std::move(on));
  return n;
}

bool FitsWithDevices(const Framework& fw, const PodContext& ctx, const NodeInfo& node) {
  if (!fw.Filter(ctx, node).fits()) return false;
  return ChoosePlacement(ctx.pod->gpu, node).has_value();
}

std::optional<std::vector<int>> PlanVictims(const Framework& fw, const PodContext& ctx,
                                            const NodeInfo& node,
                                            const std::vector<VictimUnit>& units,
                                            const PlanAccept& accept) {
  auto works = [&](const std::vector<int>& chosen) {
    if (accept && !accept(chosen)) return false;
    if (chosen.empty()) return FitsWithDevices(fw, ctx, node);
    return FitsWithDevices(fw, ctx, WithoutPods(node, Collect(units, chosen)));
  };
  std::vector<int> chosen;
  bool ok = works(chosen);
  for (int i = 0; !ok && i < static_cast<int>(units.size()); ++i) {
    chosen.push_back(i);
    ok = works(chosen);
  }
  if (!ok) return std::nullopt;
  // Reprieve: give back what is not needed, the least preferred victims first.
  for (int k = static_cast<int>(chosen.size()) - 1; k >= 0; --k) {
    std::vector<int> without = chosen;
    without.erase(without.begin() + k);
    if (works(without)) chosen = std::move(without);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace gpusched::policy
