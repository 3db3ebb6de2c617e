#include "scheduler/queue/queue_manager.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <limits>

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

// A pod that waits in a queue: asks for GPUs, holds none, not going away.
// A gang member of unknown size (an invalid declaration, or an object not
// read yet) is never admitted, so it waits outside the queue: it must not
// hold back its namespace's later pods (Admit answers it with why).
bool Waiting(const PodRequest& p) {
  return p.gpu.count > 0 && !p.HoldsGpus() && !p.deleting &&
         (p.phase == PodPhase::kPending || p.phase == PodPhase::kUnknown) && !p.reservation &&
         p.gang_size != kGangSizeUnknown;
}

// The fields that place a pod in its queue.
bool SamePlace(const PodRequest& a, const PodRequest& b) {
  return a.ns == b.ns && a.priority == b.priority && a.creation_unix == b.creation_unix &&
         a.name == b.name && a.gang == b.gang && (a.gang_size > 1) == (b.gang_size > 1);
}

// Whether any namespace preempts by attained service.
bool AnyAttained(const QuotaConfig& q) {
  auto on = [](const NamespaceQuota& n) {
    return n.attained.enabled && n.attained.preemptions_per_hour > 0;
  };
  if (on(q.default_quota)) return true;
  return std::any_of(q.namespaces.begin(), q.namespaces.end(),
                     [&](const auto& kv) { return on(kv.second); });
}

}  // namespace

bool QueueManager::EarlierEntry::operator()(const Entry* a, const Entry* b) const {
  if (a->pod->priority != b->pod->priority) return a->pod->priority > b->pod->priority;
  if (a->level != b->level) return a->level < b->level;
  return Earlier(*a->pod, *b->pod);
}

QueueManager::QueueManager(QueueDeps deps, QueueOptions options)
    : deps_(std::move(deps)),
      yield_background_(options.yield_before_background_holds),
      options_(std::move(options)),
      shared_options_(std::make_shared<const QueueOptions>(options_)) {}

int64_t QueueManager::Now() const {
  if (deps_.now_ms) return deps_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void QueueManager::Log(const std::string& line) const {
  if (deps_.log) {
    deps_.log(line);
  } else {
    std::cerr << line << "\n";
  }
}

void QueueManager::SetOptions(QueueOptions options) {
  StateHold l(this, "options", BackgroundUse());
  // Only namespaces whose attained-service settings change are re-levelled:
  // walking every waiting pod held the mutex 12 ms at 50,000 of them.
  std::vector<std::string> relevel;
  for (const auto& [ns, order] : order_) {
    if (!(AttainedOf(options_.quotas, ns) == AttainedOf(options.quotas, ns))) relevel.push_back(ns);
  }
  options_ = std::move(options);
  shared_options_ = std::make_shared<const QueueOptions>(options_);
  yield_background_.store(options_.yield_before_background_holds, std::memory_order_relaxed);
  ledger_.reset();
  reclaim_view_.dirty = true;  // stale_after_ms may have changed
  reclaim_backoff_.clear();    // new quotas or rules: plan again at once
  ++config_version_;
  for (const std::string& ns : relevel) RelevelLocked(ns);
  // Every frozen queue was made under the old config: frozen again, a few
  // a hold, as the holds after this one end.
  for (const auto& [ns, x] : unit_index_) {
    if (x.frozen.get() != nullptr) refreeze_.insert(ns);
  }
}

// ---- the pending index ----------------------------------------------------

QueueManager::Entry* QueueManager::FindEntryLocked(const std::string& uid) {
  auto it = entries_.find(uid);
  return it == entries_.end() ? nullptr : &it->second;
}

void QueueManager::AddPendingLocked(const PodRequest& pod, int sign) {
  const int64_t milli = DemandMilli(pod.gpu);
  if (milli == 0) return;
  auto [it, inserted] = pending_milli_.try_emplace(pod.ns, 0);
  it->second += sign * milli;
  if (it->second == 0) pending_milli_.erase(it);
}

void QueueManager::QueueChangedLocked(const std::string& ns) {
  ++queue_version_;
  changed_at_[ns] = queue_version_;
  ForgetUnitIndexLocked(ns);
  reclaim_view_.dirty = true;
}

void QueueManager::EraseEntryLocked(const std::string& uid) {
  auto it = entries_.find(uid);
  if (it == entries_.end()) return;
  Entry* e = &it->second;
  QueueChangedLocked(e->pod->ns);  // it may be a reclaim's pod too
  auto q = order_.find(e->pod->ns);
  if (q != order_.end()) {
    q->second.erase(e);
    if (q->second.empty()) {
      order_.erase(q);
      changed_at_.erase(e->pod->ns);
    }
  }
  AddPendingLocked(*e->pod, -1);
  if (IsGang(*e->pod)) {
    auto g = gang_members_.find(GangKey(e->pod->ns, e->pod->gang));
    if (g != gang_members_.end()) {
      std::erase(g->second, e);
      if (g->second.empty()) gang_members_.erase(g);
    }
  }
  entries_.erase(it);
}

void QueueManager::UpsertEntryLocked(std::shared_ptr<const PodRequest> pod) {
  Entry* e = FindEntryLocked(pod->uid);
  // An entry keeps the attained-service level it was queued with (until its
  // namespace's attained-service settings change: RelevelLocked).
  if (e != nullptr && SamePlace(*e->pod, *pod)) {
    QueueChangedLocked(pod->ns);  // demand or gang size may change even in place
    AddPendingLocked(*e->pod, -1);
    AddPendingLocked(*pod, 1);
    e->pod = std::move(pod);  // the fields that order it are unchanged
    return;
  }
  const int8_t level = LevelLocked(*pod);
  int64_t first_seen = Now();
  std::shared_ptr<AskClock> asked;
  if (e != nullptr) {
    first_seen = e->first_seen_ms;
    asked = std::move(e->asked);  // the same pod, moved in the order
    EraseEntryLocked(pod->uid);
  }
  Entry& fresh = entries_[pod->uid];
  fresh.pod = std::move(pod);
  fresh.first_seen_ms = first_seen;
  fresh.asked = asked != nullptr ? std::move(asked) : std::make_shared<AskClock>();
  fresh.level = level;
  const PodRequest& p = *fresh.pod;
  order_[p.ns].insert(&fresh);
  QueueChangedLocked(p.ns);
  AddPendingLocked(p, 1);
  if (IsGang(p)) gang_members_[GangKey(p.ns, p.gang)].push_back(&fresh);
}

void QueueManager::SyncLocked(std::shared_ptr<const ClusterSnapshot> snapshot) {
  const bool scratch = options_.recompute_from_scratch;
  // Attained service first: a pod queued again after an eviction is
  // levelled with what its workload ran until then.
  attained_.Update(snapshot, Now() / 1000);
  ClusterState::PodChanges changes = deps_.state->TakePodChanges(Waiting, full_sync_ || scratch);
  full_sync_ = false;
  if (changes.full) {
    entries_.reserve(changes.pods.size());
    absl::flat_hash_set<std::string> keep;
    keep.reserve(changes.pods.size());
    for (const auto& [uid, pod] : changes.pods) keep.insert(uid);
    std::vector<std::string> gone;
    for (const auto& [uid, e] : entries_) {
      if (!keep.contains(uid)) gone.push_back(uid);
    }
    for (const std::string& uid : gone) EraseEntryLocked(uid);
  }
  for (auto& [uid, pod] : changes.pods) {
    if (pod != nullptr) {
      UpsertEntryLocked(std::move(pod));
    } else {
      EraseEntryLocked(uid);
    }
  }
  if (scratch) {
    usage_.Clear();
    ledger_.reset();
  }
  // The usage follows the newest snapshot any caller brought: a request
  // holding an older one never takes it back.
  if (snapshot->generation() >= usage_.generation()) usage_.Update(std::move(snapshot));
}

void QueueManager::SyncWithCluster() {
  StateHold l(this, "source-sync", BackgroundUse());
  SyncLocked(deps_.state->Snapshot());
}

void QueueManager::Resync() {
  StateHold l(this, "resync", BackgroundUse());
  full_sync_ = true;
  SyncLocked(deps_.state->Snapshot());
}

// ---- queue order and admission ----------------------------------------------

const QuotaLedger& QueueManager::LedgerLocked() {
  if (ledger_ == nullptr || ledger_generation_ != usage_.generation() ||
      ledger_version_ != config_version_) {
    // Bound to the shared options, not options_: the admission snapshot
    // shares this ledger with readers that outlive a reload.
    ledger_options_ = shared_options_;
    ledger_ = std::make_shared<QuotaLedger>(ledger_options_->quotas, usage_.Table());
    ledger_warm_ = false;
    ledger_generation_ = usage_.generation();
    ledger_version_ = config_version_;
    ledger_claims_ = 0;  // a new ledger has none
  }
  // Claims last while the pod reclaim works for waits (bounded in time).
  const ReclaimView& view = ReclaimViewLocked();
  if (ledger_claims_ != view.generation) {
    if (view.claims != ledger_->claims()) {
      // Published (admission snapshot): copied on write.
      if (ledger_.use_count() > 1) ledger_ = std::make_shared<QuotaLedger>(*ledger_);
      ledger_->SetClaims(view.claims);
      ledger_warm_ = false;
    }
    ledger_claims_ = view.generation;
  }
  return *ledger_;
}

const QueueManager::ReclaimView& QueueManager::ReclaimViewLocked() {
  ReclaimView& v = reclaim_view_;
  const int64_t now = Now();
  if (!v.dirty && now >= v.built_at_ms && now < v.valid_until_ms) return v;
  std::map<std::string, int64_t> claims;
  auto holds = std::make_shared<std::vector<ReclaimHold>>();
  v.valid_until_ms = std::numeric_limits<int64_t>::max();
  for (const auto& [ns, r] : reclaiming_) {
    if (now - r.at_ms >= options_.stale_after_ms) continue;
    v.valid_until_ms = std::min(v.valid_until_ms, r.at_ms + options_.stale_after_ms);
    const Entry* e = FindEntryLocked(r.for_uid);
    if (e == nullptr) continue;  // bound or gone: nothing is claimed or held any more
    if (e->pod->ns == ns) claims[ns] = r.demand;
    if (r.held != nullptr && !r.held->empty()) {
      holds->push_back({ns, r.for_uid, r.gang, r.priority, r.for_guarantee, r.held});
    }
  }
  v.holds = std::move(holds);
  if (claims != v.claims) {
    v.claims = std::move(claims);
    ++v.generation;
  }
  v.dirty = false;
  v.built_at_ms = now;
  return v;
}

void QueueManager::PruneEvictedLocked(int64_t now) {
  const int64_t stale = options_.stale_after_ms, cooldown = options_.reclaim_cooldown_ms;
  // Past the cool-down a pod is forgotten once gone: whether each is still
  // there, asked of the state at once (no copy of each pod).
  std::vector<std::string_view> cooled;
  for (const auto& [uid, at] : evicted_) {
    if (now - at <= stale && now - at > cooldown) cooled.push_back(uid);
  }
  const std::vector<bool> present = deps_.state->HasPods(cooled);
  size_t next = 0;  // evicted_ is walked in the same order (erasing moves nothing)
  for (auto it = evicted_.begin(); it != evicted_.end();) {
    const int64_t age = now - it->second;
    const bool gone = age <= stale && age > cooldown && !present[next++];
    if (age > stale || gone) {
      evicted_.erase(it++);
      ++evicted_version_;
    } else {
      ++it;
    }
  }
}

void QueueManager::PruneReclaimsLocked(int64_t now) {
  const size_t before = reclaiming_.size();
  const int64_t stale_after_ms = options_.stale_after_ms;
  std::erase_if(reclaiming_,
                [&](const auto& kv) { return now - kv.second.at_ms >= stale_after_ms; });
  if (reclaiming_.size() != before) reclaim_view_.dirty = true;
  // Victims once gone never come back (a uid is never reused): only the
  // reclaims whose victims were there at the last look are asked about.
  std::vector<std::string_view> victims;
  for (const auto& [ns, r] : reclaiming_) {
    if (r.victims_present) victims.insert(victims.end(), r.victims.begin(), r.victims.end());
  }
  if (victims.empty()) return;
  const std::vector<bool> present = deps_.state->HasPods(victims);
  auto next = present.begin();  // reclaiming_ is walked in the same order
  for (auto& [ns, r] : reclaiming_) {
    if (!r.victims_present) continue;
    const auto end = next + static_cast<std::ptrdiff_t>(r.victims.size());
    r.victims_present = std::find(next, end, true) != end;
    next = end;
  }
}

int32_t QueueManager::HeldGangMembersLocked(const PodRequest& pod) const {
  return usage_.GangHeld(pod.ns, pod.gang);
}

QueueManager::Unit QueueManager::GangUnitLocked(const std::string& ns, const Entry* head) {
  const std::vector<const Entry*>& members = gang_members_[GangKey(ns, head->pod->gang)];
  Unit u{head, members, 0};
  std::sort(u.members.begin(), u.members.end(), EarlierEntry());
  // Until the gang has started its missing members are placed at once;
  // after (an elastic gang past minMember), each pending member runs
  // alone and all of them count.
  const int32_t missing = std::max(0, head->pod->gang_size - HeldGangMembersLocked(*head->pod));
  u.demand = DemandMilli(head->pod->gpu) *
             (missing > 0 ? missing : static_cast<int32_t>(u.members.size()));
  return u;
}

std::vector<QueueManager::Unit> QueueManager::UnitsLocked(const std::string& ns,
                                                          const std::string& stop_uid,
                                                          size_t max_units) {
  std::vector<Unit> units;
  auto q = order_.find(ns);
  if (q == order_.end()) return units;
  const Entry* stop = stop_uid.empty() ? nullptr : FindEntryLocked(stop_uid);
  std::string stop_gang;
  if (stop != nullptr && IsGang(*stop->pod)) stop_gang = stop->pod->gang;
  absl::flat_hash_set<std::string> gangs_seen;
  for (const Entry* e : q->second) {
    if (units.size() >= max_units) break;
    if (IsGang(*e->pod)) {
      if (!gangs_seen.insert(e->pod->gang).second) continue;
      units.push_back(GangUnitLocked(ns, e));
      if (!stop_gang.empty() && e->pod->gang == stop_gang) break;
    } else {
      units.push_back({e, {e}, DemandMilli(e->pod->gpu)});
      if (e == stop) break;
    }
  }
  return units;
}

std::vector<QueueManager::Unit> QueueManager::NextUnitsLocked(const std::string& ns,
                                                              UnitCursor* cursor,
                                                              size_t max_units) {
  std::vector<Unit> units;
  auto q = order_.find(ns);
  if (q == order_.end()) {
    cursor->done = true;
    return units;
  }
  // Resumes after the last entry visited, by its order key: that entry may
  // be gone or moved since the last hold.
  auto it = cursor->last ? q->second.upper_bound(&*cursor->last) : q->second.begin();
  const Entry* visited = nullptr;
  for (; it != q->second.end() && units.size() < max_units; ++it) {
    const Entry* e = *it;
    visited = e;
    if (!IsGang(*e->pod)) {
      if (cursor->pods_seen.empty() || !cursor->pods_seen.contains(e->pod->uid)) {
        units.push_back({e, {e}, DemandMilli(e->pod->gpu)});
      }
    } else if (cursor->gangs_seen.insert(e->pod->gang).second) {
      units.push_back(GangUnitLocked(ns, e));
    }
  }
  if (visited != nullptr) cursor->last = *visited;
  cursor->done = it == q->second.end();
  // The single pods listed are remembered only for a next hold (most walks
  // end in one): one moved behind the cursor meanwhile is not listed again.
  if (!cursor->done) {
    for (const Unit& u : units) {
      if (!IsGang(*u.head->pod)) cursor->pods_seen.insert(u.head->pod->uid);
    }
  }
  return units;
}

QueueManager::Evaluation QueueManager::EvaluateLocked(const PodRequest& pod,
                                                      const ClusterSnapshot& snapshot,
                                                      const policy::Framework& fw, bool all_checks,
                                                      BehindScan* deferred) {
  const Entry* self = FindEntryLocked(pod.uid);
  if (self == nullptr) return {};    // not waiting (bound, finished or unknown)
  const PodRequest& p = *self->pod;  // the source's pod
  EvalInputs in{&LedgerLocked(), &options_,
                IsGang(p) && reservations_.contains(GangKey(p.ns, p.gang)), Now(),
                admit_board_.get()};
  if (options_.recompute_from_scratch) {
    std::vector<Unit> units = UnitsLocked(p.ns, p.uid);
    if (units.empty()) return {};
    const size_t k = units.size() - 1;
    Evaluation ev = EvaluateUnits(units, k, p, in, snapshot, fw, all_checks, deferred);
    const int64_t own =
        WalkAhead(units, k, in, in.ledger->Limit(p.ns), /*strict=*/true).demand + units[k].demand;
    ApplyCohortHoldsLocked(p, own, in, snapshot, fw, all_checks, deferred, &ev);
    return ev;
  }
  const UnitIndex& index = UnitIndexLocked(p.ns, *in.ledger, in.now_ms);
  auto it = index.unit_of.find(self);
  if (it == index.unit_of.end()) return {};
  const size_t k = it->second;
  Ahead ahead;
  const QueueingStrategy queueing = in.ledger->Quota(p.ns).queueing;
  const int64_t backfill =
      queueing == QueueingStrategy::kBackfill ? BackfillEnd(index.units, k, in) : 0;
  if (queueing != QueueingStrategy::kBestEffortFifo && backfill == 0) {
    ahead.demand = index.demand_before[k];
    ahead.count = index.count_before[k];
    AskedAhead(index, k, &ahead.asked);
  }
  Evaluation ev = EvaluateAhead(index.units[k], static_cast<int32_t>(k + 1), ahead, p, in, snapshot,
                                fw, all_checks, deferred);
  ev.backfill_end = backfill;
  const int64_t own = index.demand_before[k] + index.units[k].demand;
  // After the last use of `index`: the cohort's indexes may be built now.
  ApplyCohortHoldsLocked(p, own, in, snapshot, fw, all_checks, deferred, &ev);
  return ev;
}

QueueManager::Evaluation QueueManager::EvaluateUnits(const std::vector<Unit>& units, size_t k,
                                                     const PodRequest& pod, const EvalInputs& in,
                                                     const ClusterSnapshot& snapshot,
                                                     const policy::Framework& fw, bool all_checks,
                                                     BehindScan* deferred) {
  const QuotaLedger& ledger = *in.ledger;
  const QueueingStrategy queueing = ledger.Quota(pod.ns).queueing;
  const int64_t backfill = queueing == QueueingStrategy::kBackfill ? BackfillEnd(units, k, in) : 0;
  const bool strict = queueing != QueueingStrategy::kBestEffortFifo && backfill == 0;
  Evaluation ev = EvaluateAhead(units[k], static_cast<int32_t>(k + 1),
                                WalkAhead(units, k, in, ledger.Limit(pod.ns), strict), pod, in,
                                snapshot, fw, all_checks, deferred);
  ev.backfill_end = backfill;
  return ev;
}

QueueManager::Evaluation QueueManager::EvaluateAhead(const Unit& unit, int32_t pos,
                                                     const Ahead& ahead, const PodRequest& pod,
                                                     const EvalInputs& in,
                                                     const ClusterSnapshot& snapshot,
                                                     const policy::Framework& fw, bool all_checks,
                                                     BehindScan* deferred) {
  return EvaluateQueued(
      {unit.demand, pos, ahead.demand, ahead.count},
      [&ahead](std::vector<BehindScan::Head>* heads) {
        for (const Unit* u : ahead.asked) heads->push_back({u->head->pod, u->demand});
      },
      pod, in, snapshot, fw, all_checks, deferred);
}

QueueManager::Evaluation QueueManager::EvaluateQueued(
    const QueuedAt& at, absl::FunctionRef<void(std::vector<BehindScan::Head>*)> add_heads,
    const PodRequest& pod, const EvalInputs& in, const ClusterSnapshot& snapshot,
    const policy::Framework& fw, bool all_checks, BehindScan* deferred) {
  Evaluation ev;
  ev.position = at.pos;
  ev.needs_gang_reservation = IsGang(pod);
  if (in.gang_reserved) return ev;
  if (!in.options->quotas.enabled) return ev;

  const QuotaLedger& ledger = *in.ledger;
  const int64_t ahead_demand = at.ahead_demand;
  const int64_t demand = at.unit_demand;
  ev.quota_demand = ahead_demand + demand;
  const std::string position = StrCat("position ", ev.position, " in queue");
  const std::string needs = IsGang(pod) ? StrCat("gang ", pod.gang, " needs ", FormatGpus(demand))
                                        : StrCat("pod needs ", FormatGpus(demand));
  QuotaVerdict v = ledger.Check(pod.ns, ahead_demand + demand);
  if (!v.ok) {
    QuotaVerdict own = ledger.Check(pod.ns, demand);
    ev.reason = StrCat(QuotaMessage(pod.ns, ledger.Quota(pod.ns).cohort, own), "; ", needs);
    if (ahead_demand > 0) {
      StrAppend(&ev.reason, "; ", at.ahead_count, " earlier in queue need ",
                FormatGpus(ahead_demand));
    }
    StrAppend(&ev.reason, "; ", position);
    if (!all_checks) return ev;
  }
  // Capacity: an earlier unit that could use the same nodes must go first.
  // Only units kube-scheduler has asked about count (one never asked for may
  // not be wanted yet); with none, this pod's node scan is skipped.
  BehindScan scan;
  add_heads(&scan.heads);
  if (scan.heads.empty()) return ev;  // no node scan needed
  scan.pod = pod;
  scan.position = position;
  if (deferred != nullptr) {
    *deferred = std::move(scan);
    return ev;
  }
  ScanBehind(scan, snapshot, fw, &ev);
  return ev;
}

void QueueManager::ScanBehind(const BehindScan& scan, const ClusterSnapshot& snapshot,
                              const policy::Framework& fw, Evaluation* ev) {
  const PodRequest& pod = scan.pod;
  // A cohort's unit that borrows as this pod would holds it whatever the
  // nodes: no scan needed.
  for (const BehindScan::Head& head : scan.heads) {
    if (!head.always) continue;
    ev->behind_earlier = true;
    if (ev->reason.empty()) ev->reason = StrCat(head.held, "; ", scan.position);
    return;
  }
  const int32_t nodes = static_cast<int32_t>(snapshot.nodes().size());
  std::vector<uint8_t> p_usable(nodes);
  policy::PodContext pctx = fw.Prepare(pod, snapshot);
  policy::FilterMemo pmemo(fw, pctx);
  for (int32_t i = 0; i < nodes; ++i) {
    p_usable[i] = pmemo.Filter(snapshot.hot(i)).verdict != policy::Verdict::kUnresolvable;
  }
  for (const BehindScan::Head& head : scan.heads) {
    if (head.always) continue;
    const PodRequest& h = *head.pod;
    policy::PodContext hctx = fw.Prepare(h, snapshot);
    policy::FilterMemo hmemo(fw, hctx);
    for (int32_t i = 0; i < nodes; ++i) {
      if (!p_usable[i]) continue;
      if (hmemo.Filter(snapshot.hot(i)).verdict == policy::Verdict::kUnresolvable) continue;
      ev->behind_earlier = true;
      if (!ev->reason.empty()) return;  // the quota reason stays the one shown
      if (!head.held.empty()) {
        ev->reason = StrCat(head.held, "; ", scan.position);
        return;
      }
      ev->reason =
          StrCat("gpusched: namespace ", pod.ns, ": waiting behind ", h.name, " (priority ",
                 h.priority, ", needs ", FormatGpus(head.demand),
                 " GPUs), earlier in the queue and able to use the same nodes; ", scan.position);
      return;
    }
  }
}

std::string QueueManager::AdmitUnconfirmedLocked(const PodRequest& pod,
                                                 const ClusterSnapshot& snapshot,
                                                 const policy::Framework& fw,
                                                 BehindScan* deferred) {
  if (IsGang(pod) || pod.gang_size == kGangSizeUnknown) return UnshownGangMemberReason(pod);
  UpsertEntryLocked(std::make_shared<const PodRequest>(pod));
  Entry* e = FindEntryLocked(pod.uid);
  NoteAskedLocked(*e);
  Evaluation ev = EvaluateLocked(*e->pod, snapshot, fw, /*all_checks=*/false, deferred);
  EraseEntryLocked(pod.uid);
  return ev.reason;
}

Admission QueueManager::Admit(const PodRequest& request,
                              const std::shared_ptr<const ClusterSnapshot>& snapshot,
                              const policy::Framework& fw) {
  if (request.gpu.count == 0 || request.HoldsGpus()) return Admission::Yes();
  const char* miss = nullptr;
  if (std::optional<Admission> answer = AdmitOnSnapshot(request, *snapshot, fw, &miss)) {
    CountAdmission("snapshot");
    return *std::move(answer);
  }
  CountAdmission("mutex", miss);
  return AdmitUnderMutex(request, snapshot, fw);
}

Admission QueueManager::AdmitUnderMutex(const PodRequest& request,
                                        const std::shared_ptr<const ClusterSnapshot>& snapshot_ptr,
                                        const policy::Framework& fw) {
  const ClusterSnapshot& snapshot = *snapshot_ptr;
  // Three steps, so that the node scan (an earlier unit that could use the
  // same nodes; up to kBehindScanHeads x every node) runs without the mutex:
  // quota in queue order under it, the scan on copies, then (a gang) the
  // reservation under it again.
  BehindScan scan;
  Admission yes;
  std::optional<std::string> reserve;  // a gang member's reservation is due
  std::vector<std::shared_ptr<const HeldNodes>> held;
  bool decided = false;
  {
    StateHold l(this, "admit");
    l.FreezeAtEnd(request.ns);  // whatever the answer
    SyncLocked(snapshot_ptr);
    Entry* e = FindEntryLocked(request.uid);
    std::string why;
    if (e != nullptr) {
      why = AdmitLocked(*e, snapshot, fw, &scan, &reserve);
    } else if (auto known = deps_.state->FindPod(request.uid); !known.has_value()) {
      why = AdmitUnconfirmedLocked(request, snapshot, fw, &scan);
    } else if (known->gang_size == kGangSizeUnknown && !known->HoldsGpus()) {
      // Never queued (Waiting). Any other known pod does not wait: bound or
      // finished.
      why = known->UnknownGangSizeReason();
    }
    if (!why.empty()) return Admission::No(std::move(why));
    // The source's pod where it waits (its priority and gang, not what the
    // request says).
    e = FindEntryLocked(request.uid);
    held = HeldForReclaimLocked(e != nullptr ? *e->pod : request);
    yes.product_refusals = ProductRefusalsLocked(request, snapshot);
    if (scan.heads.empty() && !reserve.has_value()) {
      yes.reserved_node = ReservedNodeLocked(request);
      decided = true;
    }
  }
  yes.held_nodes = std::move(held);
  if (decided) return yes;
  if (!scan.heads.empty()) {
    Evaluation ev;
    ScanBehind(scan, snapshot, fw, &ev);
    if (!ev.reason.empty()) return Admission::No(std::move(ev.reason));
    if (scan.backfill_end > 0) {
      StateHold l(this, "backfill");
      backfilled_.try_emplace(request.uid, scan.backfill_end);
    }
    if (!IsGang(scan.pod)) return yes;
    reserve = scan.position;
  }
  std::string why = ReserveForGang(request.uid, fw, *reserve, &yes.reserved_node);
  if (!why.empty()) return Admission::No(std::move(why));
  return yes;
}

std::string QueueManager::AdmitLocked(Entry& e, const ClusterSnapshot& snapshot,
                                      const policy::Framework& fw, BehindScan* deferred,
                                      std::optional<std::string>* reserve) {
  NoteAskedLocked(e);
  const PodRequest& pod = *e.pod;  // the source's pod, not the request's
  Evaluation ev = EvaluateLocked(pod, snapshot, fw, /*all_checks=*/false, deferred);
  if (!ev.reason.empty()) return ev.reason;
  if (ev.backfill_end > 0) {
    // With a scan still owed, recorded only once the scan admits it (Admit).
    if (deferred->heads.empty()) {
      backfilled_.try_emplace(pod.uid, ev.backfill_end);
    } else {
      deferred->backfill_end = ev.backfill_end;
    }
  }
  if (!IsGang(pod) || !deferred->heads.empty()) return "";  // the caller goes on after the scan
  *reserve = ev.position > 0 ? StrCat("position ", ev.position, " in queue") : "";
  return "";
}

std::vector<std::string> QueueManager::ProductRefusalsLocked(const PodRequest& pod,
                                                             const ClusterSnapshot& snapshot) {
  if (!options_.quotas.enabled) return {};
  return ProductRefusals(pod, snapshot, LedgerLocked());
}

std::vector<std::string> QueueManager::ProductRefusals(const PodRequest& pod,
                                                       const ClusterSnapshot& snapshot,
                                                       const QuotaLedger& ledger) {
  std::vector<std::string> refusals;
  if (ledger.Quota(pod.ns).models.empty()) return refusals;
  const int64_t demand = DemandMilli(pod.gpu);
  for (const std::string& product : snapshot.products()) {
    refusals.push_back(ledger.CheckModels(pod.ns, product, demand));
  }
  return refusals;
}

std::vector<std::shared_ptr<const QueueManager::HeldNodes>> QueueManager::HeldForReclaimLocked(
    const PodRequest& pod) {
  if (!options_.quotas.enabled) return {};
  const ReclaimView& view = ReclaimViewLocked();
  if (view.holds == nullptr || view.holds->empty()) return {};
  return HeldFor(pod, *view.holds, LedgerLocked());
}

std::vector<std::shared_ptr<const QueueManager::HeldNodes>> QueueManager::HeldFor(
    const PodRequest& pod, const std::vector<ReclaimHold>& holds, const QuotaLedger& ledger) {
  std::vector<std::shared_ptr<const HeldNodes>> held;
  std::optional<bool> within;  // pod stays within its namespace's guarantee
  for (const ReclaimHold& h : holds) {
    if (h.for_uid == pod.uid) continue;
    if (!h.for_guarantee) {
      // A borrower's hold never keeps a guarantee from a pod.
      if (!within.has_value()) {
        within = ledger.Usage(pod.ns) + DemandMilli(pod.gpu) <= ledger.Guaranteed(pod.ns);
      }
      if (*within) continue;
    }
    if (pod.ns == h.ns && !h.gang.empty() && pod.gang == h.gang) continue;  // its own gang
    if (pod.priority > h.priority) continue;
    held.push_back(h.held);
  }
  return held;
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

void QueueManager::NoteBindingLocked(const std::string& uid) {
  if (const Entry* e = FindEntryLocked(uid)) {
    binding_[uid] = {e->pod->ns, e->first_seen_ms, Now()};
  }
}

void QueueManager::OnBound(const PodRequest& pod) {
  StateHold l(this, "bound");
  auto b = binding_.find(pod.uid);
  if (b != binding_.end()) {
    NoteWaitLocked(b->second.ns, static_cast<double>(Now() - b->second.first_seen_ms) / 1000.0);
    binding_.erase(b);
  } else if (Entry* e = FindEntryLocked(pod.uid)) {
    NoteWaitLocked(pod.ns, static_cast<double>(Now() - e->first_seen_ms) / 1000.0);
  }
  EraseEntryLocked(pod.uid);
}

std::string QueueManager::AssumeForBind(ClusterState& state, const PodRequest& pod,
                                        std::string_view node, DeviceMask* devices) {
  StateHold l(this, "assume-bind");
  Slot* slot = SlotOfLocked(pod.uid);
  if (slot == nullptr && IsGang(pod)) {
    std::string why;
    slot = ClaimSlotForBindLocked(pod, node, &why);
    if (!why.empty()) return why;
  }
  if (slot != nullptr && !slot->bound) {
    if (slot->node != node) {
      return StrCat("gpusched: gang ", pod.gang, " reserved GPUs for ", pod.Key(), " on ",
                    slot->node, ", not on ", node);
    }
    auto placeholder = state.FindPod(slot->placeholder_uid);
    if (!placeholder.has_value()) {
      // The holder is gone (its node left or changed) before the tick
      // notices the reservation is lost: its devices and its quota are no
      // longer held, so the slot grants nothing.
      return StrCat("gpusched: gang ", pod.gang, " lost its reservation on ", slot->node,
                    "; it will be retried");
    }
    state.RemovePod(slot->placeholder_uid);
    absl::Status s = state.Assume(pod, node, slot->devices);
    if (!s.ok()) {
      placeholder->node_name.clear();
      (void)state.Assume(*placeholder, node, slot->devices);
      state.Commit();
      return StrCat("gpusched: ", FromAbsl(s.message()));
    }
    NoteBindingLocked(pod.uid);
    slot->bound = true;
    *devices = slot->devices;
    auto r = reservations_.find(GangKey(pod.ns, pod.gang));
    if (r != reservations_.end() && std::all_of(r->second.slots.begin(), r->second.slots.end(),
                                                [](const Slot& s) { return s.bound; })) {
      reservations_.erase(r);
      ForgetUnitIndexLocked(pod.ns);  // its frozen queue answers for unreserved gangs only
    }
    return "";
  }
  auto snapshot = state.Snapshot();
  SyncLocked(snapshot);
  // A member of a gang that has started binds like a single pod; any other
  // gang member binds only into its reservation.
  if (pod.gang_size == kGangSizeUnknown ||
      (IsGang(pod) && HeldGangMembersLocked(pod) < pod.gang_size)) {
    return StrCat("gpusched: gang ", pod.gang, " holds no reservation for ", pod.Key(),
                  " (expired or never made); it will be retried");
  }
  if (options_.quotas.enabled && pod.gpu.count > 0) {
    const QuotaLedger& ledger = LedgerLocked();
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
  NoteBindingLocked(pod.uid);
  return "";
}

// ---- the tick -----------------------------------------------------------------

namespace {

// CPU time of the calling thread, in seconds.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

std::shared_ptr<const QueueManager::PlanningView> QueueManager::PlanningViewLocked() {
  const QuotaLedger& ledger = LedgerLocked();
  const PlanningView::Stamp stamp{usage_.generation(), config_version_, reclaim_view_.generation,
                                  evicted_version_};
  if (view_ != nullptr && view_->stamp == stamp) return view_;
  auto v = std::make_shared<PlanningView>();
  v->stamp = stamp;
  v->snapshot = usage_.snapshot();
  v->options = shared_options_;
  auto copy = std::make_unique<QuotaLedger>(ledger);
  copy->RebindConfig(v->options->quotas);
  copy->Warm();  // shared by planners on several threads: no const call may write it
  v->ledger = std::move(copy);
  v->evicted = evicted_;
  v->gangs = usage_.Gangs();
  view_ = std::move(v);
  return view_;
}

QueueManager::PlanBatch QueueManager::ChooseReclaims() {
  ReclaimChoice choice;
  while (!choice.done) {
    StateHold l(this, "tick-choose", BackgroundUse());
    ChooseReclaimsLocked(choice);
  }
  PlanBatch b;
  b.jobs = std::move(choice.jobs);
  b.queue_version = choice.queue_version;
  return b;
}

void QueueManager::PlanBatchJobs(PlanBatch& b,
                                 std::optional<std::chrono::steady_clock::time_point> deadline,
                                 YieldPoint* yield) {
  PlanInputs in = b.view->Inputs();
  in.evicted = &b.evicted;
  in.yield = yield;
  const int64_t now = Now();
  for (ReclaimJob& job : b.jobs) {
    // The budget bounds the work after the first job: a tick whose own
    // sync and choice outlast it (a loaded machine) still plans one, so no
    // run of slow ticks starves reclaim.
    if (deadline && &job != &b.jobs.front() && std::chrono::steady_clock::now() > *deadline) {
      break;
    }
    in.only = job.only.empty() ? nullptr : &job.only;
    PlanReclaim(in, *b.view->snapshot, *b.fw, &job);
    job.planned = true;
    // Later namespaces plan without these victims, as after evicting them.
    for (const std::string& uid : job.victims) b.evicted.emplace(uid, now);
  }
}

void QueueManager::AttachPlanner(bool attached) {
  absl::MutexLock l(&plan_mu_);
  planner_attached_ = attached;
  if (!attached) to_plan_.reset();
}

bool QueueManager::PlanReclaims(absl::Duration wait) {
  PlanBatch batch;
  {
    absl::MutexLock l(&plan_mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(plan_mu_) { return to_plan_.has_value(); };
    if (!plan_mu_.AwaitWithTimeout(absl::Condition(&ready), wait)) return false;
    batch = std::move(*to_plan_);
    to_plan_.reset();
    planning_ = true;
  }
  // The planner thread runs at the lowest priority and may still keep a
  // core until the next scheduler tick: it yields every 200 us of planning.
  YieldPoint yield(std::chrono::microseconds(200));
  PlanBatchJobs(batch, std::nullopt, &yield);
  absl::MutexLock l(&plan_mu_);
  planning_ = false;
  planned_ = std::move(batch);
  return true;
}

void QueueManager::LogCoverageLocked() {
  if (!options_.quotas.enabled) return;
  // The coverage reads every namespace's quota: made again only when the
  // config or the cluster's capacity moved.
  const int64_t capacity = LedgerLocked().Capacity();
  if (coverage_config_ == config_version_ && logged_coverage_.capacity_milli == capacity) return;
  coverage_config_ = config_version_;
  QuotaCoverage c = CoverageOf(options_.quotas, capacity);
  if (c == logged_coverage_) return;
  logged_coverage_ = c;
  for (const std::string& w : CoverageWarnings(c)) Log(StrCat("gpusched: quotas: ", w));
}

QueueManager::PlannerState QueueManager::TakePlanned() {
  // Never under mu_: a planner descheduled while holding plan_mu_ (it runs
  // at the lowest priority) must not stretch a hold of the mutex every
  // request needs. Only the tick hands batches over, so what is read here
  // can only move on (to_plan_ taken, planned) until the hand-over.
  absl::MutexLock p(&plan_mu_);
  PlannerState out;
  out.done = std::move(planned_);
  planned_.reset();
  out.attached = planner_attached_;
  out.busy = to_plan_.has_value() || planning_;
  return out;
}

bool QueueManager::TickHousekeepingLocked(PlannerState& planner, std::optional<PlanBatch>* stale) {
  auto snapshot = deps_.state->Snapshot();
  SyncLocked(snapshot);
  ExpireReservationsLocked();
  LogCoverageLocked();
  const int64_t now = Now();
  for (auto it = gang_plans_.begin(); it != gang_plans_.end();) {
    it = now - it->second.at_ms > options_.stale_after_ms ? gang_plans_.erase(it) : std::next(it);
  }
  absl::erase_if(binding_,
                 [now](const auto& b) { return now - b.second.at_ms > kBindingForgetMs; });
  PruneEvictedLocked(now);
  PruneReclaimsLocked(now);
  DropStaleFailuresLocked();
  attained_.Forget(now / 1000, options_.attained_forget_after_s, kForgetsPerTick);
  if (planner.done.has_value() && planner.done->view->stamp.config != config_version_) {
    stale->swap(planner.done);
  }
  const bool idle = !planner.attached || (!planner.busy && !planner.done);
  const bool plans = options_.reclaim.enabled || AnyAttained(options_.quotas);
  return options_.quotas.enabled && deps_.writer != nullptr && plans && idle;
}

void QueueManager::PlanOrHandOver(PlanBatch batch, std::chrono::steady_clock::time_point started,
                                  PlannerState& planner) {
  if (batch.jobs.empty()) return;
  if (planner.attached) {
    absl::MutexLock p(&plan_mu_);
    if (planner_attached_) {  // else (detached since) planned here
      to_plan_ = std::move(batch);
      return;
    }
  }
  const auto budget = std::chrono::milliseconds(batch.view->options->reclaim_plan_budget_ms);
  PlanBatchJobs(batch, budget.count() > 0 ? std::optional(started + budget) : std::nullopt);
  planner.done = std::move(batch);
}

int QueueManager::FollowupEvictions(bool after_evictions) {
  std::vector<std::pair<PodRequest, std::string>> over, gangs;
  if (after_evictions) (void)deps_.writer->AwaitSent(kWriterWait);  // as before tick-sync
  std::shared_ptr<const PlanningView> view;  // set: over-limit evictions to plan
  uint64_t queue_version = 0;
  {
    StateHold l(this, "tick-followup", BackgroundUse());
    SyncLocked(deps_.state->Snapshot());
    if (deps_.writer != nullptr) gangs = GangFollowupEvictionsLocked();
    if (options_.quotas.enabled && deps_.writer != nullptr && options_.reclaim.evict_over_limit) {
      view = PlanningViewLocked();
      queue_version = queue_version_;
    }
  }
  // Planned without the mutex (a walk over every node when a namespace is
  // above its limit), recorded by the commit rule.
  if (view != nullptr) {
    const OverLimitPlan plan = PlanOverLimit(*view);
    if (!plan.victims.empty()) {
      StateHold l(this, "tick-over-limit", BackgroundUse());
      over = CommitOverLimitLocked(plan, view->stamp, queue_version);
    }
  }
  return SendEvictions(gangs, "gang-preemption") + SendEvictions(over, "over-limit");
}

int QueueManager::Tick() {
  const auto started = std::chrono::steady_clock::now();
  const double cpu_started = ThreadCpuSeconds();
  PlannerState planner = TakePlanned();
  // Evictions sent by the last tick may still be on their way: the file
  // source commits them under ClusterState's mutex, which a sync that finds
  // pod changes takes. Waited for here, not inside the queue mutex.
  if (deps_.writer != nullptr) (void)deps_.writer->AwaitSent(kWriterWait);
  bool choose = false;
  std::optional<PlanBatch> stale;  // planned under an older config: dropped after the mutex
  {
    StateHold l(this, "tick-sync", BackgroundUse());
    choose = TickHousekeepingLocked(planner, &stale);
  }
  PlanBatch batch = choose ? ChooseReclaims() : PlanBatch{};
  if (!batch.jobs.empty()) {
    // The view the batch is planned on, in a hold of its own: its copy
    // (O(namespaces + evictions) when the state moved) does not lengthen
    // tick-sync. A change between the two holds is the commit rule's (the
    // batch's queue version is the one its jobs were chosen at).
    batch.fw = deps_.framework();
    StateHold l(this, "tick-view", BackgroundUse());
    batch.view = PlanningViewLocked();
    batch.evicted = batch.view->evicted;
  }
  stale.reset();
  PlanOrHandOver(std::move(batch), started, planner);
  int evictions = 0;
  if (planner.done.has_value()) {
    std::vector<std::pair<PodRequest, std::string>> send;
    {
      StateHold l(this, "tick-commit", BackgroundUse());
      send = CommitReclaimsLocked(planner.done->jobs, planner.done->view->stamp,
                                  planner.done->queue_version);
    }
    evictions += SendEvictions(send, "reclaim");
  }
  evictions += FollowupEvictions(evictions > 0);
  if (deps_.metrics != nullptr) {
    deps_.metrics->Observe(
        "gpusched_queue_tick_seconds",
        "Duration of one queue tick (sync, expiry, reclaim planning, evictions).", {},
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    deps_.metrics->Observe("gpusched_queue_tick_cpu_seconds",
                           "CPU time of one queue tick (its duration less the time it waited "
                           "for the mutex or a core).",
                           {}, ThreadCpuSeconds() - cpu_started);
  }
  return evictions;
}

}  // namespace gpusched::queue
