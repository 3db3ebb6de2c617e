// DiffSnapshots: what may have changed in the GPU pods between two
// ClusterSnapshots, reading only the nodes whose NodeInfo changed
// (snapshots share unchanged nodes by pointer), or every node when the node
// set changed or there is no earlier snapshot. Callers track running pods
// by UID: they add the pods of `present` they do not track yet and drop the
// UIDs of `maybe_gone` they track. Used by RunObserver and AttainedService;
// pure (header-only). Both lists come in a fixed order (node order; UID
// order), never in hash order: absl's hash is seeded per process, and what
// callers record in order (runtime history rings) must not change from one
// process to the next.
#ifndef GPUSCHED_QUEUE_SNAPSHOT_DELTA_H_
#define GPUSCHED_QUEUE_SNAPSHOT_DELTA_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gpusched/model/snapshot.h"

namespace gpusched::queue {

struct SnapshotDelta {
  // GPU pods (not reservations) on the nodes read, pointing into `now`.
  std::vector<const PodOnNode*> present;
  // UIDs that were on the changed nodes (or tracked) and are not in
  // `present`, sorted.
  std::vector<std::string> maybe_gone;
};

// `tracked`: a map keyed by the UIDs the caller tracks (all of them may be
// gone when the node set changed).
template <typename TrackedMap>
SnapshotDelta DiffSnapshots(const ClusterSnapshot* last, const ClusterSnapshot& now,
                            const TrackedMap& tracked) {
  SnapshotDelta d;
  absl::flat_hash_set<std::string> gone;
  auto read = [&d](const NodeInfo& n) {
    for (const PodOnNode& p : n.pods) {
      if (!p.reservation && p.gpus > 0) d.present.push_back(&p);
    }
  };
  const auto& nodes = now.nodes();
  if (last != nullptr && last->node_set_identity() == now.node_set_identity()) {
    const auto& before = last->nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (before[i] == nodes[i]) continue;
      for (const PodOnNode& p : before[i]->pods) gone.insert(p.uid);
      read(*nodes[i]);
    }
  } else {
    for (const auto& [uid, unused] : tracked) gone.insert(uid);
    for (const auto& n : nodes) read(*n);
  }
  for (const PodOnNode* p : d.present) gone.erase(p->uid);
  d.maybe_gone.assign(gone.begin(), gone.end());
  std::sort(d.maybe_gone.begin(), d.maybe_gone.end());
  return d;
}

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_SNAPSHOT_DELTA_H_
