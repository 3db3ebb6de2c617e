// QueueManager: the commit rule (docs/architecture.md, "Plans and the
// commit"). Every plan made without the mutex, on a PlanningView, is
// recorded under it only if PlanCurrentLocked accepts it: reclaim,
// attained-service and fair-share batches (CommitReclaimsLocked), the
// preempt verb's node answers and a gang's preemption plan (PreemptOne,
// PreemptGang), a gang's reservation (ReserveForGang) and the tick's
// over-limit evictions (CommitOverLimitLocked). One rule; each
// plan names the facts it rests on in its PlanBasis.
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {
namespace {

// Whether two gang members, or two versions of one, ask for the same
// placement: every field of the pod a gang's placement reads (PlaceGang:
// the framework's filter and scores, the room on devices, CPU and memory,
// the ledger, the hypothetical copies WithPod makes, the topology).
bool SamePlacementRequest(const PodRequest& a, const PodRequest& b) {
  return a.ns == b.ns && a.gang == b.gang && a.gang_size == b.gang_size &&
         a.gpu.count == b.gpu.count && a.gpu.milli_per_gpu == b.gpu.milli_per_gpu &&
         a.gpu.min_memory_mib == b.gpu.min_memory_mib && a.gpu.models == b.gpu.models &&
         a.gpu.topology == b.gpu.topology && a.cpu_milli == b.cpu_milli &&
         a.memory_mib == b.memory_mib && a.priority == b.priority &&
         a.topology_request == b.topology_request && a.group_topology == b.group_topology;
}

// Whether two versions of a gang member ask for the same placement.
bool SamePlacementInputs(const PodRequest& a, const PodRequest& b) {
  return a.uid == b.uid && SamePlacementRequest(a, b);
}

}  // namespace

const std::string* QueueManager::FailedBeforeLocked(const GangPlacement& place,
                                                    const policy::Framework& fw) const {
  auto it = failed_placements_.find(GangKey(place.pod.ns, place.pod.gang));
  if (it == failed_placements_.end()) return nullptr;
  const FailedPlacement& f = it->second;
  const bool same = f.stamp == place.view->stamp && f.fw.get() == &fw &&
                    f.missing == place.missing && f.by_scan == place.by_scan &&
                    f.topology == place.topology && SamePlacementRequest(f.pod, place.pod);
  return same ? &f.why : nullptr;
}

void QueueManager::RememberFailureLocked(const GangPlacement& place, const policy::Framework& fw,
                                         const std::string& why) {
  if (!deps_.framework || !deps_.reuse_failed_placements) return;
  std::shared_ptr<const policy::Framework> current = deps_.framework();
  // Placed with a framework a reload has replaced since: not the key of
  // any later placement, so not kept.
  if (current.get() != &fw) return;
  failed_placements_[GangKey(place.pod.ns, place.pod.gang)] = {
      place.view->stamp, std::move(current), place.pod, place.missing,
      place.topology,    place.by_scan,      why};
}

void QueueManager::DropStaleFailuresLocked() {
  const PlanningView::Stamp now = CurrentStampLocked();
  absl::erase_if(failed_placements_,
                 [&now](const auto& entry) { return !(entry.second.stamp == now); });
}

QueueManager::PlanningView::Stamp QueueManager::CurrentStampLocked() {
  const uint64_t claims = ReclaimViewLocked().generation;  // brought up to date first
  return {usage_.generation(), config_version_, claims, evicted_version_};
}

bool QueueManager::PlanCurrentLocked(const PlanBasis& basis) {
  const PlanningView::Stamp now = CurrentStampLocked();
  if (basis.stamp.config != now.config) return false;
  const Entry* e = basis.for_uid.empty() ? nullptr : FindEntryLocked(basis.for_uid);
  if (!basis.for_uid.empty() && e == nullptr) return false;  // bound, gone or no longer waiting
  if (basis.gang != nullptr && !GangWaitsAsPlacedLocked(*basis.gang, *e->pod)) return false;
  if (basis.stamp == now && basis.queue_version == queue_version_) return true;  // nothing moved
  // Something moved: every fact the plan rests on must still hold.
  if (basis.heads_queue) {
    auto q = order_.find(e->pod->ns);
    if (q == order_.end() || *q->second.begin() != e) return false;
  }
  if (basis.victims != nullptr) {
    for (const std::string& uid : *basis.victims) {
      if (evicted_.contains(uid) || !deps_.state->FindPod(uid).has_value()) return false;
    }
  }
  if (basis.usage != nullptr) {
    const QuotaLedger& ledger = LedgerLocked();
    for (const auto& [ns, milli] : *basis.usage) {
      if (ledger.Usage(ns) != milli) return false;
    }
  }
  return basis.gang == nullptr || GangFactsHoldLocked(*basis.gang);
}

bool QueueManager::GangWaitsAsPlacedLocked(const GangPlacement& place,
                                           const PodRequest& now) const {
  const PodRequest& pod = place.pod;
  return SamePlacementInputs(pod, now) && !reservations_.contains(GangKey(pod.ns, pod.gang));
}

bool QueueManager::GangFactsHoldLocked(const GangPlacement& place) {
  const PodRequest& pod = place.pod;
  if (pod.gang_size - HeldGangMembersLocked(pod) != place.missing) return false;
  if (!GangQuotaLocked(pod, place.missing).empty()) return false;
  // Each pick within the per-model quota as usage is now.
  QuotaLedger ledger = LedgerLocked();
  const ClusterSnapshot& current = *usage_.snapshot();
  const int64_t demand = DemandMilli(pod.gpu);
  for (const auto& [name, devices] : place.picks) {
    const NodeInfo* node = current.Find(name);
    if (node == nullptr) return false;
    const std::string& product = current.product(*node);
    if (!ledger.CheckModels(pod.ns, product, demand).empty()) return false;
    ledger.Add(pod.ns, product, demand);
  }
  return true;
}

}  // namespace gpusched::queue
