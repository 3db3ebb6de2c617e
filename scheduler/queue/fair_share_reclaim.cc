// QueueManager: fair-share reclaim (reclaim.fairShare, docs/queue.md
// "Fair-share reclaim"). When several namespaces want more than their
// guarantee, the surplus divides by weight (WeightedFairShares). With the
// option on, a head that waits for quota while its namespace, with it
// admitted, would still hold no more than its fair share reclaims from the
// namespaces above theirs: each victim namespace keeps at least the larger
// of its guarantee and its fair share, so nothing within a guarantee goes
// and the victims do not come straight back. A token bucket per reclaiming
// namespace bounds the evictions (one token per workload evicted).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/queue/fair_share.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {

using absl::StrCat;

bool QueueManager::FairFloorsLocked(const std::string& ns, int64_t demand, int64_t now,
                                    absl::flat_hash_map<std::string, int64_t>* floors) {
  floors->clear();
  const FairShareReclaimConfig& f = options_.reclaim.fair_share;
  if (Refill(fair_budget_, ns, f.preemptions_per_hour, now).tokens < 1) return false;
  const QuotaLedger& ledger = LedgerLocked();
  const int64_t after = ledger.Usage(ns) + demand;
  if (after <= ledger.Guaranteed(ns) || after > ledger.Limit(ns)) return false;
  std::vector<FairShareClaim> claims;
  std::vector<std::string> names = ledger.Namespaces();
  if (std::find(names.begin(), names.end(), ns) == names.end()) names.push_back(ns);
  for (const std::string& o : names) {
    auto pending = pending_milli_.find(o);
    claims.push_back({o, ledger.Guaranteed(o), ledger.Limit(o), ledger.Usage(o),
                      pending == pending_milli_.end() ? 0 : pending->second,
                      ledger.Quota(o).weight});
  }
  const auto shares = WeightedFairShares(claims, ledger.Capacity());
  if (after > shares.at(ns)) return false;  // it would hold more than its share
  for (const FairShareClaim& c : claims) {
    const int64_t floor = std::max(c.guaranteed, shares.at(c.ns));
    if (c.ns != ns && c.usage > floor) floors->emplace(c.ns, floor);
  }
  return !floors->empty();
}

std::string QueueManager::FairShareReasonLocked(const ReclaimJob& job, int64_t now) {
  absl::flat_hash_set<std::string> workloads;
  std::set<std::string> above;  // the victims' namespaces
  for (const std::string& uid : job.victims) {
    auto pod = deps_.state->FindPod(uid);
    workloads.insert(pod.has_value() && !pod->gang.empty() ? StrCat(pod->ns, "/", pod->gang) : uid);
    if (pod.has_value()) above.insert(pod->ns);
  }
  Refill(fair_budget_, job.ns, options_.reclaim.fair_share.preemptions_per_hour, now).tokens -=
      static_cast<double>(std::max<size_t>(1, workloads.size()));
  return StrCat("reclaim: fair share: ", job.ns, " holds less than its weighted fair share and ",
                job.pod.Key(), " needs ", FormatGpus(job.demand),
                " GPUs; taken from namespaces above their share (", absl::StrJoin(above, ", "),
                ")");
}

}  // namespace gpusched::queue
