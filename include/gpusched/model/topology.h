// GpuTopology: the GPU-to-GPU interconnect of one node, as `nvidia-smi topo -m`
// reports it (NV# = # bonded NVLinks; else the PCIe path PIX/PXB/PHB/NODE/SYS),
// and the device-set choices derived from it.
//
// Pair scores follow NVIDIA's go-gpuallocator: 100 per NVLink, PIX 50, PXB 40,
// PHB 30, NODE 20, SYS 10. For nodes with at most kTableMaxGpus devices the
// best set for every (free-mask, size) is precomputed once per distinct
// topology, so choosing devices on the filter path is a table lookup.
//
// Immutable after construction and shared between nodes of one machine type
// (std::shared_ptr<const GpuTopology>). Thread-safe.
#ifndef GPUSCHED_MODEL_TOPOLOGY_H_
#define GPUSCHED_MODEL_TOPOLOGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusched {

// Bit i set = device i. Nodes have at most 64 GPUs.
using DeviceMask = uint64_t;
inline constexpr int kMaxGpusPerNode = 64;

int PopCount(DeviceMask m);
// Returns the device indices in `m`, ascending.
std::vector<int> MaskToIndices(DeviceMask m);
// Returns "[0 3 5]".
std::string FormatMask(DeviceMask m);

// The connection between two GPUs.
struct Link {
  uint8_t nvlinks = 0;  // bonded NVLink count (0 = no NVLink)
  uint8_t pcie = 0;     // PCIe pair score 0..60 (SYS 10 .. same board 60); 0 unknown
};

// A device set chosen on a node and what it is worth.
struct DeviceChoice {
  DeviceMask devices = 0;
  // Sum of pair scores inside the set (0 for one device).
  int32_t internal = 0;
  // Sum of pair scores among the free devices left over afterwards.
  int32_t leftover = 0;
  // True iff every pair in the set is NVLink-connected (true for one device).
  bool all_nvlink = true;
};

class GpuTopology {
 public:
  static constexpr int kTableMaxGpus = 10;

  // Builds from a square matrix of nvidia-smi codes ("X", "NV12", "PIX",
  // "SOC" == "SYS", ...). Fails on unknown codes, asymmetry or a bad diagonal.
  static absl::StatusOr<std::shared_ptr<const GpuTopology>> FromCodes(
      const std::vector<std::vector<std::string>>& codes);
  // Every pair joined by `link` (e.g. NVSwitch: {12, 0}; unknown PCIe: {0, 10}).
  static std::shared_ptr<const GpuTopology> Uniform(int gpus, Link link);

  int size() const { return n_; }
  const Link& link(int a, int b) const { return links_[a * n_ + b]; }
  int PairScore(int a, int b) const;
  // Sum of pair scores over all pairs inside `m`.
  int SetScore(DeviceMask m) const;
  bool AllNvlink(DeviceMask m) const;
  // The best possible internal score of `k` devices on an empty node.
  int BestInternal(int k) const;
  // Returns the best set of `k` devices among `free` (maximum internal score,
  // then maximum leftover score, then lowest indices), or a choice with
  // devices == 0 if none exists. With `require_nvlink`, only all-NVLink sets
  // count.
  DeviceChoice Choose(DeviceMask free, int k, bool require_nvlink) const;

  explicit GpuTopology(int n, std::vector<Link> links);

 private:
  DeviceChoice Search(DeviceMask free, int k, bool require_nvlink) const;
  void BuildTable();

  int n_;
  std::vector<Link> links_;
  std::vector<int32_t> best_internal_;  // by k
  // table_[(mask * (n_ + 1) + k) * 2 + require_nvlink] for n_ <= kTableMaxGpus.
  std::vector<DeviceChoice> table_;
};

// Parses one nvidia-smi code into a Link; "X" gives ok with nvlinks = 0xff.
absl::StatusOr<Link> ParseLinkCode(std::string_view code);

}  // namespace gpusched

#endif  // GPUSCHED_MODEL_TOPOLOGY_H_
