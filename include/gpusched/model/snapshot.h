// ClusterSnapshot: an immutable view of every node's GPUs at one generation.
// Request handlers and the simulator take one snapshot per decision and run
// pure policies over it without locks, as kube-scheduler does per cycle.
//
// Built only by ClusterState (scheduler/core) and the simulator. Nodes are
// shared between consecutive snapshots (copy-on-write per node): publishing
// after one pod change (Patched) copies the previous snapshot's plain
// pointer array and rebuilds only the changed nodes' entries. The packed
// per-node fields and the node ownership are kept in chunks of kChunk nodes
// shared between snapshots: a patch copies only the chunks it changes, so
// its cost does not grow with the cluster (at 20,000 nodes copying every
// node's packed fields and reference counts took milliseconds per commit),
// and a superseded node is freed with the last snapshot that holds it.
// Immutable; thread-safe.
#ifndef GPUSCHED_MODEL_SNAPSHOT_H_
#define GPUSCHED_MODEL_SNAPSHOT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/model/name_index.h"
#include "gpusched/model/node.h"
#include "gpusched/util/strings.h"

namespace gpusched {

// The fields of a node the filter path reads, packed contiguously per
// snapshot so a 5,000-node request walks ~250 KB instead of chasing 5,000
// separately allocated NodeInfos.
struct alignas(64) NodeHot {  // one cache line
  const NodeInfo* info = nullptr;
  const GpuTopology* topology = nullptr;
  DeviceMask healthy = 0;
  DeviceMask whole_free = 0;
  int64_t gpu_memory_mib = 0;
  uint16_t product_id = 0;
  bool partial_share = false;
  int64_t cpu_free_milli = 0;  // allocatable minus requested CPU
  // StateHash of the GPU fields above: the key under which per-request memos
  // (policy::FilterMemo) look up nodes in the same GPU state.
  uint64_t state_hash = 0;

  static uint64_t StateHash(const GpuTopology* topology, uint16_t product_id,
                            int64_t gpu_memory_mib, DeviceMask healthy, DeviceMask whole_free) {
    uint64_t h = reinterpret_cast<uintptr_t>(topology);
    for (uint64_t v :
         {uint64_t{product_id}, static_cast<uint64_t>(gpu_memory_mib), healthy, whole_free}) {
      h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
      h ^= h >> 29;
    }
    return h;
  }
};
static_assert(sizeof(NodeHot) == 64, "NodeHot is meant to fill exactly one cache line");

struct DomainMemo;  // gpusched/model/topology_domains.h

// What is computed from the node set and the nodes' labels alone, shared by
// every snapshot with the same node set and labels: a change of pods,
// devices or any other node field keeps it. Its one slot holds the
// topology domains computed so far (CachedDomainsAt), replaced whole through
// the atomic pointer, never changed in place. Thread-safe.
struct LabelsEpoch {
  std::atomic<std::shared_ptr<const DomainMemo>> domains;
};

class ClusterSnapshot {
 public:
  using NodeIndex = NameIndex;

  // Nodes per shared chunk.
  static constexpr int kChunkShift = 7;
  static constexpr int32_t kChunk = 1 << kChunkShift;

  // A full build: every node, in index order.
  ClusterSnapshot(uint64_t generation, std::vector<std::shared_ptr<const NodeInfo>> nodes,
                  std::shared_ptr<const NodeIndex> index,
                  std::shared_ptr<const std::vector<std::string>> products);
  // `base` with the nodes at the given indices replaced (same node set and
  // index). Copies base's pointer array and the chunks `changed` touches.
  static std::shared_ptr<const ClusterSnapshot> Patched(
      const ClusterSnapshot& base, uint64_t generation,
      std::vector<std::pair<int32_t, std::shared_ptr<const NodeInfo>>> changed,
      std::shared_ptr<const std::vector<std::string>> products);
  // Chunks this snapshot shares with `other` (for tests of the sharing).
  int SharedChunks(const ClusterSnapshot& other) const;

  uint64_t generation() const { return generation_; }
  // Valid as long as the snapshot is.
  const std::vector<const NodeInfo*>& nodes() const { return nodes_; }
  // Returns the node or nullptr.
  const NodeInfo* Find(std::string_view name) const {
    const int32_t i = index_->Find(name);
    return i < 0 ? nullptr : nodes_[i];
  }
  // Returns the node's index, or -1.
  int32_t FindIndex(std::string_view name) const { return index_->Find(name); }
  // (*out)[i] = FindIndex(names[i]) for every name; faster than one by one.
  void FindIndices(const std::vector<std::string_view>& names, std::vector<int32_t>* out) const {
    out->resize(names.size());
    index_->FindAll(names.data(), names.size(), out->data());
  }
  const NodeHot& hot(int32_t index) const {
    return chunks_[index >> kChunkShift]->hot[index & (kChunk - 1)];
  }
  // Identity of the node set and its order: equal between two snapshots
  // exactly when both hold the same node names at the same indices (the
  // index is rebuilt only when the node set changes).
  const void* node_set_identity() const { return index_.get(); }
  // The node set itself: while held, no other node set can have its
  // identity (a cache keyed by node_set_identity holds this).
  std::shared_ptr<const void> node_set() const { return index_; }
  // Shared with the snapshots it was patched from, and those patched from
  // it, while the node set and every node's labels stay the same (equal
  // contents count as the same); a new one otherwise. A cache: written
  // only through its atomic slot, which is why a const snapshot hands it out.
  LabelsEpoch& labels_epoch() const { return *labels_epoch_; }
  // A hint that hot(index) is read soon (loops over request order, where
  // indices are random, prefetch a few nodes ahead).
  void PrefetchHot(int32_t index) const { __builtin_prefetch(&hot(index)); }
  const std::vector<std::string>& products() const { return *products_; }
  const std::string& product(const NodeInfo& n) const { return (*products_)[n.product_id]; }

  int64_t TotalGpus() const;
  int64_t AllocatedGpuMilli() const;

 private:
  // kChunk consecutive nodes: their packed fields and their ownership.
  struct Chunk {
    NodeHot hot[kChunk];
    std::shared_ptr<const NodeInfo> owner[kChunk];
  };
  ClusterSnapshot() = default;
  static NodeHot HotOf(const NodeInfo& n) {
    return NodeHot{&n,
                   n.topology.get(),
                   n.healthy,
                   n.whole_free,
                   n.gpu_memory_mib,
                   n.product_id,
                   n.partial_share,
                   n.cpu_milli - n.cpu_used_milli,
                   NodeHot::StateHash(n.topology.get(), n.product_id, n.gpu_memory_mib, n.healthy,
                                      n.whole_free)};
  }

  uint64_t generation_ = 0;
  std::vector<const NodeInfo*> nodes_;
  std::vector<std::shared_ptr<const Chunk>> chunks_;  // node i in chunks_[i / kChunk]
  std::shared_ptr<const NodeIndex> index_;
  std::shared_ptr<const std::vector<std::string>> products_;
  std::shared_ptr<LabelsEpoch> labels_epoch_;
};

// True if `entry` (e.g. "A100") matches `product` (e.g.
// "NVIDIA-A100-SXM4-80GB"): its dash-separated tokens appear contiguously
// among the product's tokens, case-insensitively.
bool ProductMatches(std::string_view entry, std::string_view product);

}  // namespace gpusched

#endif  // GPUSCHED_MODEL_SNAPSHOT_H_
