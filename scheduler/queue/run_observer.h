// RunObserver: turns what the cluster shows into RuntimeHistory records.
// It follows the GPU pods on nodes between snapshots (re-reading only the
// nodes that changed, as UsageIndex does) and, for each pod that has left
// its node, asks the caller how it ended: a completed run is recorded with
// its runtime (end - status.startTime); a failed, evicted or unknown end is
// not. Seed records the finished pods a restarted scheduler finds in the
// API (phase Succeeded with a finishedAt), and Load the history written to
// the API before the restart (kube/history_store.h): a run known from both
// counts once (its workload and the tag of its pod's uid name it).
//
// Owned by the start estimator's refresh (StartEstimates in
// queue_manager's estimate step), which calls it on its own thread;
// thread-compatible.
#ifndef GPUSCHED_QUEUE_RUN_OBSERVER_H_
#define GPUSCHED_QUEUE_RUN_OBSERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gpusched/model/pod.h"
#include "gpusched/model/snapshot.h"
#include "scheduler/queue/runtime_estimates.h"

namespace gpusched::queue {

class RunObserver {
 public:
  // For a pod that left its node at `now_s`: when its run ended (a
  // completion), or nullopt (failed, evicted, deleted: not a runtime).
  using EndOf = std::function<std::optional<int64_t>(const std::string& uid, int64_t now_s)>;

  // Records into `history` the runs that ended since the last call.
  // O(pods on changed nodes), O(all pods) when the node set changed.
  void Observe(const std::shared_ptr<const ClusterSnapshot>& snapshot, int64_t now_s,
               const EndOf& end_of, RuntimeHistory* history);
  // Records the finished pods among `pods` (Finished), each uid once, the
  // oldest first.
  void Seed(std::vector<PodRequest> pods, RuntimeHistory* history);
  // Records the runs of `saved` (most recently run workload first, as
  // RuntimeHistory::Workloads gives them) that Seed has not recorded, and
  // keeps Seed from recording them again.
  void Load(const std::vector<PersistedWorkload>& saved, RuntimeHistory* history);
  // A pod whose run Seed can record: Succeeded, with start and finish
  // times, asking for GPUs (a filter for ClusterState::PodsWhere).
  static bool Finished(const PodRequest& pod);
  size_t tracked() const { return running_.size(); }

 private:
  struct Running {
    std::string ns;
    std::string workload;
    int32_t gpus = 0;
    int64_t start_s = 0;
  };
  std::shared_ptr<const ClusterSnapshot> last_;
  absl::flat_hash_map<std::string, Running> running_;  // uid -> pod on a node
  // Runs recorded by Seed or Load ("ns/workload/tag"), until both are done.
  absl::flat_hash_set<std::string> known_;
  bool seeded_ = false, loaded_ = false;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_RUN_OBSERVER_H_
