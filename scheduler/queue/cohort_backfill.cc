// QueueManager: Backfill across the namespaces of a cohort (docs/queue.md,
// "Backfill across a cohort"). The namespaces of one cohort whose
// queueingStrategy is Backfill share one order: the order the start
// estimator tries units in (StartEstimate::order of the last refresh; a
// unit it did not estimate comes after every one it did). A unit of such a
// namespace that would borrow (its namespace's usage, its earlier units'
// demand and its own above its guarantee), or that Backfill lets pass
// earlier units of its own namespace, is held back by each earlier unit of
// another such namespace of its cohort that kube-scheduler has asked about
// and that has an estimated start, unless its runtime estimate plus the
// margin ends by that start; when the estimate had it wait, also by each
// later such unit the estimate starts before it would end (it would take
// the GPUs the estimate gave that unit, which, started later, could run
// into an earlier unit's reservation). A holding unit holds it whatever the
// nodes when both borrow more together than the idle GPUs this one may
// borrow (QuotaLedger::Lendable): the holder waits for idle GPUs this one
// would take. Otherwise (the idle GPUs are enough for both, or the holder
// is within its guarantee) it holds only if it could use one of this pod's
// nodes (the node scan, without the mutex). Without an estimate refresh at most
// backfill_max_age_s old nothing is held across namespaces. The start
// estimator holds the same units back (start_estimator.h), so the earlier
// units' estimates already count on what passes them being gone by then.
#include <algorithm>
#include <limits>

#include "absl/time/time.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {
namespace {

std::string FormatStart(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

// Why `pod` waits for `h` of its cohort (estimated to start at `start`).
std::string HeldReason(const PodRequest& pod, const std::string& cohort, const PodRequest& h,
                       int64_t start, bool earlier, bool always, bool has_end) {
  return StrCat(
      "gpusched: namespace ", pod.ns, ": held for ", h.Key(),
      earlier ? StrCat(", earlier in cohort ", cohort, "'s Backfill order, estimated to start at ")
              : StrCat(", later in cohort ", cohort,
                       "'s Backfill order but estimated to start before it, at "),
      FormatStart(start),
      always ? " by borrowing idle GPUs this pod would take" : " on nodes this pod could use",
      has_end ? "; this pod's runtime estimate and margin end after that"
              : "; this pod has no runtime estimate");
}

}  // namespace

void QueueManager::ApplyCohortHoldsLocked(const PodRequest& pod, int64_t own_demand,
                                          const EvalInputs& in, const ClusterSnapshot& snapshot,
                                          const policy::Framework& fw, bool all_checks,
                                          BehindScan* deferred, Evaluation* ev) {
  if (in.gang_reserved || !in.options->quotas.enabled) return;
  if (!ev->reason.empty() && !all_checks) return;
  if (ev->behind_earlier) return;  // held back in its own namespace already
  std::vector<BehindScan::Head> heads;
  const int64_t passed = CohortHoldsLocked(pod, own_demand, ev->backfill_end > 0, in, &heads);
  if (passed > 0 && ev->backfill_end == 0) ev->backfill_end = passed;
  if (heads.empty()) return;
  const std::string position = StrCat("position ", ev->position, " in queue");
  if (deferred != nullptr) {
    if (deferred->heads.empty()) {
      deferred->pod = pod;
      deferred->position = position;
    }
    for (BehindScan::Head& h : heads) deferred->heads.push_back(std::move(h));
    return;
  }
  BehindScan scan;
  scan.pod = pod;
  scan.position = position;
  scan.heads = std::move(heads);
  ScanBehind(scan, snapshot, fw, ev);
}

void QueueManager::ExplainCohortHolds(const PodRequest& pod, const std::vector<Unit>& units,
                                      const EvalInputs& in, const ClusterSnapshot& snapshot,
                                      const policy::Framework& fw, Evaluation* ev) {
  if (units.empty() || in.gang_reserved || !in.options->quotas.enabled) return;
  if (!ev->reason.empty() || ev->behind_earlier) return;
  const size_t k = units.size() - 1;
  const int64_t own =
      WalkAhead(units, k, in, in.ledger->Limit(pod.ns), /*strict=*/true).demand + units[k].demand;
  BehindScan scan;
  {
    StateHold l(this, "explain", BackgroundUse());
    CohortHoldsLocked(pod, own, ev->backfill_end > 0, in, &scan.heads);
  }
  if (scan.heads.empty()) return;
  scan.pod = pod;
  scan.position = StrCat("position ", ev->position, " in queue");
  ScanBehind(scan, snapshot, fw, ev);
}

int64_t QueueManager::CohortHoldsLocked(const PodRequest& pod, int64_t own_demand, bool passed_own,
                                        const EvalInputs& in,
                                        std::vector<BehindScan::Head>* heads) {
  const QuotaLedger& ledger = *in.ledger;
  const NamespaceQuota& quota = ledger.Quota(pod.ns);
  if (quota.cohort.empty() || quota.queueing != QueueingStrategy::kBackfill) return 0;
  if (in.board == nullptr) return 0;
  const EstimateBoard& board = *in.board;
  const int64_t now_s = in.now_ms / 1000;
  if (now_s - board.starts.made_at_s > in.options->backfill_max_age_s) return 0;
  // Within its guarantee (its namespace's earlier units counted) a unit is
  // never held back by another namespace, unless it passes those earlier
  // units by Backfill: then it starts where the estimate had it wait.
  const int64_t own_over = ledger.WouldBorrow(pod.ns, 0, own_demand);
  if (own_over == 0 && !passed_own) return 0;
  const int64_t lendable = ledger.Lendable(pod.ns);
  const int64_t end = PromisedEnd(board, pod.uid, now_s, *in.options);  // 0: none
  // A unit the last refresh did not estimate comes after every one it did.
  auto self = board.starts.by_uid.find(pod.uid);
  const bool known = self != board.starts.by_uid.end();
  const int64_t order = known ? self->second.order : std::numeric_limits<int64_t>::max();
  // Started now by the estimate, it takes nobody's GPUs; else it must also
  // be gone before the later units the estimate starts before it start.
  const bool waits =
      !known || self->second.start_s < 0 || self->second.start_s > board.starts.made_at_s;
  int64_t passed = 0;
  for (const auto& [ns, entries] : order_) {
    if (ns == pod.ns) continue;
    const NamespaceQuota& other = ledger.Quota(ns);
    if (other.cohort != quota.cohort || other.queueing != QueueingStrategy::kBackfill) continue;
    const UnitIndex& index = UnitIndexLocked(ns, ledger, in.now_ms);
    std::vector<const Unit*> asked;
    AskedAhead(index, index.units.size(), &asked);
    for (const Unit* unit : asked) {
      if (heads->size() >= kBehindScanHeads) break;
      const Unit& u = *unit;
      const size_t i = static_cast<size_t>(&u - index.units.data());
      auto est = board.starts.by_uid.find(u.head->pod->uid);
      // No estimate: no reservation (it may never start, or start any time).
      if (est == board.starts.by_uid.end() || est->second.start_s < 0) continue;
      const int64_t start = est->second.start_s;
      const bool earlier = est->second.order >= 0 && est->second.order < order;
      const bool gone = end > 0 && end <= start;  // gone by its estimated start
      if (!earlier && (!waits || gone)) break;    // the later ones start later still
      if (gone) {
        passed = end;
        continue;
      }
      // A unit that borrows waits for idle GPUs this pod would take whatever
      // its nodes when what both borrow exceeds what this pod may borrow;
      // otherwise, as one within its guarantee, only for its nodes.
      const int64_t h_over = ledger.WouldBorrow(ns, index.demand_before[i], u.demand);
      const bool always = h_over > 0 && h_over + own_over > lendable;
      heads->push_back(
          {u.head->pod, u.demand,
           HeldReason(pod, quota.cohort, *u.head->pod, start, earlier, always, end > 0), always});
    }
  }
  return passed;
}

bool QueueManager::CohortHeldLocked(const PodRequest& head, int64_t demand) {
  const EvalInputs in{&LedgerLocked(), &options_, false, Now(), admit_board_.get()};
  std::vector<BehindScan::Head> heads;
  CohortHoldsLocked(head, demand, /*passed_own=*/false, in, &heads);
  return std::any_of(heads.begin(), heads.end(),
                     [](const BehindScan::Head& h) { return h.always; });
}

}  // namespace gpusched::queue
