#include "gpusched/model/snapshot.h"

#include <bit>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace gpusched {

int64_t ClusterSnapshot::TotalGpus() const {
  int64_t n = 0;
  for (const auto& node : nodes_) n += node->healthy_count();
  return n;
}

int64_t ClusterSnapshot::AllocatedGpuMilli() const {
  int64_t n = 0;
  for (const auto& node : nodes_) {
    for (DeviceMask m = node->healthy; m != 0; m &= m - 1) {
      n += node->used_milli[std::countr_zero(m)];
    }
  }
  return n;
}

size_t NodeInfo::MemoryBytes() const {
  size_t bytes = sizeof(NodeInfo) + used_milli.capacity() * sizeof(uint16_t);
  if (name.capacity() > 15) bytes += name.capacity();
  bytes += pods.capacity() * sizeof(PodOnNode);
  for (const PodOnNode& p : pods) bytes += p.uid.capacity() + p.ns.capacity() + p.name.capacity();
  return bytes;
}

bool ProductMatches(std::string_view entry, std::string_view product) {
  std::vector<absl::string_view> want = absl::StrSplit(ToAbsl(entry), '-', absl::SkipEmpty());
  std::vector<absl::string_view> have = absl::StrSplit(ToAbsl(product), '-', absl::SkipEmpty());
  if (want.empty() || want.size() > have.size()) return false;
  for (size_t start = 0; start + want.size() <= have.size(); ++start) {
    bool all = true;
    for (size_t i = 0; i < want.size() && all; ++i) {
      all = absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(want[i]), have[start + i]);
    }
    if (all) return true;
  }
  return false;
}

}  // namespace gpusched
