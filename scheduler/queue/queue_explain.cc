// QueueManager: what the debug endpoints and /metrics show. The queue report
// copies what it lists under the mutex and explains it without the mutex.
#include <algorithm>
#include <deque>
#include <set>

#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/domain_placement.h"
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

bool QueueManager::CopyNamespaceLocked(const std::string& ns, size_t limit, size_t* budget,
                                       NamespaceCopy* nc) {
  if (!nc->started) {
    nc->started = true;
    nc->row.ns = ns;
    auto q = order_.find(ns);
    nc->row.pending_pods = q == order_.end() ? 0 : static_cast<int64_t>(q->second.size());
    auto pm = pending_milli_.find(ns);
    nc->row.pending_milli = pm == pending_milli_.end() ? 0 : pm->second;
    nc->view = PlanningViewLocked();
  }
  while (nc->listed < limit && !nc->cursor.done) {
    if (*budget == 0) return false;
    const size_t want = std::min({kUnitsPerHold, limit - nc->listed, *budget});
    for (const Unit& u : NextUnitsLocked(ns, &nc->cursor, want)) {
      if (nc->listed >= limit) break;
      nc->copies.Add(u);
      nc->listed += u.members.size();
      *budget -= std::min(*budget, u.members.size());
      if (IsGang(*u.head->pod) && reservations_.contains(GangKey(ns, u.head->pod->gang))) {
        nc->reserved.insert(u.head->pod->gang);
      }
    }
  }
  return true;
}

std::vector<std::string> QueueManager::ReportNamesLocked(const ReportQuery& query,
                                                         const PlanningView& view) {
  if (!query.ns.empty()) return {query.ns};
  std::set<std::string> names;
  for (const std::string& ns : view.ledger->Namespaces()) names.insert(ns);
  for (const auto& [ns, q] : order_) names.insert(ns);
  return {names.begin(), names.end()};
}

std::vector<GangReservationReport> QueueManager::ReservationReportsLocked(const std::string& ns,
                                                                          int64_t now) {
  std::vector<GangReservationReport> out;
  for (const auto& [key, r] : reservations_) {
    if (!ns.empty() && r.ns != ns) continue;
    GangReservationReport g;
    g.ns = r.ns;
    g.gang = r.gang;
    g.slots = static_cast<int32_t>(r.slots.size());
    g.expires_in_seconds = static_cast<double>(r.deadline_ms - now) / 1000.0;
    for (const Slot& s : r.slots) {
      g.bound += s.bound ? 1 : 0;
      g.nodes.emplace_back(s.node, FormatMask(s.devices));
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.ns + a.gang < b.ns + b.gang; });
  return out;
}

void QueueManager::ExplainNamespace(const PlanningView& view, const UnitCopies& copies,
                                    const std::set<std::string>& reserved, int64_t now,
                                    const policy::Framework& fw, NamespaceQueue* nq) {
  const QuotaLedger& ledger = *view.ledger;
  const std::string& ns = nq->ns;
  nq->cohort = ledger.Quota(ns).cohort;
  nq->guaranteed_milli = ledger.Guaranteed(ns);
  nq->limit_milli = ledger.Limit(ns);
  nq->usage_milli = ledger.Usage(ns);
  nq->borrowed_milli = ledger.Borrowed(ns);
  nq->lendable_milli = ledger.Lendable(ns);
  nq->cohort_lendable_milli = ledger.CohortLendable(ns);
  nq->weight = ledger.Quota(ns).weight;
  for (const auto& [model, amount] : ledger.Quota(ns).models) {
    nq->models.push_back(
        {model, amount.guaranteed * 1000, amount.limit * 1000, ledger.ModelUsage(ns, model)});
  }
  const bool attained = AttainedOf(view.options->quotas, ns).enabled;
  const std::vector<Unit>& us = copies.units;
  for (size_t i = 0; i < us.size(); ++i) {
    for (const Entry* e : us[i].members) {
      QueuedPod qp = Listed(*e->pod, static_cast<int32_t>(i + 1), now - e->first_seen_ms);
      if (attained) qp.attained_level = e->level;
      EvalInputs in{&ledger, view.options.get(), IsGang(*e->pod) && reserved.contains(e->pod->gang),
                    now};
      qp.reason = EvaluateUnits(us, i, *e->pod, in, *view.snapshot, fw, false).reason;
      nq->queue.push_back(std::move(qp));
    }
  }
}

QueueReport QueueManager::Report(const ReportQuery& query) {
  auto fw = deps_.framework();
  QueueReport report;
  // Copied under the mutex, at most kEntriesPerHold entries per hold: the
  // listed units (entries owned), each namespace with the view as its copy
  // started.
  std::deque<NamespaceCopy> copies;
  std::vector<std::string> names;
  std::shared_ptr<const PlanningView> view;
  int64_t now = 0;
  const size_t limit = static_cast<size_t>(std::max(0, query.limit));
  size_t n = 0;
  do {
    StateHold l(this, "report", BackgroundUse());
    SyncLocked(deps_.state->Snapshot());
    if (view == nullptr) {
      now = Now();
      view = PlanningViewLocked();
      report.quotas_enabled = options_.quotas.enabled;
      report.quota_source = options_.quota_source;
      names = ReportNamesLocked(query, *view);
      copies.resize(names.size());
      report.reservations = ReservationReportsLocked(query.ns, now);
    }
    size_t budget = kEntriesPerHold;
    while (n < names.size() && CopyNamespaceLocked(names[n], limit, &budget, &copies[n])) ++n;
  } while (n < names.size());
  // Explained from the copies, without the mutex.
  for (NamespaceCopy& c : copies) {
    NamespaceQueue& nq = c.row;
    ExplainNamespace(*c.view, c.copies, c.reserved, now, *fw, &nq);
    if (view->options->quotas.enabled || nq.pending_pods > 0 || !query.ns.empty()) {
      report.namespaces.push_back(std::move(nq));
    }
  }
  std::vector<FairShareClaim> claims;
  for (const NamespaceQueue& nq : report.namespaces) {
    claims.push_back(
        {nq.ns, nq.guaranteed_milli, nq.limit_milli, nq.usage_milli, nq.pending_milli, nq.weight});
  }
  report.capacity_milli = view->ledger->Capacity();
  report.guaranteed_milli = view->ledger->GuaranteedTotal();
  const auto shares = WeightedFairShares(claims, view->ledger->Capacity());
  for (NamespaceQueue& nq : report.namespaces) {
    nq.fair_share_milli = shares.at(nq.ns);
    FillEstimates(&nq.queue);
  }
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
  // Per namespace, its pods not explained above, kUnitsPerHold units per
  // hold of the mutex: pointer copies under it, the listing after it.
  struct Listing {
    std::shared_ptr<const PodRequest> pod;
    int64_t first_seen_ms = 0;
    size_t unit = 0;  // 0-based position of its unit
  };
  std::vector<Listing> listed;
  for (const std::string& ns : namespaces) {
    UnitCursor cursor;
    size_t unit = 0;
    while (!cursor.done) {
      listed.clear();
      {
        StateHold l(this, "positions", BackgroundUse());
        for (const Unit& u : NextUnitsLocked(ns, &cursor, kUnitsPerHold)) {
          for (const Entry* e : u.members) {
            if (!done.contains(e->pod->uid)) listed.push_back({e->pod, e->first_seen_ms, unit});
          }
          ++unit;
        }
      }
      for (const Listing& x : listed) {
        QueuedPod qp = Listed(*x.pod, static_cast<int32_t>(x.unit + 1), now - x.first_seen_ms);
        qp.reason = StrCat("gpusched: namespace ", ns, ": ", x.unit,
                           " earlier units in the queue go first");
        out.push_back(std::move(qp));
      }
    }
  }
  FillEstimates(&out);  // the explained ones again: cheap, and one board for all
  return out;
}

void QueueManager::UnitCopies::Add(const Unit& unit) {
  Unit c{nullptr, {}, unit.demand};
  for (const Entry* e : unit.members) {
    entries.push_back(*e);
    c.members.push_back(&entries.back());
    if (e == unit.head) c.head = &entries.back();
  }
  units.push_back(std::move(c));
}

namespace {

// How many nodes `pod` fits on now, and the first node's reason otherwise.
// How many nodes the pod fits on now and, when none, why: each distinct
// refusal with how many nodes gave it and one of them, the most common
// first (at most three, then how many other reasons there were).
std::pair<int, std::string> Fits(const PodRequest& pod, const ClusterSnapshot& snapshot,
                                 const policy::Framework& fw) {
  policy::PodContext ctx = fw.Prepare(pod, snapshot);
  int fits = 0;
  struct Refusal {
    int nodes = 0;
    std::string example;
  };
  absl::flat_hash_map<std::string, Refusal> refusals;
  for (const auto& node : snapshot.nodes()) {
    policy::FilterResult f = fw.Filter(ctx, *node);
    if (f.fits() && policy::FitsWithDevices(fw, ctx, *node)) {
      ++fits;
      continue;
    }
    Refusal& r = refusals[f.fits() ? "no set of free devices fits it" : f.reason];
    if (r.nodes++ == 0) r.example = node->name;
  }
  std::vector<std::pair<std::string, Refusal>> order(refusals.begin(), refusals.end());
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second.nodes != b.second.nodes ? a.second.nodes > b.second.nodes : a.first < b.first;
  });
  std::string why;
  for (size_t i = 0; i < order.size() && i < 3; ++i) {
    const auto& [reason, r] = order[i];
    StrAppend(&why, i > 0 ? "; " : "", r.nodes, r.nodes == 1 ? " node (" : " nodes (e.g. ",
              r.example, "): ", reason);
  }
  if (order.size() > 3) {
    StrAppend(&why, "; ", order.size() - 3, order.size() == 4 ? " other reason" : " other reasons");
  }
  return {fits, why};
}

// The state of a pod that does not wait in a queue, or nullopt.
std::optional<std::string> NotQueued(const PodRequest& pod, PodReport* r) {
  if (pod.HoldsGpus()) {
    r->node = pod.node_name;
    return pod.reservation ? "reservation" : "bound";
  }
  if (pod.phase == PodPhase::kSucceeded || pod.phase == PodPhase::kFailed) return "finished";
  if (pod.gpu.count == 0) {
    r->reason = "pod requests no GPU: gpusched does not queue it";
    return "pending";
  }
  if (pod.gang_size == kGangSizeUnknown) {
    r->reason = pod.UnknownGangSizeReason();  // never admitted, not queued
    return "pending";
  }
  return std::nullopt;
}

}  // namespace

std::optional<PodReport> QueueManager::ExplainPod(const std::string& ns, const std::string& name) {
  auto pod = deps_.state->FindPodByName(ns, name);
  if (!pod.has_value()) return std::nullopt;
  PodReport r;
  r.ns = ns;
  r.name = name;
  r.uid = pod->uid;
  if (auto state = NotQueued(*pod, &r)) {
    r.state = *state;
    return r;
  }
  r.state = "pending";
  auto fw = deps_.framework();
  // Copied under the mutex: its namespace's units up to it and the view.
  UnitCopies copies;
  std::shared_ptr<const PlanningView> view;
  std::shared_ptr<const EstimateBoard> board;  // Backfill's, as Admit reads it
  EvalInputs in;
  {
    StateHold l(this, "explain", BackgroundUse());
    SyncLocked(deps_.state->Snapshot());
    if (const Entry* e = FindEntryLocked(pod->uid); e != nullptr) {
      *pod = *e->pod;  // the source's pod where it waits
      for (const Unit& u : UnitsLocked(ns, pod->uid)) copies.Add(u);
      in.gang_reserved = IsGang(*pod) && reservations_.contains(GangKey(ns, pod->gang));
    }
    view = PlanningViewLocked();
    in.now_ms = Now();
    board = admit_board_;
  }
  in.board = board.get();
  in.ledger = view->ledger.get();
  in.options = view->options.get();
  const ClusterSnapshot& snapshot = *view->snapshot;
  Evaluation ev;
  if (!copies.units.empty()) {
    ev = EvaluateUnits(copies.units, copies.units.size() - 1, *pod, in, snapshot, *fw,
                       /*all_checks=*/true);
    ExplainCohortHolds(*pod, copies.units, in, snapshot, *fw, &ev);
  }
  r.position = ev.position;
  r.reason = ev.reason;
  if (r.reason.empty() && IsGang(*pod) && !in.gang_reserved) {
    r.reason =
        TopologyWaitReason(snapshot, *fw, *pod, pod->gang_size - view->gangs->Held(ns, pod->gang),
                           in.options->gang.topology_levels);
  }
  FillEstimate(*pod, &r);
  AddWhatIfs(*view, copies.units, *pod, *fw, in.now_ms, &r);
  const auto [fits, no_room] = Fits(*pod, snapshot, *fw);
  if (r.reason.empty()) {
    r.reason = fits > 0
                   ? StrCat("admissible now; fits on ", fits, fits == 1 ? " node" : " nodes")
                   : StrCat("admissible by quota and queue order, but no node has room: ", no_room);
  }
  if (fits == 0 && !pod->preempt_never && !ev.behind_earlier) {
    r.preemption = PreviewPreemption(*view, *pod, ev.quota_demand, *fw);
  }
  return r;
}

std::vector<PreemptionPreview> QueueManager::PreviewPreemption(const PlanningView& view,
                                                               const PodRequest& pod,
                                                               int64_t quota_demand,
                                                               const policy::Framework& fw) const {
  std::vector<PreemptionPreview> out;
  const PlanInputs in = view.Inputs();
  for (const auto& node : view.snapshot->nodes()) {
    NodePlanRules rules;
    rules.quota_demand = quota_demand;
    auto plan = PlanNode(in, pod, *node, *view.snapshot, fw, rules);
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
    out.push_back(std::move(p));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.victims.size() < b.victims.size();
  });
  if (out.size() > 3) out.resize(3);
  return out;
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
    StateHold l(this, "metrics", BackgroundUse());
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
