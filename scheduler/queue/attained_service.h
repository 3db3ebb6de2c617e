// AttainedService: the GPU-seconds each workload has run (a gang, a Job, or
// a pod alone: PodRequest::WorkloadKey, within its namespace), over its pods
// now on nodes and those that have left them, kept current from the nodes
// that changed between snapshots (as UsageIndex is). A workload's pods that
// are evicted and replaced keep adding to the same sum: that is what the
// attained-service ordering (AttainedServiceConfig, docs/queue.md) reads.
//
// A pod counts from status.startTime (or from when it was first seen on a
// node, if it has none yet) until it is seen gone. Sums of workloads with no
// pod on a node are forgotten `forget_after_s` after their last pod left;
// the workloads whose last pod left are kept in order of when it did, so
// forgetting costs the forgotten ones, not every workload.
// The sums live in memory: a restarted scheduler counts from zero.
//
// Owned by QueueManager under its mutex; thread-compatible.
#ifndef GPUSCHED_QUEUE_ATTAINED_SERVICE_H_
#define GPUSCHED_QUEUE_ATTAINED_SERVICE_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gpusched/core/config.h"
#include "gpusched/model/snapshot.h"

namespace gpusched::queue {

// The attained-service settings of namespace `ns` (disabled without quotas).
const AttainedServiceConfig& AttainedOf(const QuotaConfig& quotas, const std::string& ns);

class AttainedService {
 public:
  // One running pod of a workload.
  struct RunningPod {
    std::string uid;
    int32_t priority = 0;
    int64_t start_s = 0;
  };
  // What one workload has run; milli-GPU-seconds so far = banked +
  // running_milli * now_s - running_milli_start.
  struct Workload {
    int64_t banked = 0;               // milli-GPU-s of pods that left
    int64_t running_milli = 0;        // milli-GPUs its pods on nodes hold
    int64_t running_milli_start = 0;  // sum of milli * start_s over them
    int64_t last_left_s = 0;          // when its last pod left a node
    bool awaits_forget = false;       // in the forget order (at most once)
    std::vector<RunningPod> running;
    int64_t MilliSeconds(int64_t now_s) const {
      return banked + running_milli * now_s - running_milli_start;
    }
  };

  // Brings the sums to `snapshot` at `now_s`: O(changed nodes' pods) when
  // the node set is the one of the last call, O(all pods) otherwise.
  void Update(std::shared_ptr<const ClusterSnapshot> snapshot, int64_t now_s);
  // GPU-seconds workload `workload` of `ns` has run by `now_s` (0 if
  // unknown).
  double GpuSeconds(const std::string& ns, const std::string& workload, int64_t now_s) const;
  // The workloads of `ns` (null if none).
  const absl::flat_hash_map<std::string, Workload>* Of(const std::string& ns) const;
  // Drops workloads with no pod on a node whose last pod left before
  // now_s - forget_after_s, at most `max_forgets` of them (the earliest
  // first; the rest on the next call). O(forgotten x log workloads).
  // Returns how many were dropped.
  size_t Forget(int64_t now_s, int64_t forget_after_s,
                size_t max_forgets = std::numeric_limits<size_t>::max());
  // The workload of a pod on a node (null if not tracked).
  const std::string* WorkloadOf(const std::string& uid) const;
  size_t size() const { return pods_.size(); }

 private:
  struct PodRecord {
    std::string ns;
    std::string workload;
    int64_t milli = 0;
    int64_t start_s = 0;
  };
  void Add(const PodOnNode& p, int64_t now_s);
  void Remove(const std::string& uid, int64_t now_s);
  // (last_left_s, ns, workload) of workloads whose pods all left, earliest
  // first; an entry is checked against the workload when it comes up.
  using LeftEntry = std::tuple<int64_t, std::string, std::string>;
  std::priority_queue<LeftEntry, std::vector<LeftEntry>, std::greater<>> left_;

  std::shared_ptr<const ClusterSnapshot> last_;
  absl::flat_hash_map<std::string, PodRecord> pods_;  // uid -> record (pods on nodes)
  // namespace -> workload -> sums.
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, Workload>> workloads_;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_ATTAINED_SERVICE_H_
