// QueueManager: the attained-service ordering (AttainedServiceConfig). A
// pending pod's level (0 below its namespace's threshold, 1 past it) is set
// when it is queued and sorts it within its priority; the tick may evict
// running workloads past the threshold for a level-0 head that fits nowhere,
// through the reclaim planner (ReclaimJob::only), within a per-namespace
// token bucket of preemptions_per_hour.
#include <algorithm>

#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {

int8_t QueueManager::LevelLocked(const PodRequest& pod) {
  const AttainedServiceConfig& a = AttainedOf(options_.quotas, pod.ns);
  if (!a.enabled) return 0;
  const double run = attained_.GpuSeconds(pod.ns, pod.WorkloadKey(), Now() / 1000);
  return run >= static_cast<double>(a.demote_after_gpu_seconds) ? 1 : 0;
}

void QueueManager::RelevelLocked(const std::string& ns) {
  auto q = order_.find(ns);
  if (q == order_.end()) return;
  std::vector<Entry*> moved;  // collected first: the order changes as they move
  for (const Entry* e : q->second) {
    if (LevelLocked(*e->pod) != e->level) moved.push_back(FindEntryLocked(e->pod->uid));
  }
  for (Entry* e : moved) {
    q->second.erase(e);
    e->level = LevelLocked(*e->pod);
    q->second.insert(e);
  }
  if (!moved.empty()) QueueChangedLocked(ns);
}

QueueManager::PreemptionBudget& QueueManager::Refill(
    std::map<std::string, PreemptionBudget>& budgets, const std::string& ns, int32_t per_hour,
    int64_t now) {
  const double cap = std::max(1, per_hour);
  auto [it, fresh] = budgets.try_emplace(ns, PreemptionBudget{cap, now});
  PreemptionBudget& b = it->second;
  if (!fresh) {
    b.tokens = std::min(cap, b.tokens + static_cast<double>(now - b.at_ms) * per_hour / 3.6e6);
    b.at_ms = now;
  }
  return b;
}

bool QueueManager::AttainedVictimsLocked(const Entry& head, int64_t now, DemotedWorkloads* out) {
  *out = DemotedWorkloads{};
  const AttainedServiceConfig& a = AttainedOf(options_.quotas, head.pod->ns);
  if (!a.enabled || a.preemptions_per_hour <= 0 || head.level != 0) return false;
  if (head.pod->preempt_never) return false;  // preemptionPolicy: Never
  if (Refill(attained_budget_, head.pod->ns, a.preemptions_per_hour, now).tokens < 1) return false;
  const auto* workloads = attained_.Of(head.pod->ns);
  if (workloads == nullptr) return false;
  const int64_t now_s = now / 1000;
  const int64_t threshold = a.demote_after_gpu_seconds * 1000;
  for (const auto& [name, w] : *workloads) {
    if (w.running.empty() || name == head.pod->WorkloadKey()) continue;
    if (w.MilliSeconds(now_s) < threshold) continue;
    const bool higher = std::any_of(w.running.begin(), w.running.end(),
                                    [&](const auto& p) { return p.priority > head.pod->priority; });
    if (higher) continue;  // a workload goes whole or not at all
    // Not when every pod of it is being evicted already.
    for (const auto& p : w.running) {
      if (evicted_.contains(p.uid)) continue;
      out->workloads.insert(name);
      break;
    }
  }
  if (out->workloads.empty()) return false;
  out->ns = head.pod->ns;
  out->max_priority = head.pod->priority;
  return true;
}

}  // namespace gpusched::queue
