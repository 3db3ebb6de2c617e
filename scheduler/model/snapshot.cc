#include "gpusched/model/snapshot.h"

#include <bit>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace gpusched {

ClusterSnapshot::ClusterSnapshot(uint64_t generation,
                                 std::vector<std::shared_ptr<const NodeInfo>> nodes,
                                 std::shared_ptr<const NodeIndex> index,
                                 std::shared_ptr<const std::vector<std::string>> products)
    : generation_(generation), index_(std::move(index)), products_(std::move(products)) {
  nodes_.reserve(nodes.size());
  hot_.reserve(nodes.size());
  for (const auto& n : nodes) {
    nodes_.push_back(n.get());
    hot_.push_back(HotOf(*n));
  }
  owners_ = std::make_shared<const Owners>(Owners{std::move(nodes), nullptr, 0});
}

std::shared_ptr<const ClusterSnapshot> ClusterSnapshot::Patched(
    const ClusterSnapshot& base, uint64_t generation,
    std::vector<std::pair<int32_t, std::shared_ptr<const NodeInfo>>> changed,
    std::shared_ptr<const std::vector<std::string>> products) {
  std::shared_ptr<ClusterSnapshot> s(new ClusterSnapshot());
  s->generation_ = generation;
  s->index_ = base.index_;
  s->products_ = std::move(products);
  s->nodes_ = base.nodes_;
  s->hot_ = base.hot_;
  Owners owners{{}, base.owners_, base.owners_->depth + 1};
  owners.nodes.reserve(changed.size());
  for (auto& [i, node] : changed) {
    s->nodes_[i] = node.get();
    s->hot_[i] = HotOf(*node);
    owners.nodes.push_back(std::move(node));
  }
  s->owners_ = std::make_shared<const Owners>(std::move(owners));
  return s;
}

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
