// QuotaLedger: GPU usage per namespace (and per GPU model) derived from one
// ClusterSnapshot, checked against the quotas of config/scheduler-policy.json
// (or GPUQuota objects). Usage is never stored anywhere else: it is the GPUs
// of the pods the snapshot shows on nodes (bound, assumed by bind, or
// reserved for a gang). Amounts are in milli-GPUs so shared devices count
// fractionally.
//
// The model is work-conserving (docs/queue.md, "Who may use an idle GPU"):
// a demand d is admissible for namespace n when
//   usage(n) + d <= guaranteed(n), or
//   usage(n) + d <= limit(n) and
//   usage(n) + d - max(usage(n), guaranteed(n)) <= lendable(n)
// (what it takes beyond its own idle guarantee), where lendable(n) is every
// idle GPU of the cluster except n's own idle guarantee and the idle
// guarantee that claims hold back for other namespaces' reclaiming pods:
//   lendable(n) = capacity - sum of all usage - max(0, guaranteed(n) - usage(n))
//                 - claims held back by others, never below 0.
// Whose idle guarantee or which unguaranteed GPU a borrower uses does not
// matter for admission: what is above a guarantee stays reclaimable
// (reclaim restores guarantees from any borrower, and a cohort's idle
// guarantee from borrowers outside the cohort). CohortLendable is the part
// n's cohort lends (the idle guarantee of its other members minus what they
// borrow themselves), used by reclaim and in messages. The same rule applies
// per model key (ProductMatches against the node's product), over the
// capacity of the matching products.
//
// Claims: a namespace below its guarantee whose waiting pod reclaim is
// freeing GPUs for holds back up to that pod's demand of its idle guarantee
// (SetClaims); the held amount is not lendable, so the GPUs reclaim frees
// cannot be borrowed by another namespace before the pod gets them.
//
// Built from a snapshot (every pod of every node) or from a UsageIndex's
// sums (the same numbers, kept current incrementally); value type;
// thread-compatible.
#ifndef GPUSCHED_QUEUE_QUOTA_LEDGER_H_
#define GPUSCHED_QUEUE_QUOTA_LEDGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/core/config.h"
#include "gpusched/model/snapshot.h"
#include "scheduler/queue/usage_index.h"

namespace gpusched::queue {

// UIDs of gang reservation placeholders start with this.
inline constexpr char kReservationUidPrefix[] = "gpusched-reservation/";

// Returns milli-GPUs as a GPU count for messages: "16", "2.5".
std::string FormatGpus(int64_t milli);
// A limit that is not set (kUnlimitedGpus, quota_objects.h), in milli-GPUs.
inline constexpr int64_t kUnlimitedMilli = (int64_t{1} << 24) * 1000;
// "limit 24", or "no limit" for kUnlimitedMilli.
std::string FormatLimit(int64_t milli);

// GPU milli-units a pod holds or asks for.
inline int64_t DemandMilli(const GpuRequest& gpu) { return gpu.total_milli(); }

struct QuotaVerdict {
  bool ok = true;
  bool borrows = false;     // above the guarantee: admissible only by borrowing
  bool over_limit = false;  // refused by the limit itself (not by idle GPUs)
  int64_t usage = 0;        // milli
  int64_t demand = 0;
  int64_t guaranteed = 0;
  int64_t limit = 0;
  int64_t lendable = 0;         // idle GPUs it may borrow now (see above)
  int64_t cohort_lendable = 0;  // the part its cohort lends
  int64_t claimed = 0;          // idle guarantee held back for others' reclaims
};

class QuotaLedger {
 public:
  QuotaLedger(const QuotaConfig& config, const ClusterSnapshot& snapshot);
  // Shares `use` (a UsageIndex's table): nothing is copied.
  QuotaLedger(const QuotaConfig& config, std::shared_ptr<const UsageTable> use);

  // Adds `milli` (negative to remove) to `ns` on a node of `product`.
  void Add(const std::string& ns, const std::string& product, int64_t milli);

  const NamespaceQuota& Quota(const std::string& ns) const;
  int64_t Usage(const std::string& ns) const;
  int64_t ModelUsage(const std::string& ns, const std::string& model) const;
  int64_t Guaranteed(const std::string& ns) const { return Quota(ns).gpus.guaranteed * 1000; }
  int64_t Limit(const std::string& ns) const { return Quota(ns).gpus.limit * 1000; }
  int64_t Borrowed(const std::string& ns) const;
  // Calls fn(ns) for each namespace using more than its guarantee, in no
  // set order: O(namespaces with usage), nothing copied (a namespace
  // without usage never borrows).
  template <typename Fn>
  void ForEachBorrower(Fn fn) const {
    for (const UsageTable::Row& u : base_->rows()) {
      if (!changed_.contains(u->ns) && u->total > Guaranteed(u->ns)) fn(u->ns);
    }
    for (const auto& [ns, u] : changed_) {
      if (u.total > Guaranteed(ns)) fn(ns);
    }
  }
  // The part of `demand` more that ns would borrow (take above its
  // guarantee) once `before` more is in use (milli, >= 0).
  int64_t WouldBorrow(const std::string& ns, int64_t before, int64_t demand) const;
  // The cluster's GPU capacity and what no pod holds (milli).
  int64_t Capacity() const { return base_->capacity().total; }
  int64_t Idle() const;
  // Fills every sum that const calls otherwise fill on first use, so that a
  // ledger shared between threads (the queue's PlanningView) is never
  // written by a const call. Copies made after it inherit the sums.
  void Warm() const;
  // Idle GPUs ns may borrow now (milli, >= 0; see the rule above).
  int64_t Lendable(const std::string& ns) const;
  // What the other members of ns's cohort can lend now (milli, >= 0).
  int64_t CohortLendable(const std::string& ns) const;
  // Idle guarantee other namespaces hold back by claims.
  int64_t Claimed(const std::string& ns) const;
  // Sum of the guarantees of the listed namespaces and of the unlisted ones
  // holding GPUs (what the cluster has promised), milli.
  int64_t GuaranteedTotal() const;
  // namespace -> milli-GPUs of its idle guarantee held back (see above).
  void SetClaims(std::map<std::string, int64_t> claims) {
    claims_ = std::move(claims);
    cohort_free_.clear();
    held_total_.reset();
  }
  const std::map<std::string, int64_t>& claims() const { return claims_; }
  // Points the ledger at an equal copy of its config (planning on copies
  // without the queue's mutex).
  void RebindConfig(const QuotaConfig& config) { config_ = &config; }

  // Namespace-level check of `demand` milli-GPUs more for `ns`.
  QuotaVerdict Check(const std::string& ns, int64_t demand) const;
  // Per-model check for a pod landing on a node of `product`: "" or reason.
  std::string CheckModels(const std::string& ns, const std::string& product, int64_t demand) const;
  // Listed namespaces and namespaces holding GPUs, sorted.
  std::vector<std::string> Namespaces() const;
  bool enabled() const { return config_->enabled; }

 private:
  using Use = NamespaceUse;
  // Calls fn(namespace) for every listed namespace and every one holding GPUs.
  template <typename Fn>
  void ForEachNamespace(Fn fn) const;
  // Calls fn(namespace, its quota, its usage) for the same namespaces, in
  // name order: the config and the usage table (both sorted) walked
  // together, with no lookup per namespace. REQUIRES: changed_ empty (a
  // ledger as made from a table, like the one the queue publishes).
  template <typename Fn>
  void ForEachOfTable(Fn fn) const;
  int64_t ModelLendable(const std::string& ns, const std::string& model) const;
  // The part of o's idle guarantee its claim holds back.
  int64_t HeldBack(const std::string& o) const;
  // Fill the cached sums below if they are empty.
  void FillSums() const;
  void FillCohorts() const;

  const QuotaConfig* config_;
  const Use* Find(const std::string& ns) const;
  Use& Mutable(const std::string& ns);

  // Usage by namespace: `base_` is shared by copies (a ledger is copied per
  // victim set tried), `changed_` holds the namespaces Add() touched in
  // this copy and shadows base_.
  std::shared_ptr<const UsageTable> base_;
  std::map<std::string, Use> changed_;
  std::map<std::string, int64_t> claims_;
  // Per cohort: the sum over its members of guaranteed - usage - held back
  // (what Lendable subtracts one member from). Filled on first use, emptied
  // by every change.
  mutable std::map<std::string, int64_t> cohort_free_;
  // The sum of every namespace's usage and the sum of HeldBack over the
  // claiming namespaces (what Claimed subtracts one namespace from). Filled
  // on first use (sums_ready_); Add keeps the usage sum current and drops
  // the held sum when a claiming namespace's usage moves.
  mutable bool sums_ready_ = false;
  mutable int64_t used_total_ = 0;
  mutable std::optional<int64_t> held_total_;
};

// The standard "at quota" message (without the queue position): names the
// limit when the limit refuses, else what is guaranteed and what is idle.
std::string QuotaMessage(const std::string& ns, const std::string& cohort, const QuotaVerdict& v);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_QUOTA_LEDGER_H_
