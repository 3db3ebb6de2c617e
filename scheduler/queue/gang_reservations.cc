// QueueManager: gang reservations. Devices for every missing member of a gang
// are found on hypothetical copies of the nodes and then held in ClusterState
// by placeholder pods (PodRequest::reservation) until the members
// bind or the reservation expires (gang.reservationSeconds).
#include <algorithm>
#include <bit>
#include <iostream>

#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {

QueueManager::Slot* QueueManager::SlotOfLocked(const std::string& uid) {
  for (auto& [key, r] : reservations_) {
    for (Slot& s : r.slots) {
      if (s.member_uid == uid) return &s;
    }
  }
  return nullptr;
}

std::string QueueManager::ReservedNode(const PodRequest& pod) {
  TimedLock l(&mu_, &lock_stats_, deps_.metrics);
  return ReservedNodeLocked(pod);
}

std::string QueueManager::ReservedNodeLocked(const PodRequest& pod) {
  const Slot* s = SlotOfLocked(pod.uid);
  return s != nullptr && !s->bound ? s->node : "";
}

QueueManager::Room QueueManager::BestRoom(const PodRequest& pod, const policy::PodContext& ctx,
                                          const ClusterSnapshot& snapshot,
                                          const policy::Framework& fw, const QuotaLedger& ledger,
                                          const std::function<const NodeInfo&(size_t)>& view,
                                          const std::function<bool(size_t)>& fits) {
  Room best;
  int64_t best_score = -1;
  const int64_t demand = DemandMilli(pod.gpu);
  for (size_t k = 0; k < snapshot.nodes().size(); ++k) {
    if (!fits(k)) continue;
    const NodeInfo& n = view(k);
    if (!ledger.CheckModels(pod.ns, snapshot.product(n), demand).empty()) continue;
    auto placement = policy::ChoosePlacement(pod.gpu, n);
    if (!placement.has_value()) continue;
    const int64_t score = fw.Score(ctx, n);
    if (score > best_score) {
      best = {k, placement->devices};
      best_score = score;
    }
  }
  return best;
}

int32_t QueueManager::PlaceGangLocked(const PodRequest& pod, int32_t missing,
                                      const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                      std::vector<std::pair<std::string, DeviceMask>>* picks) {
  policy::PodContext ctx = fw.Prepare(pod, snapshot);
  QuotaLedger ledger = LedgerLocked();
  const int64_t demand = DemandMilli(pod.gpu);
  const auto& nodes = snapshot.nodes();
  std::map<std::string, NodeInfo> changed;
  auto view = [&](size_t k) -> const NodeInfo& {
    auto c = changed.find(nodes[k]->name);
    return c == changed.end() ? *nodes[k] : c->second;
  };
  auto fits = [&](size_t k) { return fw.Filter(ctx, view(k)).fits(); };
  for (int32_t i = 0; i < missing; ++i) {
    const Room room = BestRoom(pod, ctx, snapshot, fw, ledger, view, fits);
    if (room.index == SIZE_MAX) return i;
    const std::string name = nodes[room.index]->name;
    NodeInfo next = policy::WithPod(view(room.index), pod, room.devices);
    ledger.Add(pod.ns, snapshot.product(next), demand);
    changed[name] = std::move(next);
    picks->emplace_back(name, room.devices);
  }
  return missing;
}

std::string QueueManager::ClaimOrReserveLocked(const PodRequest& pod,
                                               const ClusterSnapshot& snapshot,
                                               const policy::Framework& fw) {
  auto existing = reservations_.find(GangKey(pod.ns, pod.gang));
  if (existing != reservations_.end()) {
    std::vector<Slot>& slots = existing->second.slots;
    for (Slot& s : slots) {
      if (s.member_uid == pod.uid) return "";
    }
    for (Slot& s : slots) {
      // Free, or claimed by a member that has gone away since.
      bool free = s.member_uid.empty();
      if (!free && !s.bound) {
        auto m = deps_.state->FindPod(s.member_uid);
        free = !m.has_value() || m->deleting;
      }
      if (free && !s.bound) {
        s.member_uid = pod.uid;
        return "";
      }
    }
    return StrCat("gpusched: gang ", pod.gang, ": all ", slots.size(),
                  " reserved device sets are claimed by other members");
  }
  const int32_t missing = pod.gang_size - HeldGangMembersLocked(pod);
  // The gang has started (its gang_size, for an elastic gang its minMember,
  // hold GPUs): a further member runs on its own, like a single pod.
  if (missing <= 0) return "";
  std::vector<std::pair<std::string, DeviceMask>> picks;
  const int32_t placed = PlaceGangLocked(pod, missing, snapshot, fw, &picks);
  if (placed < missing) {
    return StrCat("gpusched: gang ", pod.gang, " needs ", missing, " x ",
                  FormatGpus(DemandMilli(pod.gpu)), " GPUs at once; only ", placed, " fit now");
  }
  Reservation r;
  r.ns = pod.ns;
  r.gang = pod.gang;
  r.deadline_ms = Now() + int64_t{options_.gang.reservation_seconds} * 1000;
  const uint64_t seq = ++reservation_seq_;
  for (size_t i = 0; i < picks.size(); ++i) {
    PodRequest ph = pod;
    ph.uid = StrCat(kReservationUidPrefix, pod.ns, "/", pod.gang, "/", seq, "-", i);
    ph.name = StrCat("gpusched-reservation-", pod.gang, "-", seq, "-", i);
    ph.node_name.clear();
    ph.phase = PodPhase::kPending;
    ph.start_unix = Now() / 1000;
    ph.reservation = true;
    absl::Status s = deps_.state->Assume(ph, picks[i].first, picks[i].second);
    if (!s.ok()) {
      ReleaseLocked(r);
      return StrCat("gpusched: gang ", pod.gang, " reservation failed: ", FromAbsl(s.message()));
    }
    r.slots.push_back({ph.uid, picks[i].first, picks[i].second, "", false});
  }
  r.slots.front().member_uid = pod.uid;
  Log(StrCat("gpusched: reserved ", picks.size(), " device sets for gang ", pod.ns, "/", pod.gang,
             " for ", options_.gang.reservation_seconds, "s"));
  reservations_[GangKey(pod.ns, pod.gang)] = std::move(r);
  return "";
}

void QueueManager::ReleaseLocked(Reservation& r) {
  for (const Slot& s : r.slots) {
    if (!s.bound) deps_.state->RemovePod(s.placeholder_uid);
  }
  deps_.state->Commit();
}

void QueueManager::ExpireReservationsLocked() {
  const int64_t now = Now();
  for (auto it = reservations_.begin(); it != reservations_.end();) {
    Reservation& r = it->second;
    bool lost = false;  // a relist dropped a placeholder
    for (const Slot& s : r.slots) {
      if (!s.bound && !deps_.state->FindPod(s.placeholder_uid).has_value()) lost = true;
    }
    if (now >= r.deadline_ms || lost) {
      Log(StrCat("gpusched: gang ", r.ns, "/", r.gang, " reservation ", lost ? "lost" : "expired",
                 "; releasing its unbound devices"));
      ReleaseLocked(r);
      reservations_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace gpusched::queue
