#include "gpusched/model/snapshot.h"

#include <algorithm>
#include <bit>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace gpusched {

ClusterSnapshot::ClusterSnapshot(uint64_t generation,
                                 std::vector<std::shared_ptr<const NodeInfo>> nodes,
                                 std::shared_ptr<const NodeIndex> index,
                                 std::shared_ptr<const std::vector<std::string>> products)
    : generation_(generation),
      index_(std::move(index)),
      products_(std::move(products)),
      labels_epoch_(std::make_shared<LabelsEpoch>()) {
  nodes_.reserve(nodes.size());
  chunks_.reserve((nodes.size() + kChunk - 1) / kChunk);
  for (size_t first = 0; first < nodes.size(); first += kChunk) {
    auto chunk = std::make_shared<Chunk>();
    for (size_t i = first; i < nodes.size() && i < first + kChunk; ++i) {
      nodes_.push_back(nodes[i].get());
      chunk->hot[i - first] = HotOf(*nodes[i]);
      chunk->owner[i - first] = std::move(nodes[i]);
    }
    chunks_.push_back(std::move(chunk));
  }
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
  s->chunks_ = base.chunks_;
  s->labels_epoch_ = base.labels_epoch_;
  auto same_labels = [](const NodeLabels* a, const NodeLabels* b) {
    if (a == b) return true;
    const NodeLabels none;
    return (a != nullptr ? *a : none) == (b != nullptr ? *b : none);
  };
  // Each chunk a change touches is copied once, then written in place.
  std::vector<std::shared_ptr<Chunk>> copied(s->chunks_.size());
  for (auto& [i, node] : changed) {
    const size_t c = static_cast<size_t>(i) >> kChunkShift;
    if (copied[c] == nullptr) {
      copied[c] = std::make_shared<Chunk>(*base.chunks_[c]);
      s->chunks_[c] = copied[c];
    }
    if (!same_labels(base.nodes_[i]->labels.get(), node->labels.get())) {
      s->labels_epoch_ = std::make_shared<LabelsEpoch>();
    }
    s->nodes_[i] = node.get();
    copied[c]->hot[i & (kChunk - 1)] = HotOf(*node);
    copied[c]->owner[i & (kChunk - 1)] = std::move(node);
  }
  return s;
}

int ClusterSnapshot::SharedChunks(const ClusterSnapshot& other) const {
  int shared = 0;
  for (size_t c = 0; c < chunks_.size() && c < other.chunks_.size(); ++c) {
    shared += chunks_[c] == other.chunks_[c];
  }
  return shared;
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

const std::string* FindLabel(const NodeLabels* labels, std::string_view key) {
  if (labels == nullptr) return nullptr;
  auto it = std::lower_bound(labels->begin(), labels->end(), key,
                             [](const auto& kv, std::string_view k) { return kv.first < k; });
  return it != labels->end() && it->first == key ? &it->second : nullptr;
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
