// QueueManager's per-namespace UnitIndex (queue_manager.h): what counts
// ahead of every unit of a namespace, so that a filter does not walk the
// queue. WalkAhead is the rule itself, read by both the index and the
// from-scratch path (QueueOptions::recompute_from_scratch, the differential
// test's reference).
#include <algorithm>
#include <limits>

#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {
namespace {

// Whether unit `u` counts ahead of later units at `now` (rule (1)): asked
// about or known within stale_after_ms, and able to run within `limit`.
bool Counts(const int64_t seen, int64_t demand, int64_t now, int64_t stale_after_ms,
            int64_t limit) {
  return now - seen <= stale_after_ms && demand <= limit;
}

}  // namespace

QueueManager::Ahead QueueManager::WalkAhead(const std::vector<Unit>& units, size_t k,
                                            const EvalInputs& in, int64_t limit, bool strict) {
  Ahead ahead;
  if (!strict) return ahead;  // BestEffortFIFO: no earlier unit holds this one back
  for (size_t i = 0; i < k; ++i) {
    const Unit& u = units[i];
    const int64_t asked = u.head->last_filter_ms();
    const int64_t seen = std::max(asked, u.head->first_seen_ms);
    if (!Counts(seen, u.demand, in.now_ms, in.options->stale_after_ms, limit)) continue;
    ahead.demand += u.demand;
    ++ahead.count;
    // Never asked for: kube-scheduler may not want it yet.
    if (asked >= 0 && ahead.asked.size() < kBehindScanHeads) {
      ahead.asked.push_back(&u);
    }
  }
  return ahead;
}

void QueueManager::NoteAskedLocked(Entry& e) {
  const int64_t now = Now();
  const int64_t asked = e.last_filter_ms();
  const bool first_ask = asked < 0;
  const bool was_stale = now - std::max(asked, e.first_seen_ms) > options_.stale_after_ms;
  e.asked->at.store(now, std::memory_order_relaxed);
  if (!first_ask && !was_stale) return;
  auto it = unit_index_.find(e.pod->ns);
  if (it == unit_index_.end()) return;
  UnitIndex& x = it->second;
  auto u = x.unit_of.find(&e);
  if (u == x.unit_of.end()) {
    ForgetUnitIndexLocked(e.pod->ns);
    return;
  }
  if (x.units[u->second].head != &e) return;  // only a unit's head is read for its age
  // Asked again after going stale, it counts again: every later unit's sums
  // move. A first ask moves no sum: the node scan reads the heads' clocks
  // (AskedAhead), so it changes nothing the index holds.
  if (was_stale) ForgetUnitIndexLocked(e.pod->ns);
}

void QueueManager::AskedAhead(const UnitIndex& x, size_t k, std::vector<const Unit*>* heads) {
  for (size_t i = 0; i < k && heads->size() < kBehindScanHeads; ++i) {
    if (x.count_before[i + 1] > x.count_before[i] && x.units[i].head->last_filter_ms() >= 0) {
      heads->push_back(&x.units[i]);
    }
  }
}

QueueManager::UnitIndex& QueueManager::UnitIndexLocked(const std::string& ns,
                                                       const QuotaLedger& ledger, int64_t now) {
  auto it = unit_index_.find(ns);
  if (it != unit_index_.end()) {
    UnitIndex& x = it->second;
    bool valid = x.config_version == config_version_ && now <= x.valid_until_ms;
    if (valid && x.usage_generation != usage_.generation()) {
      for (const auto& [unit, held] : x.gang_held) {
        const PodRequest& head = *x.units[unit].head->pod;
        if (HeldGangMembersLocked(head) != held) valid = false;
      }
      x.usage_generation = usage_.generation();
    }
    if (valid) return x;
  }
  UnitIndex& x = unit_index_[ns];
  if (x.frozen.get() != nullptr) refreeze_.insert(ns);  // frozen again as the hold ends
  x = UnitIndex{};
  x.units = UnitsLocked(ns);
  x.config_version = config_version_;
  x.usage_generation = usage_.generation();
  x.valid_until_ms = std::numeric_limits<int64_t>::max();
  const int64_t limit = ledger.Limit(ns);
  const int64_t stale = options_.stale_after_ms;
  x.demand_before.reserve(x.units.size() + 1);
  x.count_before.reserve(x.units.size() + 1);
  int64_t demand = 0;
  int32_t count = 0;
  for (size_t i = 0; i < x.units.size(); ++i) {
    const Unit& u = x.units[i];
    x.demand_before.push_back(demand);
    x.count_before.push_back(count);
    for (const Entry* m : u.members) x.unit_of.emplace(m, i);
    x.unit_of.emplace(u.head, i);
    if (IsGang(*u.head->pod)) x.gang_held.emplace_back(i, HeldGangMembersLocked(*u.head->pod));
    const int64_t seen = std::max(u.head->last_filter_ms(), u.head->first_seen_ms);
    if (!Counts(seen, u.demand, now, stale, limit)) continue;
    x.valid_until_ms = std::min(x.valid_until_ms, seen + stale);
    demand += u.demand;
    ++count;
  }
  x.demand_before.push_back(demand);
  x.count_before.push_back(count);
  return x;
}

}  // namespace gpusched::queue
