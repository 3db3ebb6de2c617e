// QueueManager: what the debug endpoints and /metrics show.
#include <algorithm>
#include <set>

#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {

QueueReport QueueManager::Report() {
  auto fw = deps_.framework();
  absl::MutexLock l(&mu_);
  auto snapshot = deps_.state->Snapshot();
  const int64_t now = Now();
  QueueReport report;
  report.quotas_enabled = options_.quotas.enabled;
  std::set<std::string> names;
  for (const std::string& ns : LedgerLocked(*snapshot).Namespaces()) names.insert(ns);
  for (const auto& [ns, q] : pending_) names.insert(ns);
  for (const std::string& ns : names) {
    std::vector<Unit> units = UnitsLocked(ns, *snapshot);
    const QuotaLedger& ledger = LedgerLocked(*snapshot);
    NamespaceQueue nq;
    nq.ns = ns;
    nq.cohort = ledger.Quota(ns).cohort;
    nq.guaranteed_milli = ledger.Guaranteed(ns);
    nq.limit_milli = ledger.Limit(ns);
    nq.usage_milli = ledger.Usage(ns);
    nq.borrowed_milli = ledger.Borrowed(ns);
    nq.lendable_milli = ledger.Lendable(ns);
    for (const auto& [model, amount] : ledger.Quota(ns).models) {
      nq.models.push_back(
          {model, amount.guaranteed * 1000, amount.limit * 1000, ledger.ModelUsage(ns, model)});
    }
    std::vector<PodRequest> pods;
    for (size_t i = 0; i < units.size(); ++i) {
      for (const Entry* e : units[i].members) {
        QueuedPod qp;
        qp.ns = ns;
        qp.name = e->pod.name;
        qp.uid = e->pod.uid;
        qp.priority = e->pod.priority;
        qp.priority_class = e->pod.priority_class;
        qp.creation_unix = e->pod.creation_unix;
        qp.gpu_milli = DemandMilli(e->pod.gpu);
        qp.gang = e->pod.gang;
        qp.gang_size = e->pod.gang_size;
        qp.position = static_cast<int32_t>(i + 1);
        qp.wait_seconds = static_cast<double>(now - e->first_seen_ms) / 1000.0;
        nq.queue.push_back(std::move(qp));
        pods.push_back(e->pod);
      }
    }
    // Reasons last: evaluating re-reads the queue.
    for (size_t i = 0; i < pods.size(); ++i) {
      nq.queue[i].reason = EvaluateLocked(pods[i], *snapshot, *fw).reason;
    }
    if (options_.quotas.enabled || !nq.queue.empty()) report.namespaces.push_back(std::move(nq));
  }
  for (const auto& [key, r] : reservations_) {
    GangReservationReport g;
    g.ns = r.ns;
    g.gang = r.gang;
    g.slots = static_cast<int32_t>(r.slots.size());
    g.expires_in_seconds = static_cast<double>(r.deadline_ms - now) / 1000.0;
    for (const Slot& s : r.slots) {
      g.bound += s.bound ? 1 : 0;
      g.nodes.emplace_back(s.node, FormatMask(s.devices));
    }
    report.reservations.push_back(std::move(g));
  }
  std::sort(report.reservations.begin(), report.reservations.end(),
            [](const auto& a, const auto& b) { return a.ns + a.gang < b.ns + b.gang; });
  return report;
}

std::optional<PodReport> QueueManager::ExplainPod(const std::string& ns, const std::string& name) {
  auto pod = deps_.state->FindPodByName(ns, name);
  if (!pod.has_value()) return std::nullopt;
  auto fw = deps_.framework();
  absl::MutexLock l(&mu_);
  auto snapshot = deps_.state->Snapshot();
  PodReport r;
  r.ns = ns;
  r.name = name;
  r.uid = pod->uid;
  if (pod->HoldsGpus()) {
    r.state = IsReservation(pod->uid) ? "reservation" : "bound";
    r.node = pod->node_name;
    return r;
  }
  if (pod->phase == PodPhase::kSucceeded || pod->phase == PodPhase::kFailed) {
    r.state = "finished";
    return r;
  }
  r.state = "pending";
  if (pod->gpu.count == 0) {
    r.reason = "pod requests no GPU: gpusched does not queue it";
    return r;
  }
  if (!pending_[ns].contains(pod->uid)) {
    Entry& e = pending_[ns][pod->uid];
    e.pod = *pod;
    e.first_seen_ms = Now();
  }
  Evaluation ev = EvaluateLocked(*pod, *snapshot, *fw, /*all_checks=*/true);
  r.position = ev.position;
  r.reason = ev.reason;
  policy::PodContext ctx = fw->Prepare(*pod, *snapshot);
  int fits = 0;
  std::string first_reason;
  for (const auto& node : snapshot->nodes()) {
    policy::FilterResult f = fw->Filter(ctx, *node);
    if (f.fits() && policy::FitsWithDevices(*fw, ctx, *node)) {
      ++fits;
    } else if (first_reason.empty()) {
      first_reason = StrCat(node->name, ": ", f.reason);
    }
  }
  if (r.reason.empty()) {
    r.reason = fits > 0 ? StrCat("admissible now; fits on ", fits, " nodes")
                        : StrCat("admissible by quota and queue order, but no node has room (",
                                 first_reason, ")");
  }
  if (fits == 0 && !pod->preempt_never && !ev.behind_earlier) {
    for (const auto& node : snapshot->nodes()) {
      auto plan = PlanNodeLocked(*pod, *node, *snapshot, *fw, nullptr, false, ev.quota_demand);
      if (!plan.has_value() || plan->empty()) continue;
      PreemptionPreview p;
      p.node = node->name;
      for (const std::string& uid : *plan) {
        auto it = std::find_if(node->pods.begin(), node->pods.end(),
                               [&](const PodOnNode& x) { return x.uid == uid; });
        p.victims.push_back(it == node->pods.end() ? uid : it->ns + "/" + it->name);
      }
      r.preemption.push_back(std::move(p));
    }
    std::stable_sort(r.preemption.begin(), r.preemption.end(), [](const auto& a, const auto& b) {
      return a.victims.size() < b.victims.size();
    });
    if (r.preemption.size() > 3) r.preemption.resize(3);
  }
  return r;
}

void QueueManager::CollectMetrics(GaugeWriter& w) {
  absl::MutexLock l(&mu_);
  auto snapshot = deps_.state->Snapshot();
  const QuotaLedger& ledger = LedgerLocked(*snapshot);
  std::set<std::string> names;
  for (const std::string& ns : ledger.Namespaces()) names.insert(ns);
  for (const auto& [ns, q] : pending_) names.insert(ns);
  for (const auto& [ns, h] : waits_) names.insert(ns);
  for (const std::string& ns : names) {
    const Labels labels = {{"namespace", ns}};
    auto q = pending_.find(ns);
    w.Gauge("gpusched_queue_pending_pods", "Pending GPU pods in the namespace's queue.", labels,
            q == pending_.end() ? 0.0 : static_cast<double>(q->second.size()));
    if (options_.quotas.enabled) {
      w.Gauge("gpusched_quota_usage_gpus", "GPUs held by the namespace.", labels,
              ledger.Usage(ns) / 1000.0);
      w.Gauge("gpusched_quota_guaranteed_gpus", "GPUs guaranteed to the namespace.", labels,
              ledger.Guaranteed(ns) / 1000.0);
      w.Gauge("gpusched_quota_limit_gpus", "Most GPUs the namespace may hold.", labels,
              ledger.Limit(ns) / 1000.0);
      w.Gauge("gpusched_quota_borrowed_gpus", "GPUs held above the guarantee.", labels,
              ledger.Borrowed(ns) / 1000.0);
    }
  }
  // Wait histogram (cumulative buckets, observed at bind), rendered at
  // scrape time as a Prometheus histogram; bounds as in NoteWaitLocked.
  static const std::vector<double> kBounds = {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  for (const auto& [ns, h] : waits_) {
    w.Histogram("gpusched_queue_wait_seconds", "Time from first sight to bind.",
                {{"namespace", ns}}, kBounds, h.buckets, h.count, h.sum);
  }
}

}  // namespace gpusched::queue
