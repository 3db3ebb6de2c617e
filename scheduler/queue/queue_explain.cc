// QueueManager: what the debug endpoints and /metrics show. The queue report
// copies what it lists under the mutex and explains it without the mutex.
#include <algorithm>
#include <deque>
#include <set>

#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/fair_share.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {
namespace {

// A queued pod as the debug page and the position annotations show it.
QueuedPod Listed(const PodRequest& pod, int32_t position, int64_t waited_ms) {
  QueuedPod qp;
  qp.ns = pod.ns;
  qp.name = pod.name;
  qp.uid = pod.uid;
  qp.priority = pod.priority;
  qp.priority_class = pod.priority_class;
  qp.creation_unix = pod.creation_unix;
  qp.gpu_milli = DemandMilli(pod.gpu);
  qp.gang = pod.gang;
  qp.gang_size = pod.gang_size;
  qp.position = position;
  qp.wait_seconds = static_cast<double>(waited_ms) / 1000.0;
  return qp;
}

}  // namespace

QueueReport QueueManager::Report(const ReportQuery& query) {
  auto fw = deps_.framework();
  auto snapshot = deps_.state->Snapshot();
  QueueReport report;
  // Copies made under the mutex: entries (stable addresses), units over
  // them, the ledger and the options it points to.
  std::deque<Entry> entries;
  std::vector<std::vector<Unit>> units;
  std::vector<std::set<std::string>> reserved;
  std::shared_ptr<const QueueOptions> options;
  std::unique_ptr<QuotaLedger> ledger;
  int64_t now = 0;
  {
    TimedLock l(&mu_, &lock_stats_, deps_.metrics, "report");
    SyncLocked(snapshot);
    now = Now();
    options = shared_options_;
    ledger = std::make_unique<QuotaLedger>(LedgerLocked());
    ledger->RebindConfig(options->quotas);
    report.quotas_enabled = options_.quotas.enabled;
    report.quota_source = options_.quota_source;
    std::set<std::string> names;
    if (!query.ns.empty()) {
      names.insert(query.ns);
    } else {
      for (const std::string& ns : ledger->Namespaces()) names.insert(ns);
      for (const auto& [ns, q] : order_) names.insert(ns);
    }
    for (const std::string& ns : names) {
      NamespaceQueue nq;
      nq.ns = ns;
      auto q = order_.find(ns);
      nq.pending_pods = q == order_.end() ? 0 : static_cast<int64_t>(q->second.size());
      auto pm = pending_milli_.find(ns);
      nq.pending_milli = pm == pending_milli_.end() ? 0 : pm->second;
      std::vector<Unit> live = UnitsLocked(ns, "", static_cast<size_t>(std::max(0, query.limit)));
      std::vector<Unit> copy;
      std::set<std::string> gangs;
      size_t listed = 0;
      for (const Unit& u : live) {
        if (listed >= static_cast<size_t>(std::max(0, query.limit))) break;
        Unit c{nullptr, {}, u.demand};
        for (const Entry* e : u.members) {
          entries.push_back(*e);
          c.members.push_back(&entries.back());
          if (e == u.head) c.head = &entries.back();
        }
        listed += c.members.size();
        if (IsGang(u.head->pod) && reservations_.contains(GangKey(ns, u.head->pod.gang))) {
          gangs.insert(u.head->pod.gang);
        }
        copy.push_back(std::move(c));
      }
      units.push_back(std::move(copy));
      reserved.push_back(std::move(gangs));
      report.namespaces.push_back(std::move(nq));
    }
    for (const auto& [key, r] : reservations_) {
      if (!query.ns.empty() && r.ns != query.ns) continue;
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
  }
  // Explained from the copies, without the mutex.
  std::vector<NamespaceQueue> shown;
  for (size_t n = 0; n < report.namespaces.size(); ++n) {
    NamespaceQueue& nq = report.namespaces[n];
    const std::string& ns = nq.ns;
    nq.cohort = ledger->Quota(ns).cohort;
    nq.guaranteed_milli = ledger->Guaranteed(ns);
    nq.limit_milli = ledger->Limit(ns);
    nq.usage_milli = ledger->Usage(ns);
    nq.borrowed_milli = ledger->Borrowed(ns);
    nq.lendable_milli = ledger->Lendable(ns);
    nq.cohort_lendable_milli = ledger->CohortLendable(ns);
    nq.weight = ledger->Quota(ns).weight;
    for (const auto& [model, amount] : ledger->Quota(ns).models) {
      nq.models.push_back(
          {model, amount.guaranteed * 1000, amount.limit * 1000, ledger->ModelUsage(ns, model)});
    }
    const std::vector<Unit>& us = units[n];
    for (size_t i = 0; i < us.size(); ++i) {
      for (const Entry* e : us[i].members) {
        QueuedPod qp = Listed(e->pod, static_cast<int32_t>(i + 1), now - e->first_seen_ms);
        if (AttainedOf(options->quotas, ns).enabled) qp.attained_level = e->level;
        EvalInputs in{ledger.get(), options.get(),
                      IsGang(e->pod) && reserved[n].contains(e->pod.gang), now};
        qp.reason = EvaluateUnits(us, i, e->pod, in, *snapshot, *fw, false).reason;
        nq.queue.push_back(std::move(qp));
      }
    }
    if (options->quotas.enabled || nq.pending_pods > 0 || !query.ns.empty()) {
      shown.push_back(std::move(nq));
    }
  }
  report.namespaces = std::move(shown);
  std::vector<FairShareClaim> claims;
  for (const NamespaceQueue& nq : report.namespaces) {
    claims.push_back(
        {nq.ns, nq.guaranteed_milli, nq.limit_milli, nq.usage_milli, nq.pending_milli, nq.weight});
  }
  report.capacity_milli = ledger->Capacity();
  report.guaranteed_milli = ledger->GuaranteedTotal();
  const auto shares = WeightedFairShares(claims, ledger->Capacity());
  for (NamespaceQueue& nq : report.namespaces) nq.fair_share_milli = shares.at(nq.ns);
  std::sort(report.reservations.begin(), report.reservations.end(),
            [](const auto& a, const auto& b) { return a.ns + a.gang < b.ns + b.gang; });
  return report;
}

std::vector<QueuedPod> QueueManager::Positions(int32_t explained) {
  std::vector<QueuedPod> out;
  std::vector<std::string> namespaces;
  absl::flat_hash_set<std::string> done;
  for (NamespaceQueue& nq : Report({"", explained}).namespaces) {
    if (nq.pending_pods == 0) continue;
    namespaces.push_back(nq.ns);
    for (QueuedPod& q : nq.queue) {
      done.insert(q.uid);
      out.push_back(std::move(q));
    }
  }
  const int64_t now = Now();
  for (const std::string& ns : namespaces) {
    TimedLock l(&mu_, &lock_stats_, deps_.metrics, "positions");
    std::vector<Unit> units = UnitsLocked(ns);
    for (size_t i = 0; i < units.size(); ++i) {
      for (const Entry* e : units[i].members) {
        if (done.contains(e->pod.uid)) continue;  // explained above
        QueuedPod qp = Listed(e->pod, static_cast<int32_t>(i + 1), now - e->first_seen_ms);
        qp.reason =
            StrCat("gpusched: namespace ", ns, ": ", i, " earlier units in the queue go first");
        out.push_back(std::move(qp));
      }
    }
  }
  return out;
}

std::optional<PodReport> QueueManager::ExplainPod(const std::string& ns, const std::string& name) {
  auto pod = deps_.state->FindPodByName(ns, name);
  if (!pod.has_value()) return std::nullopt;
  auto fw = deps_.framework();
  TimedLock l(&mu_, &lock_stats_, deps_.metrics, "explain");
  auto snapshot = deps_.state->Snapshot();
  SyncLocked(snapshot);
  PodReport r;
  r.ns = ns;
  r.name = name;
  r.uid = pod->uid;
  if (pod->HoldsGpus()) {
    r.state = pod->reservation ? "reservation" : "bound";
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
  if (pod->gang_size == kGangSizeUnknown) {
    r.reason = pod->UnknownGangSizeReason();  // never admitted, not queued
    return r;
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
    const PlanInputs live = LivePlanInputsLocked();
    for (const auto& node : snapshot->nodes()) {
      NodePlanRules rules;
      rules.quota_demand = ev.quota_demand;
      auto plan = PlanNode(live, *pod, *node, *snapshot, *fw, rules);
      if (!plan.has_value() || plan->victims.empty()) continue;
      PreemptionPreview p;
      p.node = node->name;
      // A victim gang's members on other nodes are named with their node.
      for (const std::string& uid : plan->AllUids()) {
        auto victim = deps_.state->FindPod(uid);
        std::string name = victim.has_value() ? victim->Key() : uid;
        if (victim.has_value() && victim->node_name != node->name) {
          StrAppend(&name, " (on ", victim->node_name, ")");
        }
        p.victims.push_back(std::move(name));
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
  // Copied under the mutex, rendered after (500 namespaces are thousands of
  // lines of text).
  struct Row {
    std::string ns;
    size_t pending = 0;
    int64_t usage = 0, guaranteed = 0, limit = 0, borrowed = 0;
  };
  std::vector<Row> rows;
  std::vector<std::pair<std::string, WaitHistogram>> waits;
  bool quotas = false;
  {
    TimedLock l(&mu_, &lock_stats_, deps_.metrics, "metrics");
    SyncLocked(deps_.state->Snapshot());
    const QuotaLedger& ledger = LedgerLocked();
    std::set<std::string> names;
    for (const std::string& ns : ledger.Namespaces()) names.insert(ns);
    for (const auto& [ns, q] : order_) names.insert(ns);
    for (const auto& [ns, h] : waits_) names.insert(ns);
    quotas = options_.quotas.enabled;
    rows.reserve(names.size());
    for (const std::string& ns : names) {
      Row r{ns};
      auto q = order_.find(ns);
      r.pending = q == order_.end() ? 0 : q->second.size();
      if (quotas) {
        r.usage = ledger.Usage(ns);
        r.guaranteed = ledger.Guaranteed(ns);
        r.limit = ledger.Limit(ns);
        r.borrowed = ledger.Borrowed(ns);
      }
      rows.push_back(std::move(r));
    }
    waits.assign(waits_.begin(), waits_.end());
  }
  for (const Row& r : rows) {
    const Labels labels = {{"namespace", r.ns}};
    w.Gauge("gpusched_queue_pending_pods", "Pending GPU pods in the namespace's queue.", labels,
            static_cast<double>(r.pending));
    if (quotas) {
      w.Gauge("gpusched_quota_usage_gpus", "GPUs held by the namespace.", labels, r.usage / 1000.0);
      w.Gauge("gpusched_quota_guaranteed_gpus", "GPUs guaranteed to the namespace.", labels,
              r.guaranteed / 1000.0);
      w.Gauge("gpusched_quota_limit_gpus", "Most GPUs the namespace may hold.", labels,
              r.limit / 1000.0);
      w.Gauge("gpusched_quota_borrowed_gpus", "GPUs held above the guarantee.", labels,
              r.borrowed / 1000.0);
    }
  }
  // Wait histogram (cumulative buckets, observed at bind), rendered at
  // scrape time as a Prometheus histogram; bounds as in NoteWaitLocked.
  static const std::vector<double> kBounds = {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  for (const auto& [ns, h] : waits) {
    w.Histogram("gpusched_queue_wait_seconds", "Time from first sight to bind.",
                {{"namespace", ns}}, kBounds, h.buckets, h.count, h.sum);
  }
  w.Gauge("gpusched_queue_lock_hold_max_seconds",
          "Longest single hold of the queue manager's mutex since start.", {},
          static_cast<double>(lock_stats_.max_ns.load()) / 1e9);
}

}  // namespace gpusched::queue
