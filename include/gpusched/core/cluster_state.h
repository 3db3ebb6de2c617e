// ClusterState: the single mutable model of the cluster: node specs and the
// pods the scheduler knows (bound, assumed or pending). Sources feed it
// (a --cluster file, the Kubernetes watch, the simulator, our own binds);
// it publishes immutable ClusterSnapshots that policies read.
//
// Accounting rules (fail closed, never over-allocate):
//  - a pod holds GPUs while it has a node and is not Succeeded/Failed;
//  - devices named by gpusched.io/gpu-ids are used. A claim that cannot be
//    honoured as written (ids the node does not have, a count other than the
//    pod's, a device another pod claimed first; pods that started earlier
//    are honoured first) is a conflict: that pod's devices are unknown and
//    it holds free devices as below, so every claim counts;
//  - a bound pod without ids (or with an unusable claim) holds that many
//    devices anyway: its own claimed devices that are free, then the
//    lowest-index free healthy devices, are marked used for it;
//  - devices at or beyond allocatable nvidia.com/gpu (unhealthy) are never
//    offered: the highest indices are taken as the unhealthy ones.
//
// Thread-safe: every method locks; Snapshot() is cheap and lock-light.
#ifndef GPUSCHED_CORE_CLUSTER_STATE_H_
#define GPUSCHED_CORE_CLUSTER_STATE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/core/config.h"
#include "gpusched/core/topology_catalog.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"
#include "gpusched/model/snapshot.h"

namespace gpusched {

// Returns the NodeInfo for `spec` with `pods` (those bound to it) applied;
// inconsistent device claims are counted in NodeInfo::device_conflicts and,
// if `conflicts` is not null, described there (naming the pods and devices).
NodeInfo BuildNodeInfo(const NodeSpec& spec, std::shared_ptr<const GpuTopology> topology,
                       const std::vector<const PodRequest*>& pods, uint16_t product_id,
                       std::vector<std::string>* conflicts = nullptr);

class ClusterState {
 public:
  explicit ClusterState(std::vector<TopologyTemplate> templates = {});

  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // Mutations. They take effect for readers at the next Commit().
  void UpsertNode(NodeSpec spec) ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveNode(std::string_view name) ABSL_LOCKS_EXCLUDED(mu_);
  void UpsertPod(PodRequest pod) ABSL_LOCKS_EXCLUDED(mu_);
  void RemovePod(std::string_view uid) ABSL_LOCKS_EXCLUDED(mu_);
  // RemovePod for each of `uids`, under one acquisition of the mutex, and
  // commits (a batch of evictions applied to an in-memory cluster).
  void RemovePodsAndCommit(const std::vector<std::string>& uids) ABSL_LOCKS_EXCLUDED(mu_);
  // One pod change: the pod as it now is, or (nullopt) gone.
  struct PodUpdate {
    std::string uid;
    std::optional<PodRequest> pod;
  };
  // UpsertPod or RemovePod for each update in order, under one acquisition
  // of the mutex, then one commit (a burst of watch events, one snapshot).
  void ApplyPodsAndCommit(std::vector<PodUpdate> updates) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces everything (a full relist or a file reload).
  void Reset(std::vector<NodeSpec> nodes, std::vector<PodRequest> pods) ABSL_LOCKS_EXCLUDED(mu_);

  // Atomically checks that `devices` (or, for a shared pod, its share of the
  // one device) are free on `node` and records `pod` as bound there with
  // those ids; commits. Fails (and changes nothing) if the pod is already
  // bound, the node is unknown, or a device is taken.
  absl::Status Assume(const PodRequest& pod, std::string_view node, DeviceMask devices)
      ABSL_LOCKS_EXCLUDED(mu_);

  // One pod of AssumeAll: bound to `node` with `devices`.
  struct Assumption {
    PodRequest pod;
    std::string node;
    DeviceMask devices = 0;
  };
  // Assume for several pods at once (a gang's placeholders): all of them or,
  // if any would fail (also against each other), none; one commit.
  absl::Status AssumeAll(const std::vector<Assumption>& pods) ABSL_LOCKS_EXCLUDED(mu_);

  // Rolls back an assumption: the pod is pending again, its devices free.
  void Forget(std::string_view uid) ABSL_LOCKS_EXCLUDED(mu_);

  // Publishes pending mutations and returns the new snapshot.
  std::shared_ptr<const ClusterSnapshot> Commit() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the last published snapshot (never null). Does not take the
  // mutex: readers never wait on a writer applying a burst of changes.
  std::shared_ptr<const ClusterSnapshot> Snapshot() const;

  // Returns a copy of the pod known under `uid`.
  std::optional<PodRequest> FindPod(std::string_view uid) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a pod is known under each of `uids` (in order): one
  // acquisition of the mutex and no copies, for callers checking many pods
  // (the queue's tick, which holds its own mutex meanwhile).
  std::vector<bool> HasPods(const std::vector<std::string_view>& uids) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Returns a copy of the pod known as namespace/name.
  std::optional<PodRequest> FindPodByName(std::string_view ns, std::string_view name) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Returns copies of all pods.
  std::vector<PodRequest> Pods() const ABSL_LOCKS_EXCLUDED(mu_);
  // Returns copies of the pods `keep` accepts, in no particular order. Under
  // the mutex it only walks and copies what it keeps (no sort): a caller
  // off the request path that wants a few pods of a large cluster (the
  // finished ones) holds writers and binds back far less than with Pods().
  std::vector<PodRequest> PodsWhere(const std::function<bool(const PodRequest&)>& keep) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The pods changed (upserted, removed, assumed, forgotten) since the last
  // call, for the one incremental reader of pending pods (the queue
  // manager). Each changed uid comes with the pod as it is now if `keep`
  // accepts it, else nullopt (gone, or no longer of interest). `all` (and
  // the first call, and the first call after Reset) returns every pod
  // `keep` accepts with `full` set: the reader starts over. O(changes), and
  // without the mutex when nothing changed (the reader may hold its own).
  // The pods are shared, not copied: the state never changes a published
  // PodRequest (a change stores a new one), so the reader may keep them.
  struct PodChanges {
    bool full = false;
    std::vector<std::pair<std::string, std::shared_ptr<const PodRequest>>> pods;  // null: gone
  };
  PodChanges TakePodChanges(const std::function<bool(const PodRequest&)>& keep, bool all = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a pod changed since the last TakePodChanges. Without the mutex
  // (the queue's admission on a snapshot asks it per filter).
  bool PodChangesPending() const { return pods_changed_.load(std::memory_order_acquire); }
  // Waits until a pod change is pending (PodChangesPending) or `timeout`
  // passes; whether one is. For the one thread that applies the source's
  // changes to the queue as they come (queue::SourceSyncThread).
  bool AwaitPodChanges(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

  // Node specs whose topology annotation was rejected, with why.
  std::vector<std::pair<std::string, std::string>> TopologyErrors() const ABSL_LOCKS_EXCLUDED(mu_);

  // Device conflicts of the published nodes (BuildNodeInfo), as (node, what),
  // sorted.
  std::vector<std::pair<std::string, std::string>> DeviceConflicts() const ABSL_LOCKS_EXCLUDED(mu_);
  // Called once per conflict when a commit first finds it (node, what), under
  // the state's mutex: it must not call back into the state. Set before the
  // source starts.
  using ConflictLog = std::function<void(const std::string&, const std::string&)>;
  void SetConflictLog(ConflictLog log) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  uint16_t ProductId(const std::string& product) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteChanged(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnlinkPod(const PodRequest& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpsertPodLocked(PodRequest pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemovePodLocked(std::string_view uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `pod` may be assumed onto `node` with `devices` on top of the
  // current snapshot and `taken` (milli per (node, device) of the pods of
  // the same AssumeAll checked before it; added to).
  absl::Status CheckAssumableLocked(const PodRequest& pod, const std::string& node,
                                    DeviceMask devices,
                                    std::map<std::pair<std::string, int>, int>* taken)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<const ClusterSnapshot> CommitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the conflicts `node` was just built with; logs the new ones.
  void NoteConflictsLocked(const std::string& node, std::vector<std::string> found)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  TopologyCatalog catalog_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, NodeSpec> nodes_ ABSL_GUARDED_BY(mu_);
  // By uid. Immutable once stored (a change stores a new PodRequest), so
  // that TakePodChanges hands the queue the same object instead of a copy
  // of over 700 bytes per waiting pod.
  absl::flat_hash_map<std::string, std::shared_ptr<const PodRequest>> pods_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> uid_by_key_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> pods_by_node_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dirty_ ABSL_GUARDED_BY(mu_);
  // Pods changed since the last TakePodChanges (uids); all of them after Reset.
  absl::flat_hash_set<std::string> changed_pods_ ABSL_GUARDED_BY(mu_);
  bool pods_reset_ ABSL_GUARDED_BY(mu_) = true;
  // Whether changed_pods_ or pods_reset_ holds anything: set under mu_ by
  // every change, cleared under mu_ by TakePodChanges, read without it.
  std::atomic<bool> pods_changed_{true};
  bool topology_changed_ ABSL_GUARDED_BY(mu_) = true;
  absl::flat_hash_map<std::string, std::shared_ptr<const NodeInfo>> built_ ABSL_GUARDED_BY(mu_);
  // Nodes with device conflicts, as last built (kept over a Reset, so a
  // relist does not log them again).
  absl::flat_hash_map<std::string, std::vector<std::string>> conflicts_ ABSL_GUARDED_BY(mu_);
  ConflictLog conflict_log_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> product_names_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const std::vector<std::string>> products_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const ClusterSnapshot::NodeIndex> index_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<const NodeInfo>> order_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const ClusterSnapshot> current_ ABSL_GUARDED_BY(mu_);
  // current_, published for Snapshot() (stored under mu_, read without it).
  std::atomic<std::shared_ptr<const ClusterSnapshot>> published_;
};

}  // namespace gpusched

#endif  // GPUSCHED_CORE_CLUSTER_STATE_H_
