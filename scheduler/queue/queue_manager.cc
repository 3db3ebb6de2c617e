#include "scheduler/queue/queue_manager.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "gpusched/util/strings.h"

namespace gpusched::queue {
namespace {

// Queue order: priority descending, then creation time, then name.
bool Earlier(const PodRequest& a, const PodRequest& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.creation_unix != b.creation_unix) return a.creation_unix < b.creation_unix;
  if (a.name != b.name) return a.name < b.name;
  return a.uid < b.uid;
}

bool Waiting(const PodRequest& p) {
  return p.gpu.count > 0 && !p.HoldsGpus() && !p.deleting &&
         (p.phase == PodPhase::kPending || p.phase == PodPhase::kUnknown) && !IsReservation(p.uid);
}

}  // namespace

QueueManager::QueueManager(QueueDeps deps, QueueOptions options)
    : deps_(std::move(deps)), options_(std::move(options)) {}

int64_t QueueManager::Now() const {
  if (deps_.now_ms) return deps_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void QueueManager::SetOptions(QueueOptions options) {
  absl::MutexLock l(&mu_);
  options_ = std::move(options);
  ledger_.reset();
  ++config_version_;
}

const QuotaLedger& QueueManager::LedgerLocked(const ClusterSnapshot& snapshot) {
  if (ledger_ == nullptr || ledger_generation_ != snapshot.generation() ||
      ledger_version_ != config_version_) {
    ledger_ = std::make_unique<QuotaLedger>(options_.quotas, snapshot);
    ledger_generation_ = snapshot.generation();
    ledger_version_ = config_version_;
  }
  // Claims last while the pod reclaim works for waits (bounded in time).
  std::map<std::string, int64_t> claims;
  const int64_t now = Now();
  for (const auto& [ns, r] : reclaiming_) {
    auto q = pending_.find(ns);
    if (now - r.at_ms >= options_.stale_after_ms || q == pending_.end() ||
        !q->second.contains(r.for_uid)) {
      continue;
    }
    auto pod = deps_.state->FindPod(r.for_uid);
    if (pod.has_value() && Waiting(*pod)) claims[ns] = r.demand;
  }
  if (claims != ledger_->claims()) ledger_->SetClaims(std::move(claims));
  return *ledger_;
}

int32_t QueueManager::HeldGangMembers(const PodRequest& pod,
                                      const ClusterSnapshot& snapshot) const {
  int32_t held = 0;
  for (const auto& node : snapshot.nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (p.gang == pod.gang && p.ns == pod.ns) ++held;
    }
  }
  return held;
}

std::vector<QueueManager::Unit> QueueManager::UnitsLocked(const std::string& ns,
                                                          const ClusterSnapshot& snapshot) {
  std::vector<Unit> units;
  auto q = pending_.find(ns);
  if (q == pending_.end()) return units;
  std::vector<const Entry*> order;
  for (auto it = q->second.begin(); it != q->second.end();) {
    auto now = deps_.state->FindPod(it->first);
    if (!now.has_value() || !Waiting(*now)) {
      q->second.erase(it++);
      continue;
    }
    it->second.pod = std::move(*now);
    order.push_back(&it->second);
    ++it;
  }
  if (q->second.empty()) {
    pending_.erase(q);
    return units;
  }
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return Earlier(a->pod, b->pod); });
  std::map<std::string, size_t> gang_unit;
  for (const Entry* e : order) {
    if (IsGang(e->pod)) {
      auto [it, fresh] = gang_unit.emplace(e->pod.gang, units.size());
      if (!fresh) {
        units[it->second].members.push_back(e);
        continue;
      }
      const int32_t missing = std::max(0, e->pod.gang_size - HeldGangMembers(e->pod, snapshot));
      units.push_back({e, {e}, DemandMilli(e->pod.gpu) * missing});
      continue;
    }
    units.push_back({e, {e}, DemandMilli(e->pod.gpu)});
  }
  return units;
}

QueueManager::Evaluation QueueManager::EvaluateLocked(const PodRequest& pod,
                                                      const ClusterSnapshot& snapshot,
                                                      const policy::Framework& fw,
                                                      bool all_checks) {
  Evaluation ev;
  std::vector<Unit> units = UnitsLocked(pod.ns, snapshot);
  size_t k = 0;
  while (k < units.size() && std::none_of(units[k].members.begin(), units[k].members.end(),
                                          [&](const Entry* e) { return e->pod.uid == pod.uid; })) {
    ++k;
  }
  if (k == units.size()) return ev;  // not waiting (bound, finished or unknown)
  ev.position = static_cast<int32_t>(k + 1);
  ev.needs_gang_reservation = IsGang(pod);
  if (IsGang(pod) && reservations_.contains(GangKey(pod.ns, pod.gang))) return ev;
  if (!options_.quotas.enabled) return ev;

  const QuotaLedger& ledger = LedgerLocked(snapshot);
  const int64_t now = Now();
  int64_t ahead_demand = 0;
  std::vector<const Unit*> ahead;
  for (size_t i = 0; i < k; ++i) {
    const Unit& u = units[i];
    const int64_t seen = std::max(u.head->last_filter_ms, u.head->first_seen_ms);
    if (now - seen > options_.stale_after_ms) continue;
    if (u.demand > ledger.Limit(pod.ns)) continue;  // can never run: does not block
    ahead_demand += u.demand;
    ahead.push_back(&u);
  }
  const int64_t demand = units[k].demand;
  ev.quota_demand = ahead_demand + demand;
  const std::string position = StrCat("position ", ev.position, " in queue");
  const std::string needs = IsGang(pod) ? StrCat("gang ", pod.gang, " needs ", FormatGpus(demand))
                                        : StrCat("pod needs ", FormatGpus(demand));
  QuotaVerdict v = ledger.Check(pod.ns, ahead_demand + demand);
  if (!v.ok) {
    QuotaVerdict own = ledger.Check(pod.ns, demand);
    ev.reason = StrCat(QuotaMessage(pod.ns, ledger.Quota(pod.ns).cohort, own), "; ", needs);
    if (ahead_demand > 0) {
      StrAppend(&ev.reason, "; ", ahead.size(), " earlier in queue need ",
                FormatGpus(ahead_demand));
    }
    StrAppend(&ev.reason, "; ", position);
    if (!all_checks) return ev;
  }
  // Capacity: an earlier unit that could use the same nodes must go first.
  // Only units kube-scheduler has asked about count (one never asked for may
  // not be wanted yet); with none, this pod's node scan is skipped.
  if (std::none_of(ahead.begin(), ahead.end(),
                   [](const Unit* u) { return u->head->last_filter_ms >= 0; })) {
    return ev;
  }
  const int32_t nodes = static_cast<int32_t>(snapshot.nodes().size());
  std::vector<uint8_t> p_usable(nodes);
  policy::PodContext pctx = fw.Prepare(pod, snapshot);
  policy::FilterMemo pmemo(fw, pctx);
  for (int32_t i = 0; i < nodes; ++i) {
    p_usable[i] = pmemo.Filter(snapshot.hot(i)).verdict != policy::Verdict::kUnresolvable;
  }
  int checked = 0;
  for (const Unit* u : ahead) {
    if (u->head->last_filter_ms < 0) continue;  // never asked for: kube may not want it yet
    if (++checked > 64) break;
    policy::PodContext hctx = fw.Prepare(u->head->pod, snapshot);
    policy::FilterMemo hmemo(fw, hctx);
    for (int32_t i = 0; i < nodes; ++i) {
      if (!p_usable[i]) continue;
      if (hmemo.Filter(snapshot.hot(i)).verdict == policy::Verdict::kUnresolvable) continue;
      const PodRequest& h = u->head->pod;
      ev.behind_earlier = true;
      if (!ev.reason.empty()) return ev;  // the quota reason stays the one shown
      ev.reason = StrCat("gpusched: namespace ", pod.ns, ": waiting behind ", h.name, " (priority ",
                         h.priority, ", needs ", FormatGpus(u->demand),
                         " GPUs), earlier in the queue and able to use the same nodes; ", position);
      return ev;
    }
  }
  return ev;
}

std::string QueueManager::Admit(const PodRequest& pod, const ClusterSnapshot& snapshot) {
  if (pod.gpu.count == 0 || pod.HoldsGpus()) return "";
  auto fw = deps_.framework();
  absl::MutexLock l(&mu_);
  const int64_t now = Now();
  auto [it, fresh] = pending_[pod.ns].try_emplace(pod.uid);
  if (fresh) it->second.first_seen_ms = now;
  it->second.pod = pod;
  it->second.last_filter_ms = now;
  Evaluation ev = EvaluateLocked(pod, snapshot, *fw);
  if (!ev.reason.empty()) return ev.reason;
  if (IsGang(pod)) {
    std::string why = ClaimOrReserveLocked(pod, snapshot, *fw);
    if (!why.empty() && ev.position > 0) StrAppend(&why, "; position ", ev.position, " in queue");
    return why;
  }
  return "";
}

std::string QueueManager::AdmitNode(const PodRequest& pod, const NodeInfo& node,
                                    const ClusterSnapshot& snapshot) {
  absl::MutexLock l(&mu_);
  if (!options_.quotas.enabled) return "";
  return LedgerLocked(snapshot).CheckModels(pod.ns, snapshot.product(node), DemandMilli(pod.gpu));
}

void QueueManager::NoteWaitLocked(const std::string& ns, double seconds) {
  static constexpr double kBounds[] = {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  WaitHistogram& h = waits_[ns];
  if (h.buckets.empty()) h.buckets.assign(std::size(kBounds), 0);
  for (size_t i = 0; i < std::size(kBounds); ++i) {
    if (seconds <= kBounds[i]) ++h.buckets[i];
  }
  h.sum += seconds;
  ++h.count;
}

void QueueManager::OnBound(const PodRequest& pod) {
  absl::MutexLock l(&mu_);
  auto q = pending_.find(pod.ns);
  if (q == pending_.end()) return;
  auto it = q->second.find(pod.uid);
  if (it == q->second.end()) return;
  NoteWaitLocked(pod.ns, static_cast<double>(Now() - it->second.first_seen_ms) / 1000.0);
  q->second.erase(it);
  if (q->second.empty()) pending_.erase(q);
}

std::string QueueManager::AssumeForBind(ClusterState& state, const PodRequest& pod,
                                        std::string_view node, DeviceMask* devices) {
  absl::MutexLock l(&mu_);
  if (Slot* slot = SlotOfLocked(pod.uid); slot != nullptr && !slot->bound) {
    if (slot->node != node) {
      return StrCat("gpusched: gang ", pod.gang, " reserved GPUs for ", pod.Key(), " on ",
                    slot->node, ", not on ", node);
    }
    auto placeholder = state.FindPod(slot->placeholder_uid);
    state.RemovePod(slot->placeholder_uid);
    absl::Status s = state.Assume(pod, node, slot->devices);
    if (!s.ok()) {
      if (placeholder.has_value()) {
        placeholder->node_name.clear();
        (void)state.Assume(*placeholder, node, slot->devices);
      }
      state.Commit();
      return StrCat("gpusched: ", FromAbsl(s.message()));
    }
    slot->bound = true;
    *devices = slot->devices;
    auto r = reservations_.find(GangKey(pod.ns, pod.gang));
    if (r != reservations_.end() && std::all_of(r->second.slots.begin(), r->second.slots.end(),
                                                [](const Slot& s) { return s.bound; })) {
      reservations_.erase(r);
    }
    return "";
  }
  if (IsGang(pod)) {
    return StrCat("gpusched: gang ", pod.gang, " holds no reservation for ", pod.Key(),
                  " (expired or never made); it will be retried");
  }
  if (options_.quotas.enabled && pod.gpu.count > 0) {
    auto snapshot = state.Snapshot();
    const QuotaLedger& ledger = LedgerLocked(*snapshot);
    const int64_t demand = DemandMilli(pod.gpu);
    QuotaVerdict v = ledger.Check(pod.ns, demand);
    if (!v.ok) {
      return StrCat("gpusched: bind rejected: ",
                    QuotaMessage(pod.ns, ledger.Quota(pod.ns).cohort, v).substr(10), "; pod needs ",
                    FormatGpus(demand));
    }
    if (const NodeInfo* n = snapshot->Find(node); n != nullptr) {
      std::string why = ledger.CheckModels(pod.ns, snapshot->product(*n), demand);
      if (!why.empty()) return why;
    }
  }
  absl::Status s = state.Assume(pod, node, *devices);
  if (!s.ok()) return StrCat("gpusched: ", FromAbsl(s.message()));
  return "";
}

void QueueManager::Resync() {
  absl::MutexLock l(&mu_);
  const int64_t now = Now();
  for (PodRequest& p : deps_.state->Pods()) {
    if (!Waiting(p)) continue;
    auto [it, fresh] = pending_[p.ns].try_emplace(p.uid);
    if (fresh) it->second.first_seen_ms = now;
    it->second.pod = std::move(p);
  }
}

size_t QueueManager::PendingCount() const {
  absl::MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [ns, q] : pending_) n += q.size();
  return n;
}

int QueueManager::Tick() {
  absl::MutexLock l(&mu_);
  auto snapshot = deps_.state->Snapshot();
  std::vector<std::string> namespaces;
  for (const auto& [ns, q] : pending_) namespaces.push_back(ns);
  for (const std::string& ns : namespaces) UnitsLocked(ns, *snapshot);  // drop stale entries
  ExpireReservationsLocked();
  const int64_t now = Now();
  for (auto it = evicted_.begin(); it != evicted_.end();) {
    if (now - it->second > options_.reclaim_cooldown_ms) {
      evicted_.erase(it++);
    } else {
      ++it;
    }
  }
  int evictions = 0;
  if (options_.quotas.enabled && deps_.writer != nullptr) {
    auto fw = deps_.framework();
    if (options_.reclaim.enabled) evictions += ReclaimLocked(*deps_.state->Snapshot(), *fw);
    if (options_.reclaim.evict_over_limit) {
      evictions += EvictOverLimitLocked(*deps_.state->Snapshot());
    }
  }
  return evictions;
}

}  // namespace gpusched::queue
