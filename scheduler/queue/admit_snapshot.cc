// Admission on a snapshot (admit_snapshot.h; docs/architecture.md). The
// state owner is the admission that holds the queue mutex: as its hold ends
// it publishes what admission reads (the usage's ledger with its claims,
// the options, the reclaim holds and the frozen queues). A later filter for
// a single pod already queued is answered from that snapshot without the
// mutex, by the same rules (EvaluateQueued, HeldFor, ProductRefusals,
// ScanBehind), as long as nobody has taken the mutex since.
#include "scheduler/queue/admit_snapshot.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/usage_index.h"

namespace gpusched::queue {

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

void QueueManager::PublishAdmitSnapshotLocked(const std::string& ns) {
  if (options_.recompute_from_scratch) return;  // the reference decides under the mutex only
  const int64_t now = Now();
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
  auto it = unit_index_.find(ns);
  if (it != unit_index_.end() && it->second.frozen.get() == nullptr) {
    UnitIndex& x = it->second;
    const bool current = x.config_version == config_version_ && now <= x.valid_until_ms &&
                         (x.gang_held.empty() || x.usage_generation == usage_.generation());
    if (current && s->ledger->Quota(ns).queueing != QueueingStrategy::kBackfill) {
      s->queues = s->queues.With(ns, FreezeQueueLocked(x));
    }
  }
  admit_snapshot_.store(std::move(s), std::memory_order_release);
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
    const PodRequest& head = *x.units[i].head->pod;
    if (IsGang(head) || slotted.contains(head.uid)) continue;
    q->singles.emplace(std::string_view(head.uid), i);
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

std::optional<Admission> QueueManager::AdmitOnSnapshot(const PodRequest& request,
                                                       const ClusterSnapshot& snapshot,
                                                       const policy::Framework& fw) {
  const std::shared_ptr<const AdmitSnapshot> s = admit_snapshot_.load(std::memory_order_acquire);
  if (s == nullptr) return std::nullopt;
  // Current: nobody took the mutex since its hold, the queue has taken every
  // pod change, and the usage is not older than the request's cluster.
  if (lock_stats_.acquisitions.load(std::memory_order_seq_cst) != s->acquisitions ||
      deps_.state->PodChangesPending() || snapshot.generation() > s->usage_generation) {
    return std::nullopt;
  }
  const int64_t now = Now();
  if (now < s->holds_from_ms || now >= s->holds_until_ms) return std::nullopt;
  const FrozenQueue* q = s->queues.Find(request.ns);
  if (q == nullptr || q->config_version != s->config_version || now > q->valid_until_ms) {
    return std::nullopt;
  }
  if (q->usage_generation != s->usage_generation) {
    for (const auto& [gang, held] : q->gangs_held) {
      if (s->gangs->Held(request.ns, gang) != held) return std::nullopt;
    }
  }
  auto found = q->singles.find(request.uid);
  if (found == q->singles.end()) return std::nullopt;
  const size_t k = found->second;
  const FrozenQueue::Unit& me = q->units[k];
  const QueueOptions& options = *s->options;
  const QuotaLedger& ledger = *s->ledger;
  // The ask, as NoteAskedLocked notes it. One after going stale makes the
  // unit count again (the index changes: the mutex path's); a first ask
  // changes nothing the index holds (scans read the clocks).
  const int64_t asked = me.asked->at.load(std::memory_order_relaxed);
  if (now - std::max(asked, me.first_seen_ms) > options.stale_after_ms) return std::nullopt;
  const PodRequest& pod = *me.head;  // the source's
  const QueueingStrategy queueing = ledger.Quota(pod.ns).queueing;
  if (queueing == QueueingStrategy::kBackfill) return std::nullopt;
  me.asked->at.store(now, std::memory_order_relaxed);

  const bool strict = queueing != QueueingStrategy::kBestEffortFifo;
  QueuedAt at{me.demand, static_cast<int32_t>(k + 1), 0, 0};
  if (strict) {
    at.ahead_demand = q->demand_before[k];
    at.ahead_count = q->count_before[k];
  }
  const EvalInputs in{&ledger, &options, /*gang_reserved=*/false, now, /*board=*/nullptr};
  BehindScan scan;
  Evaluation ev = EvaluateQueued(
      at,
      [&](std::vector<BehindScan::Head>* heads) {
        if (!strict) return;
        // AskedAhead's rule, on the frozen units.
        for (size_t i = 0; i < k && heads->size() < kBehindScanHeads; ++i) {
          const FrozenQueue::Unit& u = q->units[i];
          if (q->count_before[i + 1] > q->count_before[i] &&
              u.asked->at.load(std::memory_order_relaxed) >= 0) {
            heads->push_back({u.head, u.demand});
          }
        }
      },
      pod, in, snapshot, fw, /*all_checks=*/false, &scan);
  if (!ev.reason.empty()) return Admission::No(std::move(ev.reason));
  Admission yes;
  if (options.quotas.enabled) {
    if (s->holds != nullptr) {
      for (const auto& nodes : HeldFor(pod, *s->holds, ledger)) {
        yes.held_nodes.insert(yes.held_nodes.end(), nodes->begin(), nodes->end());
      }
    }
    yes.product_refusals = ProductRefusals(request, snapshot, ledger);
  }
  if (!scan.heads.empty()) {
    Evaluation behind;
    ScanBehind(scan, snapshot, fw, &behind);
    if (!behind.reason.empty()) return Admission::No(std::move(behind.reason));
  }
  return yes;
}

void QueueManager::CountAdmission(const char* path) const {
  if (deps_.metrics == nullptr) return;
  deps_.metrics->Inc("gpusched_queue_admissions_total",
                     "Filter admissions of GPU pods, by where they were decided: on the "
                     "admission snapshot without the queue mutex (\"snapshot\") or under it "
                     "(\"mutex\").",
                     {{"path", path}});
}

}  // namespace gpusched::queue
