// UsageIndex: the GPUs each namespace holds (in total and per GPU product)
// and the members each gang holds, summed over one ClusterSnapshot's nodes,
// kept current by re-reading only the nodes that changed since the last
// snapshot it saw. Snapshots share unchanged NodeInfos by pointer, so a bind
// costs one node's pods, not the cluster's.
//
// The sums are exactly what a walk over every pod of every node gives
// (QuotaLedger's from-scratch constructor, the differential tests): a
// namespace or product appears while at least one pod of it is on a node,
// even one holding 0 GPUs.
//
// It also sums the cluster's GPU capacity (NodeCapacityMilli: what the
// work-conserving quota model lends from), in total and per product.
//
// QuotaLedgers are built from it without copying the sums: Table() is a
// sorted list of pointers to immutable per-namespace sums, shared until a
// namespace changes (copy on write, one namespace at a time).
//
// Owned by QueueManager under its mutex; thread-compatible. A UsageTable is
// immutable and may be read from any thread.
#ifndef GPUSCHED_QUEUE_USAGE_INDEX_H_
#define GPUSCHED_QUEUE_USAGE_INDEX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gpusched/model/snapshot.h"

namespace gpusched::queue {

// GPUs one namespace holds: milli-GPUs and pod counts, in total and by the
// product of the node they are on.
struct NamespaceUse {
  std::string ns;
  int64_t total = 0;
  int64_t pods = 0;
  std::map<std::string, int64_t> by_product;       // milli
  std::map<std::string, int64_t> pods_by_product;  // counts (keys live while > 0)
};

// The GPUs of the cluster that pods can hold, in milli-GPUs, in total and
// per product. A node counts its healthy devices, or what its pods hold if
// that is more; a cordoned node counts only what its pods hold (its free
// devices cannot be given to anyone).
struct GpuCapacity {
  int64_t total = 0;
  std::map<std::string, int64_t> by_product;
  bool operator==(const GpuCapacity&) const = default;
};

// What `node` adds to GpuCapacity (milli-GPUs).
int64_t NodeCapacityMilli(const NodeInfo& node);

// Every namespace holding pods on nodes, sorted by name, and the capacity.
// Immutable; copies share the sums.
class UsageTable {
 public:
  using Row = std::shared_ptr<const NamespaceUse>;
  UsageTable() = default;
  // REQUIRES: rows sorted by ns, no namespace twice.
  UsageTable(std::vector<Row> rows, GpuCapacity capacity)
      : rows_(std::move(rows)), capacity_(std::move(capacity)) {}
  // From sums made some other way (the from-scratch walk).
  static std::shared_ptr<const UsageTable> Of(std::map<std::string, NamespaceUse> use,
                                              GpuCapacity capacity);

  const NamespaceUse* Find(const std::string& ns) const;
  bool contains(const std::string& ns) const { return Find(ns) != nullptr; }
  const std::vector<Row>& rows() const { return rows_; }
  const GpuCapacity& capacity() const { return capacity_; }

 private:
  std::vector<Row> rows_;
  GpuCapacity capacity_;
};

// The pods each gang holds on nodes (members and reservation holders), in
// total and per node, as of one snapshot. Immutable once handed out by
// UsageIndex::Gangs(); copies of the index's table share every gang that
// did not change since (copy on write, one gang at a time), so publishing
// it for planners costs a pointer, and the next change O(gangs) pointers.
class GangUsage {
 public:
  // Pods of gang `gang` of `ns` on nodes.
  int32_t Held(const std::string& ns, const std::string& gang) const;
  // The nodes holding pods of gang `gang` of `ns`, with how many each (null:
  // none).
  const absl::flat_hash_map<std::string, int32_t>* Nodes(const std::string& ns,
                                                         const std::string& gang) const;
  size_t size() const { return by_key_.size(); }

 private:
  friend class UsageIndex;
  struct Gang {
    int32_t held = 0;
    absl::flat_hash_map<std::string, int32_t> nodes;  // node name -> pods there
  };
  absl::flat_hash_map<std::string, std::shared_ptr<Gang>> by_key_;  // "ns/gang"
};

class UsageIndex {
 public:
  UsageIndex() = default;
  // Not copyable: a copy would share the gang table it writes in place.
  UsageIndex(const UsageIndex&) = delete;
  UsageIndex& operator=(const UsageIndex&) = delete;

  // Brings the sums to `snapshot`: O(changed nodes' pods) when the node set
  // is the one of the last call, O(all pods) otherwise.
  void Update(std::shared_ptr<const ClusterSnapshot> snapshot);
  // Forgets everything; the next Update reads every node.
  void Clear();

  // The sums as they are now: O(namespaces) pointer copies after a change,
  // free while nothing changes.
  std::shared_ptr<const UsageTable> Table() const;
  // Generation of the snapshot the sums are for (0 before the first Update).
  uint64_t generation() const { return last_ == nullptr ? 0 : last_->generation(); }
  // The snapshot the sums are for (null before the first Update).
  const std::shared_ptr<const ClusterSnapshot>& snapshot() const { return last_; }
  // Pods of gang `gang` of `ns` on nodes (members and reservation holders).
  int32_t GangHeld(const std::string& ns, const std::string& gang) const {
    return gangs_->Held(ns, gang);
  }
  // The gang sums as they are now, to read without the owner's lock: O(1);
  // the next change then copies O(gangs) pointers, and each gang it touches.
  std::shared_ptr<const GangUsage> Gangs() const;

 private:
  void Apply(const NodeInfo& node, const std::string& product, int sign);

  std::shared_ptr<const ClusterSnapshot> last_;  // keeps its nodes alive
  // Writable sums: a row a Table still shares is copied before it changes.
  NamespaceUse& Mutable(const std::string& ns);

  std::map<std::string, std::shared_ptr<NamespaceUse>> use_;
  GpuCapacity capacity_;
  mutable std::shared_ptr<const UsageTable> table_;  // for use_ as it is; null: make again
  // Writable gang sums: the table itself is copied before a change once
  // Gangs() has handed it out, and a gang not in gangs_owned_ (made or
  // copied since then) is copied before it changes.
  GangUsage::Gang& MutableGang(const std::string& key);
  void ClearGangs();
  std::shared_ptr<GangUsage> gangs_ = std::make_shared<GangUsage>();
  mutable bool gangs_shared_ = false;
  mutable absl::flat_hash_set<std::string> gangs_owned_;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_USAGE_INDEX_H_
