// The admission snapshot: what QueueManager::Admit reads to answer for a
// single pod already queued (or, where nothing waits, one the source has
// not shown yet), published under the queue mutex as every hold
// of it ends (QueueManager::StateHold), and read by the admissions after it
// without any lock (docs/architecture.md, "Admission on a snapshot").
//
// A snapshot is immutable once published. It is current while nobody has
// taken the queue mutex since (every writer of the queue's state takes it:
// LockHoldStats::acquisitions), ClusterState holds no pod change the queue
// has not taken, the request's cluster is no newer than the usage it was
// made from, and the clock is within what it was made for. One namespace's
// FrozenQueue is carried from snapshot to snapshot while the UnitIndex it
// was frozen from stays unchanged (FrozenLink marks it when it changes).
//
// Types only; QueueManager builds and reads them (admit_snapshot.cc).
#ifndef GPUSCHED_QUEUE_ADMIT_SNAPSHOT_H_
#define GPUSCHED_QUEUE_ADMIT_SNAPSHOT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/model/pod.h"

namespace gpusched::queue {

class GangUsage;
class QuotaLedger;
struct QueueOptions;

// When kube-scheduler last asked about a queued pod (-1: never). Shared by
// the queue's entry and every queue frozen from it, so that an admission on
// a snapshot notes the ask without the mutex.
struct AskClock {
  std::atomic<int64_t> at{-1};
};

// (node, reason) pairs: nodes a pod may not use (Admission::held_nodes; the
// same type as HeldNodeList).
using HeldNodes = std::vector<std::pair<std::string, std::string>>;

// A reclaim in flight whose victims' nodes are held for its pod: who it is
// for and whom the hold binds (QueueManager::HeldFor).
struct ReclaimHold {
  std::string ns;       // the namespace that reclaimed
  std::string for_uid;  // the pod it frees GPUs for
  std::string gang;     // that pod's gang ("" for a single pod)
  int32_t priority = 0;
  bool for_guarantee = false;  // its holds bind pods within their guarantee too
  std::shared_ptr<const HeldNodes> held;
};

// One namespace's queue as admission reads it: the UnitIndex's sums and
// each unit's head with its ask clock (the node scan's candidates are the
// counted units asked about), with the pods and clocks shared, so that it
// outlives the queue's entries; and the single pods it can answer for.
struct FrozenQueue {
  struct Unit {
    std::shared_ptr<const PodRequest> head;  // the source's
    std::shared_ptr<AskClock> asked;         // the head's
    int64_t first_seen_ms = 0;               // the head's
    int64_t demand = 0;                      // milli-GPUs the unit still needs
  };
  std::vector<Unit> units;
  std::vector<int64_t> demand_before;  // [i]: counted demand before unit i
  std::vector<int32_t> count_before;   // [i]: counted units before unit i
  // Single pods (not gang members) by uid (a view of the pod's own string)
  // -> their unit.
  absl::flat_hash_map<std::string_view, size_t> singles;
  // Members of the gangs not reserved when it was frozen, by uid (a view of
  // the member's own string): their unit, own pod and ask clock. One its
  // queue refuses is answered here; one it admits goes on to its gang's
  // reservation (a write: the mutex path's). A reservation made or dropped
  // drops the frozen queue of its namespace.
  struct Member {
    size_t unit = 0;
    std::shared_ptr<const PodRequest> pod;
    std::shared_ptr<AskClock> asked;
  };
  absl::flat_hash_map<std::string_view, Member> members;
  int64_t valid_until_ms = 0;     // the first time a counted unit goes stale
  uint64_t config_version = 0;    // the config it was built under
  uint64_t usage_generation = 0;  // the usage it was built on
  // Its gang units' gangs with their members on nodes then: on another
  // usage, its sums hold while each gang still has as many (UnitIndex's rule).
  std::vector<std::pair<std::string, int32_t>> gangs_held;
  // False once the UnitIndex it was frozen from changed or went away.
  mutable std::atomic<bool> current{true};
};

// The UnitIndex's link to the queue frozen from it: marks that queue no
// longer current when the index is rebuilt (assigned) or erased. Moving the
// index (a rehash) keeps it current.
class FrozenLink {
 public:
  FrozenLink() = default;
  FrozenLink(const FrozenLink&) = delete;
  FrozenLink& operator=(const FrozenLink&) = delete;
  FrozenLink(FrozenLink&& other) noexcept : queue_(std::move(other.queue_)) {}
  FrozenLink& operator=(FrozenLink&& other) noexcept {
    if (this != &other) {
      Drop();
      queue_ = std::move(other.queue_);
    }
    return *this;
  }
  ~FrozenLink() { Drop(); }

  const std::shared_ptr<const FrozenQueue>& get() const { return queue_; }
  void Set(std::shared_ptr<const FrozenQueue> queue) {
    Drop();
    queue_ = std::move(queue);
  }
  void Drop() {
    if (queue_ == nullptr) return;
    queue_->current.store(false, std::memory_order_release);
    queue_.reset();
  }

 private:
  std::shared_ptr<const FrozenQueue> queue_;
};

// The frozen queues by namespace: a map split in shards, so that a snapshot
// made from the last one copies one shard (a few namespaces), not all.
class FrozenQueues {
 public:
  // `ns`'s queue, or null (never frozen, or no longer current).
  const FrozenQueue* Find(std::string_view ns) const;
  // A copy with `ns` mapped to `queue`; the shard it copies leaves out the
  // queues no longer current.
  FrozenQueues With(const std::string& ns, std::shared_ptr<const FrozenQueue> queue) const;

 private:
  static constexpr size_t kShards = 64;
  using Shard = absl::flat_hash_map<std::string, std::shared_ptr<const FrozenQueue>>;
  static size_t ShardOf(std::string_view ns);
  std::array<std::shared_ptr<const Shard>, kShards> shards_;
};

// One ask as the snapshot path answers it (QueueManager::AnswerOnSnapshot).
struct SnapshotAsk {
  const FrozenQueue* queue = nullptr;
  size_t unit = 0;                  // its unit in `queue` (0 for a pod not shown yet)
  int64_t demand = 0;               // milli-GPUs its unit still needs
  const PodRequest* pod = nullptr;  // the source's; the request's if not shown yet
  bool gang = false;                // a gang member: admitted, it needs the mutex path
};

// The answer to a gang member the cluster source has not shown yet: no
// gang is reserved for pods the cluster does not show (both paths).
std::string UnshownGangMemberReason(const PodRequest& pod);

// What Admit reads for a single pod on the snapshot path. Immutable.
struct AdmitSnapshot {
  uint64_t acquisitions = 0;  // LockHoldStats::acquisitions of its hold
  uint64_t usage_generation = 0;
  uint64_t config_version = 0;
  std::shared_ptr<const QuotaLedger> ledger;  // with claims, warmed (shared by threads)
  std::shared_ptr<const QueueOptions> options;
  std::shared_ptr<const GangUsage> gangs;  // the usage's gang sums
  std::shared_ptr<const std::vector<ReclaimHold>> holds;
  int64_t holds_from_ms = 0;  // the holds are the ones of [from, until)
  int64_t holds_until_ms = 0;
  FrozenQueues queues;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_ADMIT_SNAPSHOT_H_
