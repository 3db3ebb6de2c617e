// QueueManager: the Backfill queueing strategy (docs/queue.md, "Backfill").
// A namespace with queueingStrategy Backfill queues as StrictFIFO, except
// that a later unit whose runtime estimate, plus a margin, ends before the
// estimated start of every earlier unit (the last estimate refresh's, at
// most backfill_max_age_s old) passes them: the earlier units hold their
// reservation at their estimated start, and the later unit is gone by then.
// A unit that overruns its estimate is never evicted for it: the next
// refresh moves the earlier units' estimates, and the overrun is counted
// (gpusched_backfill_overruns_total).
#include <algorithm>

#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {

int64_t QueueManager::BackfillEnd(const std::vector<Unit>& units, size_t k, const EvalInputs& in) {
  if (in.board == nullptr || k == 0 || k > kBehindScanHeads || k >= units.size()) return 0;
  const EstimateBoard& board = *in.board;
  const int64_t now_s = in.now_ms / 1000;
  if (now_s - board.starts.made_at_s > in.options->backfill_max_age_s) return 0;
  const int64_t end = PromisedEnd(board, units[k].head->pod->uid, now_s, *in.options);
  if (end == 0) return 0;
  for (size_t i = 0; i < k; ++i) {
    auto start = board.starts.by_uid.find(units[i].head->pod->uid);
    // An earlier unit without an estimate might start any time: no backfill.
    if (start == board.starts.by_uid.end() || start->second.start_s < 0) return 0;
    if (end > start->second.start_s) return 0;
  }
  return end;
}

int64_t QueueManager::PromisedEnd(const EstimateBoard& board, const std::string& uid, int64_t now_s,
                                  const QueueOptions& options) {
  auto own = board.runtimes.find(uid);
  if (own == board.runtimes.end() || !own->second.known()) return 0;
  const int64_t runtime = own->second.seconds;
  return now_s + runtime + std::max(options.backfill_margin_s, runtime / 10);
}

bool QueueManager::Backfilled(const std::string& uid) const {
  absl::MutexLock l(&mu_);
  return backfilled_.contains(uid);
}

int64_t QueueManager::CountOverrunsLocked(int64_t now_s) {
  int64_t overruns = 0;
  for (auto it = backfilled_.begin(); it != backfilled_.end();) {
    auto next = std::next(it);
    if (FindEntryLocked(it->first) == nullptr) {  // no longer waiting
      auto pod = deps_.state->FindPod(it->first);
      if (!pod.has_value() || !pod->HoldsGpus()) {
        backfilled_.erase(it);  // ended (or gone) within its promise, or never bound
      } else if (now_s > it->second) {
        ++overruns;  // running past the end it promised: counted once, never evicted
        backfilled_.erase(it);
      }
    }
    it = next;
  }
  return overruns;
}

}  // namespace gpusched::queue
