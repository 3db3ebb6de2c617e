// QueueManager: gang reservations. Devices for every missing member of a gang
// are found on hypothetical copies of the nodes, without the queue mutex
// (ReserveForGang: placed on a PlanningView, recorded by the commit rule,
// PlanCurrentLocked, like every plan), and then held in ClusterState by
// placeholder pods (PodRequest::reservation) until the members bind or the
// reservation expires (gang.reservationSeconds). Nothing is placed under
// the mutex: a placement the cluster changed under is placed again, at most
// kGangPlacements times per filter.
#include <algorithm>
#include <bit>
#include <iostream>

#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/domain_placement.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/room_finder.h"

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
  StateHold l(this, "reserved-node");
  return ReservedNodeLocked(pod);
}

std::string QueueManager::ReservedNodeLocked(const PodRequest& pod) {
  const Slot* s = SlotOfLocked(pod.uid);
  return s != nullptr && !s->bound ? s->node : "";
}

QueueManager::Slot* QueueManager::ClaimSlotForBindLocked(const PodRequest& pod,
                                                         std::string_view node, std::string* why) {
  auto r = reservations_.find(GangKey(pod.ns, pod.gang));
  if (r == reservations_.end()) return nullptr;
  std::string elsewhere;
  for (Slot& s : r->second.slots) {
    bool free = s.member_uid.empty();
    if (!free && !s.bound) {
      auto m = deps_.state->FindPod(s.member_uid);
      free = !m.has_value() || m->deleting;
    }
    if (!free || s.bound) continue;
    if (s.node == node) {
      s.member_uid = pod.uid;
      return &s;
    }
    elsewhere = s.node;
  }
  if (!elsewhere.empty()) {
    *why = StrCat("gpusched: gang ", pod.gang, " reserved GPUs for its members on ", elsewhere,
                  ", not on ", node);
  }
  return nullptr;
}

void QueueManager::PlaceGang(const policy::Framework& fw, GangPlacement* place) {
  const ClusterSnapshot& snapshot = *place->view->snapshot;
  const QuotaLedger& ledger = *place->view->ledger;
  if (place->topology.rule == TopologyRule::kNone) {
    place->picks = PlaceMembers(snapshot, fw, place->pod, ledger, place->missing, place->by_scan);
  } else {
    TopologyPlacement t = PlaceInDomains(snapshot, fw, place->pod, ledger, place->missing,
                                         place->by_scan, place->topology);
    place->picks = std::move(t.picks);
    place->topology_why = std::move(t.why);
  }
  place->placed = true;
}

ResolvedTopology QueueManager::GangTopologyLocked(const PodRequest& pod) const {
  const std::vector<std::string>& levels = options_.gang.topology_levels;
  ResolvedTopology mine = ResolveTopology(pod, levels);
  if (!mine.error.empty()) return mine;
  auto members = gang_members_.find(GangKey(pod.ns, pod.gang));
  if (members == gang_members_.end()) return mine;
  for (const Entry* e : members->second) {
    ResolvedTopology theirs = ResolveTopology(*e->pod, levels);
    if (!theirs.error.empty()) return theirs;
    if (theirs.rule != mine.rule || theirs.level != mine.level) {
      ResolvedTopology bad;
      bad.error = StrCat("members ask different topology: ", pod.name, " ", DescribeTopology(mine),
                         ", ", e->pod->name, " ", DescribeTopology(theirs));
      return bad;
    }
  }
  return mine;
}

std::string QueueManager::ClaimOrPrepareLocked(const PodRequest& pod, GangPlacement* place) {
  *place = GangPlacement{};
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
  // The gang has started (its gang_size, for an elastic gang its minMember,
  // hold GPUs): a further member runs on its own, like a single pod.
  const int32_t missing = pod.gang_size - HeldGangMembersLocked(pod);
  if (missing <= 0) return "";
  ResolvedTopology topology = GangTopologyLocked(pod);
  if (!topology.error.empty()) {
    return StrCat("gpusched: gang ", pod.gang, ": ", topology.error,
                  "; no member is placed until this is fixed");
  }
  std::string why = GangQuotaLocked(pod, missing);
  if (!why.empty()) return why;
  place->pod = pod;
  place->missing = missing;
  place->topology = std::move(topology);
  // Placed without the mutex, on the view: the newest snapshot, a ledger
  // bound to the shared options (never the live ones a reload overwrites).
  place->view = PlanningViewLocked();
  place->queue_version = queue_version_;
  place->by_scan = options_.recompute_from_scratch;
  return "";
}

std::string QueueManager::GangQuotaLocked(const PodRequest& pod, int32_t missing) {
  if (!options_.quotas.enabled) return "";
  const QuotaLedger& ledger = LedgerLocked();
  const int64_t demand = DemandMilli(pod.gpu) * missing;
  QuotaVerdict v = ledger.Check(pod.ns, demand);
  if (v.ok) return "";
  return StrCat(QuotaMessage(pod.ns, ledger.Quota(pod.ns).cohort, v), "; gang ", pod.gang,
                " needs ", FormatGpus(demand));
}

std::string QueueManager::CommitGangLocked(const GangPlacement& place, bool* conflict) {
  const PodRequest& pod = place.pod;
  const auto placed = static_cast<int32_t>(place.picks.size());
  if (placed < place.missing && !place.topology_why.empty()) {
    return StrCat("gpusched: ", place.topology_why);
  }
  if (placed < place.missing) {
    return StrCat("gpusched: gang ", pod.gang, " needs ", place.missing, " x ",
                  FormatGpus(DemandMilli(pod.gpu)), " GPUs at once; only ", placed, " fit now");
  }
  Reservation r;
  r.ns = pod.ns;
  r.gang = pod.gang;
  r.deadline_ms = Now() + int64_t{options_.gang.reservation_seconds} * 1000;
  const uint64_t seq = ++reservation_seq_;
  std::vector<ClusterState::Assumption> holders;
  for (size_t i = 0; i < place.picks.size(); ++i) {
    PodRequest ph = pod;
    ph.uid = StrCat(kReservationUidPrefix, pod.ns, "/", pod.gang, "/", seq, "-", i);
    ph.name = StrCat("gpusched-reservation-", pod.gang, "-", seq, "-", i);
    ph.node_name.clear();
    ph.phase = PodPhase::kPending;
    ph.start_unix = Now() / 1000;
    ph.reservation = true;
    r.slots.push_back({ph.uid, place.picks[i].first, place.picks[i].second, "", false});
    holders.push_back({std::move(ph), place.picks[i].first, place.picks[i].second});
  }
  // All placeholders in one commit, or none.
  absl::Status s = deps_.state->AssumeAll(holders);
  if (!s.ok()) {
    *conflict = true;
    return StrCat("gpusched: gang ", pod.gang, " reservation failed: ", FromAbsl(s.message()));
  }
  r.slots.front().member_uid = pod.uid;
  Log(StrCat("gpusched: reserved ", place.picks.size(), " device sets for gang ", pod.ns, "/",
             pod.gang, " for ", options_.gang.reservation_seconds, "s"));
  reservations_[GangKey(pod.ns, pod.gang)] = std::move(r);
  ForgetUnitIndexLocked(pod.ns);  // its frozen queue answers for unreserved gangs only
  return "";
}

bool QueueManager::ReserveStepLocked(const PodRequest& pod, const policy::Framework& fw,
                                     int placements, GangPlacement* place, std::string* why) {
  if (place->placed) {
    if (PlanCurrentLocked(place->Basis())) {
      bool conflict = false;
      *why = CommitGangLocked(*place, &conflict);
      if (!conflict && std::ssize(place->picks) < place->missing) {
        RememberFailureLocked(*place, fw, *why);
      }
      if (!conflict) return true;  // reserved, or refused as placed
    }
    // The cluster changed under the placement (devices taken, or a fact it
    // rests on moved): prepared and placed again on the cluster as it is.
  }
  *why = ClaimOrPrepareLocked(pod, place);
  if (!why->empty() || place->missing == 0) return true;
  // The same placement fell short on this very view: the same answer.
  if (const std::string* before = FailedBeforeLocked(*place, fw)) {
    *why = *before;
    return true;
  }
  if (placements < kGangPlacements) return false;
  *why = StrCat("gpusched: gang ", pod.gang, ": the cluster changed under each of its last ",
                placements, " placements of ", place->missing,
                " members (GPUs taken or quota used meanwhile); kube-scheduler retries the pod");
  if (deps_.metrics != nullptr) {
    deps_.metrics->Inc("gpusched_gang_reservation_conflicts_total",
                       "Gang members answered to retry because the cluster changed under every "
                       "placement of their gang's reservation.",
                       {{"namespace", pod.ns}});
  }
  return true;
}

std::string QueueManager::ReserveForGang(const std::string& uid, const policy::Framework& fw,
                                         const std::string& position, std::string* reserved_node) {
  GangPlacement place;
  for (int placements = 0;; ++placements) {
    {
      StateHold l(this, "gang-reserve");
      SyncLocked(deps_.state->Snapshot());
      const Entry* e = FindEntryLocked(uid);
      if (e == nullptr) return "";  // bound or gone meanwhile
      std::string why;
      if (ReserveStepLocked(*e->pod, fw, placements, &place, &why)) {
        if (why.empty()) {
          *reserved_node = ReservedNodeLocked(*e->pod);
        } else if (!position.empty()) {
          StrAppend(&why, "; ", position);
        }
        return why;
      }
    }
    PlaceGang(fw, &place);  // without the mutex, on the newest snapshot
    if (deps_.after_unlocked_placement) deps_.after_unlocked_placement(place.picks);
  }
}

void QueueManager::ReleaseLocked(Reservation& r) {
  for (const Slot& s : r.slots) {
    if (!s.bound) deps_.state->RemovePod(s.placeholder_uid);
  }
  deps_.state->Commit();
}

void QueueManager::ExpireReservationsLocked() {
  const int64_t now = Now();
  // Whether each unbound slot's holder is still there: one question to the
  // state for all of them, without copying each pod.
  std::vector<std::string_view> holders;
  for (const auto& [key, r] : reservations_) {
    for (const Slot& s : r.slots) {
      if (!s.bound) holders.push_back(s.placeholder_uid);
    }
  }
  const std::vector<bool> present = deps_.state->HasPods(holders);
  size_t next = 0;  // reservations_ is walked below in the same order
  for (auto it = reservations_.begin(); it != reservations_.end();) {
    Reservation& r = it->second;
    bool lost = false;  // a relist dropped a placeholder
    for (const Slot& s : r.slots) {
      if (!s.bound && !present[next++]) lost = true;
    }
    if (now >= r.deadline_ms || lost) {
      Log(StrCat("gpusched: gang ", r.ns, "/", r.gang, " reservation ", lost ? "lost" : "expired",
                 "; releasing its unbound devices"));
      ReleaseLocked(r);
      ForgetUnitIndexLocked(r.ns);  // its frozen queue answers for unreserved gangs only
      reservations_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace gpusched::queue
