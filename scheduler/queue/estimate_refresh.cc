// QueueManager: the estimate refresh (runtime estimates, the runtime
// history, estimated starts). Off the request path: the queue's mutex is
// held only to copy the planning view and the units of each namespace
// whose queue changed since the last refresh.
#include <algorithm>
#include <chrono>

#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/what_if.h"

namespace gpusched::queue {
namespace {

constexpr char kNotEstimated[] =
    "no estimate yet: queued after the last estimate refresh, or past the units of its "
    "namespace a refresh copies (QueueOptions::estimate_max_units)";

}  // namespace

std::shared_ptr<const QueueManager::EstimateBoard> QueueManager::Board() const {
  absl::MutexLock l(&est_mu_);
  return board_;
}

std::optional<QueueManager::PodEstimate> QueueManager::EstimateOf(const std::string& uid) const {
  auto board = Board();
  if (board == nullptr) return std::nullopt;
  auto s = board->starts.by_uid.find(uid);
  auto r = board->runtimes.find(uid);
  if (s == board->starts.by_uid.end() || r == board->runtimes.end()) return std::nullopt;
  return PodEstimate{r->second, s->second, board->starts.made_at_s};
}

void QueueManager::FillEstimates(std::vector<QueuedPod>* pods) const {
  auto board = Board();
  if (board == nullptr) return;
  for (QueuedPod& q : *pods) {
    auto s = board->starts.by_uid.find(q.uid);
    auto r = board->runtimes.find(q.uid);
    if (s == board->starts.by_uid.end() || r == board->runtimes.end()) {
      q.estimate_basis = kNotEstimated;
      continue;
    }
    q.estimated_start_unix = s->second.start_s;
    q.estimate_basis = s->second.basis;
    q.runtime_seconds = r->second.seconds;
    q.runtime_source = std::string(SourceName(r->second.source));
  }
}

void QueueManager::FillEstimate(const PodRequest& pod, PodReport* report) const {
  auto e = EstimateOf(report->uid);
  if (!e.has_value()) {
    report->estimate_basis = kNotEstimated;
    return;
  }
  const RuntimeEstimate runtime = DescribeRuntime(pod, e->runtime, e->made_at_s);
  report->estimated_start_unix = e->start.start_s;
  report->estimate_basis = e->start.basis;
  report->runtime_seconds = runtime.seconds;
  report->runtime_source = std::string(SourceName(runtime.source));
  report->runtime_detail = runtime.detail;
  report->runtime_rejected = runtime.rejected;
}

void QueueManager::AddWhatIfs(const PlanningView& view, const std::vector<Unit>& units,
                              const PodRequest& pod, const policy::Framework& fw, int64_t now_ms,
                              PodReport* report) const {
  WhatIfInputs in{&pod, view.snapshot.get(), &fw, view.ledger.get()};
  for (size_t i = 0; i + 1 < units.size(); ++i) {
    const int32_t p = units[i].head->pod->priority;
    in.earlier_max_priority = in.earlier_units++ == 0 ? p : std::max(in.earlier_max_priority, p);
  }
  auto board = Board();
  if (board != nullptr) in.running_end = &board->starts.running_end;
  in.now_s = now_ms / 1000;
  report->what_if = WhatIfs(in);
}

std::vector<PersistedWorkload> QueueManager::HistoryToPersist(uint64_t* version) const {
  absl::MutexLock r(&refresh_mu_);
  *version = history_.version();
  return history_.Workloads();
}

void QueueManager::LoadHistory(const std::vector<PersistedWorkload>& saved) {
  absl::MutexLock r(&refresh_mu_);
  observer_.Load(saved, &history_);
}

void QueueManager::UpdateHistoryLocked(const PlanningView& view, int64_t now_s) {
  if (!history_seeded_) {
    // A restarted scheduler learns from the finished pods the API still has.
    observer_.Seed(deps_.state->PodsWhere(&RunObserver::Finished), &history_);
    history_seeded_ = true;
  }
  // A pod that left its node ended its run if it Succeeded, or if it is
  // gone and gpusched did not evict it (the simulator deletes completed
  // pods); a Failed pod's run is not a runtime.
  auto end_of = [&](const std::string& uid, int64_t now) -> std::optional<int64_t> {
    auto pod = deps_.state->FindPod(uid);
    if (!pod.has_value()) {
      if (view.evicted.contains(uid)) return std::nullopt;
      return now;
    }
    if (pod->phase != PodPhase::kSucceeded) return std::nullopt;
    return pod->finish_unix > 0 ? pod->finish_unix : now;
  };
  observer_.Observe(view.snapshot, now_s, end_of, &history_);
}

int64_t QueueManager::RunningRuntimeLocked(const PodOnNode& p, const EstimateBoard* previous,
                                           int64_t now_s) {
  const RuntimeFacts* waited = nullptr;  // started since: the estimate it waited with
  if (previous != nullptr) {
    auto w = previous->runtimes.find(p.uid);
    if (w != previous->runtimes.end()) waited = &w->second;
  }
  int64_t seconds = 0;
  if (auto it = runtime_of_.find(p.uid); it != runtime_of_.end()) {
    seconds = it->second;
  } else if (waited != nullptr) {
    seconds = waited->seconds;
  } else if (auto pod = deps_.state->FindPod(p.uid)) {
    // Not seen waiting (a restart): as it would have been at its start.
    const int64_t at = p.start_unix > 0 ? std::min(p.start_unix, now_s) : now_s;
    seconds = EstimateRuntime(*pod, history_, at).seconds;
  }
  runtime_seen_[p.uid] = seconds;
  return seconds;
}

QueueManager::CopiedQueue QueueManager::CopyUnits(const std::string& ns, size_t max_units) {
  CopiedQueue copy{0, max_units, {}};
  UnitCursor cursor;
  for (bool first = true; !cursor.done && copy.units.size() < max_units; first = false) {
    StateHold l(this, "estimate-copy", BackgroundUse());
    // A change after the first hold moves changed_at_ past copied_at: the
    // next refresh copies the namespace again.
    if (first) copy.copied_at = queue_version_;
    const size_t want = std::min(kUnitsPerHold, max_units - copy.units.size());
    for (const Unit& u : NextUnitsLocked(ns, &cursor, want)) {
      EstimateUnit eu;
      eu.members.reserve(u.members.size());
      for (const Entry* e : u.members) eu.members.push_back(e->pod);
      copy.units.push_back(std::move(eu));
    }
  }
  return copy;
}

std::vector<EstimateQueue> QueueManager::EstimateQueuesLocked(const CopyPlan& plan,
                                                              EstimateBoard* board, int64_t now_s) {
  std::vector<EstimateQueue> queues;
  absl::flat_hash_map<std::string, CopiedQueue> copies;
  int64_t reused = 0;
  for (const QueueStamp& stamp : plan.queues) {
    auto last = copies_.find(stamp.ns);
    const bool unchanged = plan.reuse && last != copies_.end() &&
                           last->second.max_units == plan.max_units &&
                           stamp.changed_at <= last->second.copied_at;
    CopiedQueue& copy = copies[stamp.ns] =
        unchanged ? std::move(last->second) : CopyUnits(stamp.ns, plan.max_units);
    reused += unchanged ? 1 : 0;
    EstimateQueue q{stamp.ns, copy.units};
    for (EstimateUnit& eu : q.units) {
      eu.runtime = EstimateRuntime(*eu.members.front(), history_, now_s);
      const RuntimeFacts facts = FactsOf(eu.runtime);
      for (const auto& m : eu.members) board->runtimes[m->uid] = facts;
    }
    if (!q.units.empty()) queues.push_back(std::move(q));
  }
  copies_ = std::move(copies);
  if (deps_.metrics != nullptr) {
    constexpr char kHelp[] =
        "Namespaces' queues an estimate refresh copied under the queue mutex, or reused from "
        "the last refresh (unchanged since)";
    const int64_t copied = static_cast<int64_t>(plan.queues.size()) - reused;
    deps_.metrics->Inc("gpusched_estimate_queue_copies_total", kHelp, {{"copy", "copied"}}, copied);
    deps_.metrics->Inc("gpusched_estimate_queue_copies_total", kHelp, {{"copy", "reused"}}, reused);
  }
  return queues;
}

void QueueManager::RefreshEstimates(std::chrono::milliseconds budget) {
  RefreshEstimates(budget,
                   [](absl::FunctionRef<void(YieldPoint*)> simulate) { simulate(nullptr); });
}

void QueueManager::RefreshEstimates(std::chrono::milliseconds budget, SimulationRunner run) {
  absl::MutexLock r(&refresh_mu_);
  const auto started = std::chrono::steady_clock::now();
  auto fw = deps_.framework();
  std::shared_ptr<const PlanningView> view;
  CopyPlan plan;
  int64_t now_ms = 0;
  {
    StateHold l(this, "estimate-view", BackgroundUse());
    SyncLocked(deps_.state->Snapshot());
    view = PlanningViewLocked();
    now_ms = Now();
    plan.queues.reserve(order_.size());
    for (const auto& [ns, q] : order_) {
      auto c = changed_at_.find(ns);  // always there: QueueChangedLocked
      plan.queues.push_back({ns, c != changed_at_.end() ? c->second : queue_version_ + 1});
    }
    plan.max_units = options_.estimate_max_units;
    plan.reuse = !options_.recompute_from_scratch;
  }
  const int64_t now_s = now_ms / 1000;
  UpdateHistoryLocked(*view, now_s);
  auto board = std::make_shared<EstimateBoard>();
  const std::shared_ptr<const EstimateBoard> previous = Board();
  runtime_seen_.clear();
  StartEstimatorInput in;
  in.queues = EstimateQueuesLocked(plan, board.get(), now_s);
  in.snapshot = view->snapshot.get();
  in.fw = fw.get();
  in.ledger = view->ledger.get();
  in.running_seconds = [this, &previous, now_s](const PodOnNode& p) {
    refresh_mu_.AssertHeld();
    return RunningRuntimeLocked(p, previous.get(), now_s);
  };
  in.now_s = now_s;
  in.default_runtime_s = view->options->default_runtime_s;
  in.horizon_s = view->options->estimate_horizon_s;
  in.min_step_s = view->options->estimate_min_step_s;
  in.step_share = view->options->estimate_step_share;
  in.deadline = started + budget;
  in.reclaim = view->options->reclaim.enabled;
  in.reclaim_lower_priority_only = view->options->reclaim.only_lower_priority;
  in.preempt = true;  // kube-scheduler preempts for any pod the queue admits
  run([&in, &board](YieldPoint* yield) {
    in.yield = yield;
    board->starts = EstimateStarts(in);
  });
  runtime_of_ = std::move(runtime_seen_);
  runtime_seen_ = {};
  int64_t overruns = 0;
  {
    StateHold l(this, "estimate-publish", BackgroundUse());
    admit_board_ = board;
    overruns = CountOverrunsLocked(now_s);
  }
  backfill_overruns_ += overruns;
  if (deps_.metrics != nullptr) {
    deps_.metrics->Inc("gpusched_backfill_overruns_total",
                       "Units Backfill let pass earlier ones that ran past the end their "
                       "runtime estimate promised (never evicted for it).",
                       {}, overruns);
  }
  absl::MutexLock l(&est_mu_);
  board_ = std::move(board);
}

}  // namespace gpusched::queue
