#include "scheduler/queue/quota_ledger.h"

#include <algorithm>

#include "gpusched/util/strings.h"

namespace gpusched::queue {

std::string FormatGpus(int64_t milli) {
  if (milli % 1000 == 0) return StrCat(milli / 1000);
  std::string s = StrCat(milli / 1000, ".", milli % 1000 / 100);
  if (milli % 100 != 0) StrAppend(&s, milli % 100 / 10);
  return s;
}

QuotaLedger::QuotaLedger(const QuotaConfig& config, const ClusterSnapshot& snapshot)
    : config_(&config) {
  std::map<std::string, Use> use;
  GpuCapacity capacity;
  for (const auto& node : snapshot.nodes()) {
    const std::string& product = snapshot.product(*node);
    if (const int64_t cap = NodeCapacityMilli(*node); cap != 0) {
      capacity.total += cap;
      capacity.by_product[product] += cap;
    }
    for (const PodOnNode& p : node->pods) {
      Use& u = use[p.ns];
      const int64_t milli = int64_t{p.gpus} * p.milli_per_gpu;
      u.total += milli;
      u.by_product[product] += milli;
      ++u.pods;
    }
  }
  base_ = UsageTable::Of(std::move(use), std::move(capacity));
}

QuotaLedger::QuotaLedger(const QuotaConfig& config, std::shared_ptr<const UsageTable> use)
    : config_(&config), base_(std::move(use)) {}

const QuotaLedger::Use* QuotaLedger::Find(const std::string& ns) const {
  if (auto it = changed_.find(ns); it != changed_.end()) return &it->second;
  return base_->Find(ns);
}

QuotaLedger::Use& QuotaLedger::Mutable(const std::string& ns) {
  auto it = changed_.find(ns);
  if (it != changed_.end()) return it->second;
  const Use* base = Find(ns);
  return changed_.emplace(ns, base == nullptr ? Use{} : *base).first->second;
}

template <typename Fn>
void QuotaLedger::ForEachNamespace(Fn fn) const {
  for (const auto& [ns, q] : config_->namespaces) fn(ns);
  for (const UsageTable::Row& u : base_->rows()) {
    if (!config_->namespaces.contains(u->ns)) fn(u->ns);
  }
  for (const auto& [ns, u] : changed_) {
    if (!config_->namespaces.contains(ns) && !base_->contains(ns)) fn(ns);
  }
}

template <typename Fn>
void QuotaLedger::ForEachOfTable(Fn fn) const {
  auto q = config_->namespaces.begin();
  const auto q_end = config_->namespaces.end();
  const std::vector<UsageTable::Row>& rows = base_->rows();
  size_t r = 0;
  while (q != q_end || r < rows.size()) {
    const int order = q == q_end ? 1 : r == rows.size() ? -1 : q->first.compare(rows[r]->ns);
    fn(order <= 0 ? q->first : rows[r]->ns, order <= 0 ? q->second : config_->default_quota,
       order >= 0 ? rows[r]->total : int64_t{0});
    if (order <= 0) ++q;
    if (order >= 0) ++r;
  }
}

void QuotaLedger::Add(const std::string& ns, const std::string& product, int64_t milli) {
  // Keeps the cohort sum current (planning adds and removes pods on copies
  // many times; recomputing it over every namespace each time would not do).
  const std::string& cohort = Quota(ns).cohort;
  auto sum = cohort_free_.end();
  if (!cohort.empty() && !cohort_free_.empty()) {
    sum = cohort_free_.find(cohort);
    if (sum == cohort_free_.end()) cohort_free_.clear();  // a new cohort: recompute on use
  }
  if (sum != cohort_free_.end() && (config_->namespaces.contains(ns) || Find(ns) != nullptr)) {
    sum->second -= Guaranteed(ns) - Usage(ns) - HeldBack(ns);
  }
  if (claims_.contains(ns)) held_total_.reset();  // its HeldBack moves
  if (sums_ready_) used_total_ += milli;
  Use& u = Mutable(ns);
  u.total += milli;
  u.by_product[product] += milli;
  if (sum != cohort_free_.end()) sum->second += Guaranteed(ns) - Usage(ns) - HeldBack(ns);
}

const NamespaceQuota& QuotaLedger::Quota(const std::string& ns) const {
  auto it = config_->namespaces.find(ns);
  return it == config_->namespaces.end() ? config_->default_quota : it->second;
}

int64_t QuotaLedger::Usage(const std::string& ns) const {
  const Use* u = Find(ns);
  return u == nullptr ? 0 : u->total;
}

int64_t QuotaLedger::ModelUsage(const std::string& ns, const std::string& model) const {
  const Use* u = Find(ns);
  if (u == nullptr) return 0;
  int64_t sum = 0;
  for (const auto& [product, milli] : u->by_product) {
    if (ProductMatches(model, product)) sum += milli;
  }
  return sum;
}

int64_t QuotaLedger::Borrowed(const std::string& ns) const {
  return std::max<int64_t>(0, Usage(ns) - Guaranteed(ns));
}

int64_t QuotaLedger::WouldBorrow(const std::string& ns, int64_t before, int64_t demand) const {
  const int64_t used = Usage(ns) + before;
  return std::max<int64_t>(0, used + demand - std::max(used, Guaranteed(ns)));
}

std::vector<std::string> QuotaLedger::Namespaces() const {
  std::vector<std::string> out;
  ForEachNamespace([&out](const std::string& ns) { out.push_back(ns); });
  std::sort(out.begin(), out.end());
  return out;
}

int64_t QuotaLedger::HeldBack(const std::string& o) const {
  auto it = claims_.find(o);
  if (it == claims_.end()) return 0;
  return std::clamp<int64_t>(Guaranteed(o) - Usage(o), 0, it->second);
}

// Both sums walk every namespace: by name lookups on a copy with changes
// of its own, in one merged walk on a ledger as made (the one the queue
// publishes and warms on every change of usage: 500 namespaces' lookups
// were most of the hold that publishes it).
void QuotaLedger::FillSums() const {
  if (sums_ready_) return;
  used_total_ = 0;
  if (changed_.empty()) {
    ForEachOfTable(
        [&](const std::string&, const NamespaceQuota&, int64_t usage) { used_total_ += usage; });
  } else {
    ForEachNamespace([&](const std::string& o) { used_total_ += Usage(o); });
  }
  sums_ready_ = true;
}

void QuotaLedger::FillCohorts() const {
  if (!cohort_free_.empty()) return;
  if (!changed_.empty()) {
    ForEachNamespace([&](const std::string& o) {
      const std::string& c = Quota(o).cohort;
      // idle guarantee minus what o borrows
      if (!c.empty()) cohort_free_[c] += Guaranteed(o) - Usage(o) - HeldBack(o);
    });
    return;
  }
  ForEachOfTable([&](const std::string& o, const NamespaceQuota& q, int64_t usage) {
    if (q.cohort.empty()) return;
    const int64_t guaranteed = int64_t{q.gpus.guaranteed} * 1000;
    int64_t held = 0;  // HeldBack(o)
    if (!claims_.empty()) {
      if (auto it = claims_.find(o); it != claims_.end()) {
        held = std::clamp<int64_t>(guaranteed - usage, 0, it->second);
      }
    }
    cohort_free_[q.cohort] += guaranteed - usage - held;
  });
}

void QuotaLedger::Warm() const {
  FillSums();
  FillCohorts();
  (void)Claimed("");
}

int64_t QuotaLedger::Idle() const {
  FillSums();
  return std::max<int64_t>(0, Capacity() - used_total_);
}

int64_t QuotaLedger::GuaranteedTotal() const {
  int64_t sum = 0;
  ForEachNamespace([&](const std::string& o) { sum += Guaranteed(o); });
  return sum;
}

int64_t QuotaLedger::Lendable(const std::string& ns) const {
  const int64_t own_idle = std::max<int64_t>(0, Guaranteed(ns) - Usage(ns));
  return std::max<int64_t>(0, Idle() - own_idle - Claimed(ns));
}

int64_t QuotaLedger::CohortLendable(const std::string& ns) const {
  const std::string& cohort = Quota(ns).cohort;
  if (cohort.empty()) return 0;
  FillCohorts();
  auto it = cohort_free_.find(cohort);
  const int64_t all = it == cohort_free_.end() ? 0 : it->second;
  // ns itself counts in the sum only if it is listed or holds GPUs.
  const bool counted = config_->namespaces.contains(ns) || Find(ns) != nullptr;
  const int64_t self = counted ? Guaranteed(ns) - Usage(ns) - HeldBack(ns) : 0;
  return std::max<int64_t>(0, all - self);
}

int64_t QuotaLedger::Claimed(const std::string& ns) const {
  if (claims_.empty()) return 0;
  if (!held_total_.has_value()) {
    int64_t sum = 0;
    for (const auto& [o, milli] : claims_) sum += HeldBack(o);
    held_total_ = sum;
  }
  return *held_total_ - (claims_.contains(ns) ? HeldBack(ns) : 0);
}

int64_t QuotaLedger::ModelLendable(const std::string& ns, const std::string& model) const {
  int64_t capacity = 0;
  for (const auto& [product, milli] : base_->capacity().by_product) {
    if (ProductMatches(model, product)) capacity += milli;
  }
  int64_t used = 0;
  ForEachNamespace([&](const std::string& o) { used += ModelUsage(o, model); });
  int64_t own_idle = 0;
  if (auto it = Quota(ns).models.find(model); it != Quota(ns).models.end()) {
    own_idle = std::max<int64_t>(0, it->second.guaranteed * 1000 - ModelUsage(ns, model));
  }
  return std::max<int64_t>(0, capacity - used - own_idle);
}

QuotaVerdict QuotaLedger::Check(const std::string& ns, int64_t demand) const {
  QuotaVerdict v;
  v.usage = Usage(ns);
  v.demand = demand;
  v.guaranteed = Guaranteed(ns);
  v.limit = Limit(ns);
  if (!config_->enabled) return v;
  const int64_t after = v.usage + demand;
  if (after <= v.guaranteed) return v;
  v.borrows = true;
  v.over_limit = after > v.limit;
  v.lendable = Lendable(ns);
  v.cohort_lendable = std::min(v.lendable, CohortLendable(ns));
  v.claimed = Claimed(ns);
  // What it takes from idle GPUs beyond its own idle guarantee.
  v.ok = !v.over_limit && after - std::max(v.usage, v.guaranteed) <= v.lendable;
  return v;
}

std::string QuotaLedger::CheckModels(const std::string& ns, const std::string& product,
                                     int64_t demand) const {
  if (!config_->enabled) return "";
  for (const auto& [model, amount] : Quota(ns).models) {
    if (!ProductMatches(model, product)) continue;
    const int64_t after = ModelUsage(ns, model) + demand;
    const int64_t g = amount.guaranteed * 1000;
    if (after <= g) continue;
    const int64_t lendable = ModelLendable(ns, model);
    if (after <= amount.limit * 1000 && after - std::max(after - demand, g) <= lendable) continue;
    if (after > amount.limit * 1000) {
      return StrCat("gpusched: namespace ", ns, " at its ", model, " limit: holds ",
                    FormatGpus(after - demand), " of limit ", amount.limit, " ", model,
                    " GPUs; pod needs ", FormatGpus(demand));
    }
    return StrCat("gpusched: namespace ", ns, " at ", model, " quota: ", FormatGpus(after - demand),
                  "/", amount.guaranteed, " GPUs guaranteed, limit ", amount.limit, ", ",
                  FormatGpus(lendable), " idle ", model, " GPUs it may borrow; pod needs ",
                  FormatGpus(demand));
  }
  return "";
}

std::string FormatLimit(int64_t milli) {
  return milli >= kUnlimitedMilli ? std::string("no limit") : StrCat("limit ", FormatGpus(milli));
}

std::string QuotaMessage(const std::string& ns, const std::string& cohort, const QuotaVerdict& v) {
  if (v.over_limit) {
    return StrCat("gpusched: namespace ", ns, " at its limit: holds ", FormatGpus(v.usage),
                  " of limit ", FormatGpus(v.limit), " GPUs (", FormatGpus(v.guaranteed),
                  " guaranteed)");
  }
  std::string idle = StrCat(FormatGpus(v.lendable), " idle GPUs it may borrow");
  if (!cohort.empty() && v.cohort_lendable > 0) {
    StrAppend(&idle, " (", FormatGpus(v.cohort_lendable), " lent by cohort ", cohort, ")");
  }
  if (v.claimed > 0) {
    StrAppend(&idle, ", ", FormatGpus(v.claimed),
              " more held for pods of namespaces below their guarantee");
  }
  return StrCat("gpusched: namespace ", ns, " at quota: ", FormatGpus(v.usage), "/",
                FormatGpus(v.guaranteed), " GPUs guaranteed, ", FormatLimit(v.limit), ", ", idle);
}

}  // namespace gpusched::queue
