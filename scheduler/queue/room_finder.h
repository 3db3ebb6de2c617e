// Room for a pod "as is" on a cluster the caller changes one node at a time:
// the node that passes the filter and the per-model quota, has a device set
// for the pod, and scores best (ties: the first node in snapshot order).
//
// Two ways to the same answer. FindRoomByScan filters and scores every node
// on every call: the reference. RoomFinder filters and scores every node once
// (through FilterMemo, one evaluation per distinct node state), keeps them in
// score order, and after a change re-evaluates only the changed node; only
// the quota is asked again per call (once per GPU product). Placing a gang's
// eight members on 5,000 nodes costs one pass over the nodes, not eight.
//
// Callers: gang reservations (PlaceMembers, without the queue mutex) and the
// gang preemption planner. Pure over the snapshot, the framework and the
// ledger given; not thread-safe (one per placement).
#ifndef GPUSCHED_QUEUE_ROOM_FINDER_H_
#define GPUSCHED_QUEUE_ROOM_FINDER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/policy/framework.h"
#include "scheduler/queue/quota_ledger.h"

namespace gpusched::queue {

// A node with room: its index in snapshot.nodes() (kNoRoom if none) and
// the devices the pod would get there.
struct Room {
  static constexpr size_t kNoRoom = SIZE_MAX;
  size_t index = kNoRoom;
  DeviceMask devices = 0;
  bool found() const { return index != kNoRoom; }
};

// A subset of the nodes (indices into snapshot.nodes(), ascending) a search
// is confined to, e.g. one topology domain; null: every node.
using NodeSubset = std::vector<int32_t>;

// The reference: every node (of `only`), as `view(k)` shows node k, with
// `fits(k)` its filter verdict there.
Room FindRoomByScan(const PodRequest& pod, const policy::PodContext& ctx,
                    const ClusterSnapshot& snapshot, const policy::Framework& fw,
                    const QuotaLedger& ledger, const std::function<const NodeInfo&(size_t)>& view,
                    const std::function<bool(size_t)>& fits, const NodeSubset* only = nullptr);

class RoomFinder {
 public:
  // `pod`, `ctx`, `snapshot`, `fw` and `only` must outlive the finder.
  // With `only`, the other nodes never have room.
  RoomFinder(const PodRequest& pod, const policy::PodContext& ctx, const ClusterSnapshot& snapshot,
             const policy::Framework& fw, const NodeSubset* only = nullptr);

  // The same answer as FindRoomByScan over the nodes as changed so far.
  Room Best(const QuotaLedger& ledger);
  // Node k as changed so far (the snapshot's node if unchanged).
  const NodeInfo& View(size_t k) const;
  // Node k is now `node` (same name and product).
  void Change(size_t k, NodeInfo node);

 private:
  struct Candidate {
    int64_t score;
    size_t index;
    bool no_room;  // fits, but no device set in this state
  };
  // Score order: higher first, then snapshot order.
  static bool Before(const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score > b.score : a.index < b.index;
  }
  void Insert(size_t k, const NodeInfo& node);

  const PodRequest& pod_;
  const policy::PodContext& ctx_;
  const ClusterSnapshot& snapshot_;
  const policy::Framework& fw_;
  std::vector<bool> allowed_;     // with `only`: per node index
  std::vector<Candidate> order_;  // the nodes that pass the filter, in score order
  absl::flat_hash_map<size_t, NodeInfo> changed_;
};

// Places `missing` copies of `pod` one after another, each where it has the
// most room as the earlier ones leave the nodes, within `ledger`'s per-model
// quota: (node, devices) per copy placed, fewer than `missing` if the
// cluster (or `only`) runs out. `by_scan` uses FindRoomByScan (the
// reference).
std::vector<std::pair<std::string, DeviceMask>> PlaceMembers(
    const ClusterSnapshot& snapshot, const policy::Framework& fw, const PodRequest& pod,
    QuotaLedger ledger, int32_t missing, bool by_scan, const NodeSubset* only = nullptr);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_ROOM_FINDER_H_
