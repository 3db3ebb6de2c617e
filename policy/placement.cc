#include "gpusched/policy/placement.h"

#include <bit>

namespace gpusched::policy {

DeviceMask DevicesWithFreeMilli(const NodeInfo& node, int milli) {
  DeviceMask out = 0;
  for (DeviceMask m = node.healthy; m != 0; m &= m - 1) {
    int d = std::countr_zero(m);
    if (1000 - node.used_milli[d] >= milli) out |= DeviceMask{1} << d;
  }
  return out;
}

std::optional<Placement> ChoosePlacement(const GpuRequest& gpu, const NodeInfo& node) {
  if (gpu.count <= 0) return Placement{};
  if (node.topology == nullptr) return std::nullopt;
  if (gpu.shared()) {
    int best = -1;
    int best_free = 1001;
    for (DeviceMask m = node.healthy; m != 0; m &= m - 1) {
      int d = std::countr_zero(m);
      int free = 1000 - node.used_milli[d];
      if (free >= gpu.milli_per_gpu && free < best_free) {
        best = d;
        best_free = free;
      }
    }
    if (best < 0) return std::nullopt;
    Placement p;
    p.devices = DeviceMask{1} << best;
    p.choice.devices = p.devices;
    return p;
  }
  if (node.free_count() < gpu.count) return std::nullopt;
  DeviceChoice c = node.topology->Choose(node.whole_free, gpu.count,
                                         gpu.topology == TopologyMode::kNvlinkRequired);
  if (c.devices == 0) return std::nullopt;
  return Placement{c.devices, c};
}

}  // namespace gpusched::policy
