// Admission on a snapshot (admit_snapshot.h; docs/architecture.md). The
// state owner is whoever holds the queue mutex: every hold (StateHold) ends
// by taking the cluster source's changes and publishing what admission reads
// (the usage's ledger with its claims, the options, the reclaim holds and
// the frozen queues). A later filter for a single pod already queued, or
// for one the source has not shown yet where nothing waits, is answered
// from that snapshot without the mutex, by the same rules
// (EvaluateQueued, HeldFor, ProductRefusals, ScanBehind), as long as nobody
// has taken the mutex since.
#include "scheduler/queue/admit_snapshot.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/usage_index.h"

namespace gpusched::queue {

std::string UnshownGangMemberReason(const PodRequest& pod) {
  return StrCat("gpusched: gang ", pod.gang, ": pod ", pod.Key(), " (uid ", pod.uid,
                ") is not in the cluster view yet; gangs are reserved only for pods the "
                "cluster shows");
}

// ---- FrozenQueues ------------------------------------------------------------

size_t FrozenQueues::ShardOf(std::string_view ns) {
  return absl::Hash<std::string_view>{}(ns) % kShards;
}

const FrozenQueue* FrozenQueues::Find(std::string_view ns) const {
  const std::shared_ptr<const Shard>& shard = shards_[ShardOf(ns)];
  if (shard == nullptr) return nullptr;
  auto it = shard->find(absl::string_view(ns.data(), ns.size()));
  if (it == shard->end() || !it->second->current.load(std::memory_order_acquire)) return nullptr;
  return it->second.get();
}

FrozenQueues FrozenQueues::With(const std::string& ns,
                                std::shared_ptr<const FrozenQueue> queue) const {
  FrozenQueues out = *this;
  std::shared_ptr<const Shard>& slot = out.shards_[ShardOf(ns)];
  auto shard = std::make_shared<Shard>();
  if (slot != nullptr) {
    for (const auto& [name, q] : *slot) {
      if (name != ns && q->current.load(std::memory_order_acquire)) shard->emplace(name, q);
    }
  }
  shard->emplace(ns, std::move(queue));
  slot = std::move(shard);
  return out;
}

// ---- publishing (under the mutex) -----------------------------------------------

void QueueManager::PublishAfterHoldLocked(const std::string* freeze) {
  if (deps_.state == nullptr) return;
  // The source's changes first (a bind's own assumption, a watch burst): a
  // snapshot behind them would answer nothing. The reference
  // (recompute_from_scratch) takes them at the same moments, so that both
  // see a pod start or leave at the same time (attained service).
  std::shared_ptr<const ClusterSnapshot> newest = deps_.state->Snapshot();
  if (deps_.state->PodChangesPending() || newest->generation() > usage_.generation()) {
    SyncLocked(std::move(newest));
  }
  if (options_.recompute_from_scratch) return;  // it decides under the mutex only
  auto s = std::make_shared<AdmitSnapshot>();
  s->acquisitions = lock_stats_.acquisitions.load(std::memory_order_relaxed);  // this hold's
  s->usage_generation = usage_.generation();
  s->config_version = config_version_;
  // The ledger itself, claims included, warmed for readers on several
  // threads (LedgerLocked copies it before changing its claims); the reclaim
  // view is the one its claims come from.
  const QuotaLedger& ledger = LedgerLocked();
  if (!ledger_warm_) {
    ledger.Warm();
    ledger_warm_ = true;
  }
  s->ledger = ledger_;
  s->options = ledger_options_;
  s->gangs = usage_.Gangs();
  s->holds = reclaim_view_.holds;
  s->holds_from_ms = reclaim_view_.built_at_ms;
  s->holds_until_ms = reclaim_view_.valid_until_ms;
  if (std::shared_ptr<const AdmitSnapshot> old = admit_snapshot_.load(std::memory_order_relaxed)) {
    s->queues = old->queues;
  }
  if (freeze != nullptr) {
    refreeze_.erase(*freeze);
    FreezeIfCurrentLocked(*freeze, ledger, &s->queues);
  }
  // Queues this hold (or an earlier one, past the cap) dropped, frozen
  // again so that their next filter reads the snapshot too; left to a later
  // hold while a request waits for the mutex (each rebuilds an index).
  for (int n = 0; n < kRefreezePerHold && !refreeze_.empty() &&
                  lock_stats_.requests_waiting.load(std::memory_order_acquire) == 0;
       ++n) {
    auto it = refreeze_.begin();
    const std::string ns = *it;
    refreeze_.erase(it);
    FreezeIfCurrentLocked(ns, ledger, &s->queues);
  }
  admit_snapshot_.store(std::move(s), std::memory_order_release);
}

void QueueManager::FreezeIfCurrentLocked(const std::string& ns, const QuotaLedger& ledger,
                                         FrozenQueues* queues) {
  if (ledger.Quota(ns).queueing == QueueingStrategy::kBackfill) return;
  // A namespace where nothing waits is frozen empty (the first asks of its
  // pods read it) if the config names it or it runs GPU pods: never for
  // whatever namespace a request makes up.
  if (!order_.contains(ns) && !options_.quotas.namespaces.contains(ns) && ledger.Usage(ns) == 0) {
    return;
  }
  UnitIndex& x = UnitIndexLocked(ns, ledger, Now());  // rebuilt if not current
  if (x.frozen.get() != nullptr) return;              // frozen already, still current
  *queues = queues->With(ns, FreezeQueueLocked(x));
}

void QueueManager::ForgetUnitIndexLocked(const std::string& ns) {
  auto it = unit_index_.find(ns);
  if (it == unit_index_.end()) return;
  if (it->second.frozen.get() != nullptr) refreeze_.insert(ns);
  unit_index_.erase(it);
}

std::shared_ptr<const FrozenQueue> QueueManager::FreezeQueueLocked(UnitIndex& x) {
  auto q = std::make_shared<FrozenQueue>();
  q->units.reserve(x.units.size());
  for (const Unit& u : x.units) {
    q->units.push_back({u.head->pod, u.head->asked, u.head->first_seen_ms, u.demand});
  }
  q->demand_before = x.demand_before;
  q->count_before = x.count_before;
  // A pod holding a gang slot is answered with its slot's node: never here.
  absl::flat_hash_set<std::string_view> slotted;
  const std::string& ns = x.units.empty() ? "" : x.units.front().head->pod->ns;
  for (const auto& [key, r] : reservations_) {
    if (r.ns != ns) continue;
    for (const Slot& slot : r.slots) {
      if (!slot.member_uid.empty()) slotted.insert(slot.member_uid);
    }
  }
  q->singles.reserve(x.units.size());
  for (size_t i = 0; i < x.units.size(); ++i) {
    const Unit& u = x.units[i];
    const PodRequest& head = *u.head->pod;
    if (!IsGang(head)) {
      if (!slotted.contains(head.uid)) q->singles.emplace(std::string_view(head.uid), i);
      continue;
    }
    if (reservations_.contains(GangKey(head.ns, head.gang))) continue;
    for (const Entry* m : u.members) {
      q->members.emplace(std::string_view(m->pod->uid), FrozenQueue::Member{i, m->pod, m->asked});
    }
  }
  q->valid_until_ms = x.valid_until_ms;
  q->config_version = x.config_version;
  q->usage_generation = usage_.generation();
  for (const auto& [unit, held] : x.gang_held) {
    q->gangs_held.emplace_back(x.units[unit].head->pod->gang, held);
  }
  x.frozen.Set(q);
  return q;
}

// ---- reading (no lock) ------------------------------------------------------------

namespace {

// AdmitOnSnapshot's "the snapshot cannot answer", with why.
std::nullopt_t Miss(const char** miss, const char* why) {
  *miss = why;
  return std::nullopt;
}

// `ns`'s frozen queue in `s` if it answers at `now` (else null, and *miss
// says why): within the reclaim holds' validity, frozen under the
// snapshot's config, before its first counted unit goes stale and, on a
// newer usage, with its gangs' members on nodes unchanged.
const FrozenQueue* CurrentQueue(const AdmitSnapshot& s, const std::string& ns, int64_t now,
                                const char** miss) {
  auto no = [miss](const char* why) -> const FrozenQueue* {
    Miss(miss, why);
    return nullptr;
  };
  if (now < s.holds_from_ms || now >= s.holds_until_ms) return no("holds-expired");
  const FrozenQueue* q = s.queues.Find(ns);
  if (q == nullptr) return no("queue-not-frozen");
  if (q->config_version != s.config_version || now > q->valid_until_ms) {
    return no("queue-outdated");
  }
  if (q->usage_generation != s.usage_generation) {
    for (const auto& [gang, held] : q->gangs_held) {
      if (s.gangs->Held(ns, gang) != held) return no("gangs-moved");
    }
  }
  return q;
}

// Whether `unit` went unasked for longer than `stale_after_ms` by `now`.
bool Stale(const FrozenQueue::Unit& unit, int64_t now, int64_t stale_after_ms) {
  const int64_t asked = unit.asked->at.load(std::memory_order_relaxed);
  return now - std::max(asked, unit.first_seen_ms) > stale_after_ms;
}

}  // namespace

std::optional<Admission> QueueManager::AdmitOnSnapshot(const PodRequest& request,
                                                       const ClusterSnapshot& snapshot,
                                                       const policy::Framework& fw,
                                                       const char** miss) {
  const std::shared_ptr<const AdmitSnapshot> s = admit_snapshot_.load(std::memory_order_acquire);
  if (s == nullptr) return Miss(miss, "none");
  // Current: nobody took the mutex since its hold, the queue has taken every
  // pod change, and the usage is not older than the request's cluster.
  if (lock_stats_.acquisitions.load(std::memory_order_seq_cst) != s->acquisitions) {
    return Miss(miss, "mutex-taken");
  }
  if (deps_.state->PodChangesPending()) return Miss(miss, "pod-changes");
  if (snapshot.generation() > s->usage_generation) return Miss(miss, "cluster-newer");
  const int64_t now = Now();
  const FrozenQueue* q = CurrentQueue(*s, request.ns, now, miss);
  if (q == nullptr) return std::nullopt;
  // The pod's unit and ask clock; none: a pod not shown yet where nothing
  // waits (AdmitUnconfirmedLocked's: queued last, so first with nothing
  // ahead).
  SnapshotAsk ask{q, 0, DemandMilli(request.gpu), &request, false};
  const std::shared_ptr<AskClock>* clock = nullptr;
  if (auto single = q->singles.find(request.uid); single != q->singles.end()) {
    ask.unit = single->second;
    ask.pod = q->units[ask.unit].head.get();
    clock = &q->units[ask.unit].asked;
  } else if (auto member = q->members.find(request.uid); member != q->members.end()) {
    ask.unit = member->second.unit;
    ask.pod = member->second.pod.get();
    ask.gang = true;
    clock = &member->second.asked;
  } else if (deps_.state->FindPod(request.uid).has_value()) {
    return Miss(miss, "reserved-or-not-waiting");  // a reserved gang's member, a bound pod
  } else if (IsGang(request) || request.gang_size == kGangSizeUnknown) {
    return Admission::No(UnshownGangMemberReason(request));
  } else if (!q->units.empty()) {
    return Miss(miss, "unshown-behind-a-queue");
  }
  if (clock != nullptr) {
    // The ask, as NoteAskedLocked notes it: a unit's head asked after going
    // stale makes the unit count again (the index changes: the mutex
    // path's); any other ask changes nothing the index holds (scans read
    // the heads' clocks).
    const FrozenQueue::Unit& unit = q->units[ask.unit];
    if (unit.asked == *clock && Stale(unit, now, s->options->stale_after_ms)) {
      return Miss(miss, "asked-after-stale");
    }
    ask.demand = unit.demand;
  }
  if (s->ledger->Quota(ask.pod->ns).queueing == QueueingStrategy::kBackfill) {
    return Miss(miss, "backfill");
  }
  if (clock != nullptr) (*clock)->at.store(now, std::memory_order_relaxed);
  return AnswerOnSnapshot(*s, ask, request, snapshot, fw, now, miss);
}

std::optional<Admission> QueueManager::AnswerOnSnapshot(
    const AdmitSnapshot& s, const SnapshotAsk& ask, const PodRequest& request,
    const ClusterSnapshot& snapshot, const policy::Framework& fw, int64_t now, const char** miss) {
  const FrozenQueue& q = *ask.queue;
  const size_t k = ask.unit;
  const PodRequest& pod = *ask.pod;
  const QuotaLedger& ledger = *s.ledger;
  const bool strict = ledger.Quota(pod.ns).queueing != QueueingStrategy::kBestEffortFifo;
  QueuedAt at{ask.demand, static_cast<int32_t>(k + 1), 0, 0};
  if (strict) {
    at.ahead_demand = q.demand_before[k];
    at.ahead_count = q.count_before[k];
  }
  const EvalInputs in{&ledger, s.options.get(), /*gang_reserved=*/false, now, /*board=*/nullptr};
  BehindScan scan;
  Evaluation ev = EvaluateQueued(
      at,
      [&](std::vector<BehindScan::Head>* heads) {
        if (!strict) return;
        // AskedAhead's rule, on the frozen units.
        for (size_t i = 0; i < k && heads->size() < kBehindScanHeads; ++i) {
          const FrozenQueue::Unit& u = q.units[i];
          if (q.count_before[i + 1] > q.count_before[i] &&
              u.asked->at.load(std::memory_order_relaxed) >= 0) {
            heads->push_back({u.head, u.demand});
          }
        }
      },
      pod, in, snapshot, fw, /*all_checks=*/false, &scan);
  if (!ev.reason.empty()) return Admission::No(std::move(ev.reason));
  if (!scan.heads.empty()) {
    Evaluation behind;
    ScanBehind(scan, snapshot, fw, &behind);
    if (!behind.reason.empty()) return Admission::No(std::move(behind.reason));
  }
  if (ask.gang) return Miss(miss, "gang-admitted");  // its reservation next: a write
  Admission yes;
  if (s.options->quotas.enabled) {
    if (s.holds != nullptr) {
      yes.held_nodes = HeldFor(pod, *s.holds, ledger);
    }
    yes.product_refusals = ProductRefusals(request, snapshot, ledger);
  }
  return yes;
}

void QueueManager::CountAdmission(const char* path, const char* miss) const {
  if (deps_.metrics == nullptr) return;
  if (miss != nullptr) {
    deps_.metrics->Inc("gpusched_queue_snapshot_misses_total",
                       "Filter admissions the admission snapshot could not answer, by why "
                       "(decided under the queue mutex instead).",
                       {{"why", miss}});
  }
  deps_.metrics->Inc("gpusched_queue_admissions_total",
                     "Filter admissions of GPU pods, by where they were decided: on the "
                     "admission snapshot without the queue mutex (\"snapshot\") or under it "
                     "(\"mutex\").",
                     {{"path", path}});
}

}  // namespace gpusched::queue
