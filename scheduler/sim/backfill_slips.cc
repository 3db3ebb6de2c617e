#include "scheduler/sim/backfill_slips.h"

#include <utility>

namespace gpusched::sim {

void BackfillSlips::Refreshed(std::vector<Waiting> waiting) {
  waiting_.clear();
  for (Waiting& w : waiting) waiting_[w.unit] = w;
}

void BackfillSlips::Started(int unit, int ns, double t, const std::vector<std::string>& nodes,
                            bool backfilled) {
  running_.insert(unit);
  if (auto it = passed_.find(unit); it != passed_.end()) {
    ++heads_passed_;
    for (const Pass& p : it->second) {
      const Run& r = runs_[p.run];
      if (t - p.estimated_start <= kSlipToleranceSeconds || r.end <= p.estimated_start) continue;
      bool shared = false;
      for (const std::string& n : nodes) shared = shared || r.nodes.contains(n);
      if (!shared) continue;
      ++slips_;
      break;
    }
    passed_.erase(it);
  }
  if (!backfilled) return;
  auto self = waiting_.find(unit);
  if (self == waiting_.end()) return;  // not estimated: Backfill cannot have let it pass
  runs_.push_back(Run{{nodes.begin(), nodes.end()}, 1e300});
  open_run_[unit] = runs_.size() - 1;
  const Waiting& me = self->second;
  for (const auto& [other, w] : waiting_) {
    const bool ahead =
        w.ns == ns ? w.position < me.position
                   : me.cohort >= 0 && w.cohort == me.cohort && w.order >= 0 && w.order < me.order;
    if (!ahead || w.estimated_start < 0) continue;
    if (running_.contains(other)) continue;  // started since the refresh
    passed_[other].push_back(Pass{w.estimated_start, runs_.size() - 1});
  }
}

void BackfillSlips::Stopped(int unit, double t) {
  running_.erase(unit);
  auto it = open_run_.find(unit);
  if (it == open_run_.end()) return;
  runs_[it->second].end = t;
  open_run_.erase(it);
}

}  // namespace gpusched::sim
