// QueueManager: the PodGate of gpusched. It keeps one queue of pending GPU
// pods per namespace (spec.priority descending, then creation time, then
// name), admits pods against namespace and per-model GPU quotas with cohort
// borrowing (QuotaLedger), reserves devices for whole gangs before any member
// passes filter, plans preemption victims for the preempt verb, and on each
// Tick expires gang reservations, reclaims borrowed GPUs for namespaces below
// their guarantee and (if configured) evicts above a lowered limit.
//
// Strict priority with safe backfill (docs/queue.md): pod P of namespace n
// is admitted only if
//  (1) quota in queue order: usage(n) + demand of every earlier pending unit
//      of n that could ever fit its limit + demand(P) is admissible; and
//  (2) no earlier pending unit H of n could use a node P could use (for
//      every node, H's or P's filter verdict is unresolvable there).
// So a later pod can never take quota or GPUs an earlier pod waits for.
// That is the StrictFIFO queueing strategy, the default; a namespace whose
// quota says BestEffortFIFO checks neither earlier units' demand in (1) nor
// (2): a pod that cannot start now holds nobody back (Kueue's meaning).
// Earlier pods not seen in a filter call for `stale_after_ms` do not block
// (kube-scheduler retries every pending pod well within that time).
//
// Trust: the queue holds only pods the cluster source (API watch or file)
// shows, read from ClusterState by UID; a filter request names a pod but
// never adds it. A pod the source has not shown yet is answered as if it
// were queued at its place (placement only): it is never stored, holds no
// one back and gets no gang reservation.
//
// Incremental state (docs/architecture.md): the pending index follows
// ClusterState's pod change feed (TakePodChanges), the ordered queue per
// namespace is a std::set kept sorted, usage and gang counts follow the
// snapshot's changed nodes (UsageIndex). Nothing a request reads is rebuilt
// per request.
//
// Plans are made without the mutex, on a PlanningView: an immutable copy of
// what planning reads (the cluster snapshot the usage is synced to, the
// options, the ledger with its claims, the pods being evicted, the usage),
// published once per change of those and shared by every planner made on
// the same state. The preempt verb (per candidate node, or a gang's whole
// plan), the tick's reclaim batch, a gang's reservation and the debug pages
// (ExplainPod, Report) read one; the mutex is taken again only to record a
// result, by one commit rule (PlanCurrentLocked, plan_commit.cc). Admit decides
// quota in queue order under the mutex (O(1) in the queue's depth: the
// UnitIndex's prefix sums) and runs rule (2)'s node scan on copies of the
// earlier heads after unlocking; a repeated ask for a queued single pod is
// answered the same way on the admission snapshot that the last locked
// admission published, without the mutex (admit_snapshot.h).
//
// Thread-safe. Locks, in the order they may be taken (a lock is never taken
// while one after it is held):
//   0. QueueConfigApplier's lock (queue_wiring.h): held across SetOptions.
//   1. mu_: everything the queue decides from. Held O(changed pods + a
//      namespace's units: a dropped UnitIndex) at most; background walks over a
//      queue copy it in bounded holds (kUnitsPerHold units, kEntriesPerHold
//      entries); never held across a walk over every node nor while sending
//      an eviction.
//   2. ClusterState's and Metrics' own locks (leaves, taken under mu_).
// plan_mu_ (the background planner's hand-over) is never held together with
// mu_: Tick takes it before and after its holds of mu_, never inside one.
// Callers: ExtenderService (filter, bind, preempt), the periodic tick and
// the reclaim planner thread, the debug routes, the metrics collector. The
// hold time of mu_ and the tick's duration are exported as histograms.
#ifndef GPUSCHED_QUEUE_QUEUE_MANAGER_H_
#define GPUSCHED_QUEUE_QUEUE_MANAGER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/config.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/model/topology_domains.h"
#include "gpusched/policy/framework.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/metrics.h"
#include "scheduler/queue/admit_snapshot.h"
#include "scheduler/queue/attained_service.h"
#include "scheduler/queue/queue_report.h"
#include "scheduler/queue/quota_coverage.h"
#include "scheduler/queue/quota_ledger.h"
#include "scheduler/queue/run_observer.h"
#include "scheduler/queue/runtime_estimates.h"
#include "scheduler/queue/start_estimator.h"
#include "scheduler/queue/timed_lock.h"
#include "scheduler/queue/usage_index.h"
#include "scheduler/queue/yield_point.h"

namespace gpusched::queue {

// The namespaces above their guarantee, per cohort (preempt_reclaim.cc).
struct Borrowers;

// An attained-service preemption's victims (docs/queue.md, "Attained
// service"): the pods on nodes of namespace `ns` whose workload (as
// PodOnNode::workload) is one of `workloads`, none above `max_priority`.
// Chosen by workload under the queue mutex, matched per pod by the
// planners without it (so the choice copies no pod uid).
struct DemotedWorkloads {
  std::string ns;
  absl::flat_hash_set<std::string> workloads;
  int32_t max_priority = 0;
  bool empty() const { return workloads.empty(); }
  bool Contains(const PodOnNode& p) const {
    return p.priority <= max_priority && p.ns == ns && workloads.contains(p.workload);
  }
};

struct QueueOptions {
  QuotaConfig quotas;
  // Where `quotas` came from, as /debug/queues states it ("policy file
  // <path>", "GPUQuota objects"); informational only.
  std::string quota_source;
  ReclaimConfig reclaim;
  GangConfig gang;
  // Pending pods not filtered for this long stop blocking later pods.
  int64_t stale_after_ms = 10 * 60 * 1000;
  // A pod gpusched evicted is not planned as a victim again for at least
  // this long, and while it still exists (terminating, it holds its GPUs)
  // up to stale_after_ms; a namespace does not reclaim again while its last
  // victims terminate (up to stale_after_ms).
  int64_t reclaim_cooldown_ms = 30 * 1000;
  // Reclaim plans computed per tick at most (namespaces taken round-robin):
  // bounds the tick's work however many namespaces wait below guarantee.
  int32_t reclaim_plans_per_tick = 16;
  // Wall-clock time a tick may spend planning reclaim (0: no limit); the
  // namespaces not reached are planned first by the next tick. Serving sets
  // it (ServingQueueOptions); the simulator and tests leave it 0, so their
  // decisions do not depend on the machine's speed.
  int32_t reclaim_plan_budget_ms = 0;
  // Wall-clock time one hold of the mutex may spend choosing the tick's
  // reclaim jobs (ChooseReclaimsLocked; 0: no limit beyond
  // kNamespacesPerHold namespaces); at least one namespace is looked at per
  // hold. Bounds the hold where a namespace's check walks many running
  // workloads (attained service). Serving sets it; the choice itself does
  // not depend on where the holds end.
  int32_t reclaim_choice_hold_us = 0;
  // Background work (the tick, estimate refreshes, debug pages, reloads)
  // yields the CPU before each hold of the mutex, so the hold starts on a
  // fresh time slice (TimedLock, LockUse::kBackgroundYield). Serving sets
  // it; the simulator and tests leave it off (a yield there only slows a
  // replay down on a busy machine).
  bool yield_before_background_holds = false;
  // A victim gang with members on other nodes than the one the preempt verb
  // answered for: once one of its members there is going (deleted or
  // terminating) within this long, gpusched evicts the others.
  int64_t gang_followup_ms = 60 * 1000;
  // A gang preemptor's plan (every missing member's node and victims) is
  // kept this long, and while its victims terminate, so that each member's
  // preempt call answers from the same plan.
  int64_t gang_plan_ms = 30 * 1000;
  // A workload's attained service (AttainedService) is forgotten this long
  // after its last pod left a node.
  int64_t attained_forget_after_s = 24 * 3600;
  // Estimated starts (RefreshEstimates): the runtime assumed for a pod with
  // no estimate, and how far ahead the simulation looks.
  int64_t default_runtime_s = 3600;
  int64_t estimate_horizon_s = int64_t{7} * 24 * 3600;
  // The simulation's resolution (StartEstimatorInput::min_step_s, step_share).
  // Units of one namespace an estimate refresh copies (and estimates) at
  // most, QueueManager::kUnitsPerHold per hold of the mutex.
  size_t estimate_max_units = 5000;
  int64_t estimate_min_step_s = 60;
  double estimate_step_share = 0.01;
  // Backfill: a later unit passes earlier ones if now + its runtime
  // estimate + max(backfill_margin_s, a tenth of the estimate) is before
  // each earlier unit's estimated start, from an estimate refresh at most
  // backfill_max_age_s old.
  int64_t backfill_margin_s = 60;
  int64_t backfill_max_age_s = 60;
  // Tests only (the differential test's reference): rebuild the pending
  // index and the usage sums from scratch before every decision.
  bool recompute_from_scratch = false;
};

struct QueueDeps {
  ClusterState* state = nullptr;
  ClusterWriter* writer = nullptr;  // evictions (reclaim, over-limit); may be null
  std::function<std::shared_ptr<const policy::Framework>()> framework;
  std::function<int64_t()> now_ms;  // wall clock if unset
  Metrics* metrics = nullptr;       // may be null
  // Where the queue's log lines go (reservations, evictions); stderr if
  // unset. The simulator drops them (virtual time).
  std::function<void(const std::string&)> log;
  // Tests only: runs between a gang placement found without the mutex and
  // its commit, with the (node, devices) it picked (to change the cluster
  // meanwhile).
  std::function<void(const std::vector<std::pair<std::string, DeviceMask>>&)>
      after_unlocked_placement;
  // Benchmarks only: false places a gang's missing members on every filter,
  // even when the same placement fell short on the same view
  // (QueueManager::FailedPlacement).
  bool reuse_failed_placements = true;
};

// A pod chosen for eviction: enough to evict it and to take it out of a
// QuotaLedger (the product of its node, its milli-GPUs).
struct Victim {
  std::string uid;
  std::string ns;
  std::string node;
  std::string product;
  int64_t milli = 0;
  int32_t priority = 0;
};

struct NodeRooms;  // domain_placement.h

class QueueManager final : public PodGate {
 public:
  // Tests only: reaches the commit rule (test/queue/commit_rule_test.cc).
  friend class CommitRuleProbe;
  // Tests only: reaches the background holds' steps (background_holds_test.cc).
  friend class BackgroundHoldsProbe;
  // Tests only: reaches the reclaim choice's holds (reclaim_choice_test.cc).
  friend class ReclaimChoiceProbe;
  // Tests only: reaches the failed-placement key (failed_placement_test.cc).
  friend class FailedPlacementProbe;

  QueueManager(QueueDeps deps, QueueOptions options);

  // Hot reload: takes effect for the next decision. Never evicts by itself
  // (Tick does, only with reclaim.evict_over_limit).
  void SetOptions(QueueOptions options) ABSL_LOCKS_EXCLUDED(mu_);

  // PodGate.
  Admission Admit(const PodRequest& pod, const std::shared_ptr<const ClusterSnapshot>& snapshot,
                  const policy::Framework& framework) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnBound(const PodRequest& pod) override ABSL_LOCKS_EXCLUDED(mu_);
  std::string ReservedNode(const PodRequest& pod) override ABSL_LOCKS_EXCLUDED(mu_);
  std::string AssumeForBind(ClusterState& state, const PodRequest& pod, std::string_view node,
                            DeviceMask* devices) override ABSL_LOCKS_EXCLUDED(mu_);
  PreemptionOutcome Preempt(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                            const policy::Framework& framework) override ABSL_LOCKS_EXCLUDED(mu_);

  // Periodic work: drops queue entries of pods that are gone or bound,
  // releases expired gang reservations, reclaims, evicts over limit.
  // Returns the number of evictions requested.
  int Tick() ABSL_LOCKS_EXCLUDED(mu_);
  // Background reclaim planning (serving: ReclaimPlannerThread). While a
  // planner is attached, Tick does not plan: it hands the namespaces it
  // chose (with copies of what planning reads) to PlanReclaims and commits
  // the plans that came back since the last tick, re-checked as any plan
  // made on an older snapshot is. Without one, Tick plans itself (the
  // simulator and tests: decisions independent of thread timing).
  void AttachPlanner(bool attached) ABSL_LOCKS_EXCLUDED(plan_mu_);
  // Waits up to `wait` for work handed over by Tick, plans it without the
  // mutex and leaves the result for the next Tick. False if there was none.
  bool PlanReclaims(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_, plan_mu_);
  // Rebuilds the queue from ClusterState's pending pods (start, relist).
  void Resync() ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the source's pod changes and newest snapshot, and publishes the
  // admission snapshot: one background hold (SourceSyncThread calls it as
  // the source's changes come, so the filter after them need not).
  void SyncWithCluster() ABSL_LOCKS_EXCLUDED(mu_);

  // The queues for GET /debug/queues: copied under the mutex (at most
  // query.limit pods per namespace) in holds of at most kEntriesPerHold
  // entries, explained without it.
  QueueReport Report(const ReportQuery& query = {}) ABSL_LOCKS_EXCLUDED(mu_);
  // Why one pod waits, its position and a preemption preview: what it reads
  // is copied under the mutex (its namespace's units up to it, the planning
  // view), the evaluation and the walk over every node run without it.
  std::optional<PodReport> ExplainPod(const std::string& ns, const std::string& name)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every pending pod with its position; the first `explained` of each
  // namespace with the reason it waits (Report), the others with a reason
  // that only counts the pods ahead. The mutex is taken per kUnitsPerHold
  // units of a namespace (pointer copies), the listing made without it.
  std::vector<QueuedPod> Positions(int32_t explained) ABSL_LOCKS_EXCLUDED(mu_);
  // Gauges for /metrics (quota usage, pending pods, wait histogram).
  void CollectMetrics(GaugeWriter& w) ABSL_LOCKS_EXCLUDED(mu_);

  // Runtime estimates and estimated starts (estimate_refresh.cc), never on a
  // request's path: copies the planning view and each namespace's units
  // under the mutex (kUnitsPerHold units per hold), then, without it, brings the
  // runtime history up to date (RunObserver) and simulates the queue
  // (EstimateStarts) within `budget` of wall-clock time, and publishes the
  // result. Callers: EstimateThread (serving), the simulator, tests.
  void RefreshEstimates(std::chrono::milliseconds budget = std::chrono::milliseconds{1000})
      ABSL_LOCKS_EXCLUDED(mu_, refresh_mu_, est_mu_);
  // Where a refresh runs its simulation: `run(simulate)` calls `simulate`
  // once, on any thread, with that thread's YieldPoint or null, and returns
  // when it has. The one above runs it in place.
  using SimulationRunner = absl::FunctionRef<void(absl::FunctionRef<void(YieldPoint*)> simulate)>;
  void RefreshEstimates(std::chrono::milliseconds budget, SimulationRunner run)
      ABSL_LOCKS_EXCLUDED(mu_, refresh_mu_, est_mu_);
  struct PodEstimate {
    RuntimeFacts runtime;  // DescribeRuntime renders it for the pod
    StartEstimate start;
    int64_t made_at_s = 0;
  };
  // Units Backfill let pass that ran past their promised end, so far.
  int64_t backfill_overruns() const { return backfill_overruns_.load(); }
  // True while pod `uid`, admitted by Backfill ahead of earlier units, is
  // still tracked for an overrun (from its admission until the refresh that
  // sees it end or overrun). For the replay's head-slip count.
  bool Backfilled(const std::string& uid) const ABSL_LOCKS_EXCLUDED(mu_);
  // The last refresh's estimate for pending pod `uid` (nullopt: none yet).
  std::optional<PodEstimate> EstimateOf(const std::string& uid) const ABSL_LOCKS_EXCLUDED(est_mu_);
  // The runtime history to keep across restarts and its version (it grows
  // with every run recorded): kube/history_store.h, off the request path.
  std::vector<PersistedWorkload> HistoryToPersist(uint64_t* version) const
      ABSL_LOCKS_EXCLUDED(refresh_mu_);
  // Merges the history kept across a restart (RunObserver::Load): at start,
  // before or after the first refresh.
  void LoadHistory(const std::vector<PersistedWorkload>& saved) ABSL_LOCKS_EXCLUDED(refresh_mu_);

  // Longest hold of the mutex so far and the number of holds (benchmarks).
  const LockHoldStats& lock_stats() const { return lock_stats_; }

 private:
  struct Entry {
    // As the cluster source shows it: shared with ClusterState, never changed
    // (a change of the pod replaces it).
    std::shared_ptr<const PodRequest> pod;
    int64_t first_seen_ms = 0;
    // When a filter last asked about it: made when it is queued, shared with
    // the admission snapshots (AdmitOnSnapshot notes an ask without the mutex).
    std::shared_ptr<AskClock> asked;
    // -1: never filtered (known from the source).
    int64_t last_filter_ms() const {
      return asked == nullptr ? -1 : asked->at.load(std::memory_order_relaxed);
    }
    // Attained-service level within its priority: 0, or 1 once its workload
    // has run past its namespace's threshold (decided when it is queued).
    int8_t level = 0;
  };
  // Queue order: priority descending, then attained-service level, then
  // creation time, then name, uid.
  struct EarlierEntry {
    bool operator()(const Entry* a, const Entry* b) const;
  };
  using Order = std::set<const Entry*, EarlierEntry>;
  // A queue position: one pod, or all pending members of one gang.
  struct Unit {
    const Entry* head = nullptr;
    std::vector<const Entry*> members;
    int64_t demand = 0;  // milli-GPUs the unit still needs
  };
  struct Slot {
    std::string placeholder_uid;
    std::string node;
    DeviceMask devices = 0;
    std::string member_uid;  // "" while unclaimed
    bool bound = false;
  };
  struct Reservation {
    std::string ns;
    std::string gang;
    int64_t deadline_ms = 0;
    std::vector<Slot> slots;
  };
  struct Evaluation {
    std::string reason;  // "" = admissible
    int32_t position = 0;
    bool needs_gang_reservation = false;
    // Quota the pod's admission needs: its unit's demand (a gang: all
    // members not yet placed) plus the earlier units that count.
    int64_t quota_demand = 0;
    bool behind_earlier = false;  // an earlier unit could use the same nodes and goes first
    int64_t backfill_end = 0;     // Backfill let it pass earlier units: the end it promised
  };
  // One node's victims: the pods there (kube-scheduler evicts them for the
  // preempt verb) and the members elsewhere of the victim gangs among them
  // (gpusched evicts those: a gang goes whole or not at all).
  struct NodePlan {
    std::vector<Victim> victims;
    std::vector<Victim> gang_rest;
    std::vector<std::string> VictimUids() const;
    std::vector<std::string> AllUids() const;
    int64_t Milli() const;
    int32_t MaxPriority() const;  // INT32_MIN without victims
  };
  // What PlanNode may take and must leave.
  struct NodePlanRules {
    const std::vector<std::string>* allowed = nullptr;  // kube-scheduler's victims; null: any
    bool reclaim = false;       // only borrowers (PlanInputs::cohort_loan: outside its cohort)
    int64_t quota_demand = 0;   // quota its admission needs (Evaluation); 0: its own demand
    int64_t borrow_demand = 0;  // GPUs it will add (a gang: all missing members); 0: its own
    bool check_quota = true;    // false: a member of a gang plan before the last
  };
  // A gang's plan: per missing member, a node and the victims there.
  struct GangStep {
    std::string node;
    NodePlan plan;
    std::string member_uid;  // the member the preempt verb gave this step to
  };
  struct GangPlan {
    int64_t at_ms = 0;
    std::vector<GangStep> steps;
    // With a topology request: what the plan achieves for it ("the victims
    // free one <level> (<domain>) for all N members", or why it could not).
    std::string where;
  };
  // Victim gangs' other members, evicted once one of `trigger` is going.
  struct GangFollowup {
    int64_t at_ms = 0;
    std::vector<std::string> trigger;
    std::vector<std::string> rest;
  };
  // What victim planning reads, from a PlanningView (never the live
  // members: planners run without the mutex).
  struct PlanInputs {
    const QuotaLedger* ledger = nullptr;
    const QueueOptions* options = nullptr;
    const absl::flat_hash_map<std::string, int64_t>* evicted = nullptr;
    const GangUsage* gangs = nullptr;  // gang member counts
    // Attained-service preemption: victims only among the pods of these
    // workloads (their namespace's demoted ones); null: the rules of the caller.
    const DemotedWorkloads* only = nullptr;
    // Reclaim for a borrower whose cohort lends it enough idle guarantee:
    // victims only among borrowers outside its cohort (docs/queue.md).
    bool cohort_loan = false;
    // Fair-share reclaim: victims only in these namespaces, each left with
    // at least its floor (milli: max of guarantee and fair share).
    const absl::flat_hash_map<std::string, int64_t>* floors = nullptr;
    // The planner thread's: passed once per node the planning loops visit.
    YieldPoint* yield = nullptr;
    void Pace() const {
      if (yield != nullptr) yield->Pass();
    }
  };
  // One namespace's reclaim, chosen under the mutex and planned without it.
  struct ReclaimJob {
    std::string ns;
    PodRequest pod;       // the head of its queue
    int32_t members = 1;  // a gang: its members not yet placed
    int64_t demand = 0;
    std::vector<std::string> victims;  // the plan; empty: none found
    bool planned = false;              // false: the tick's budget ran out first
    // Non-empty: an attained-service preemption within `ns`, victims only
    // among these workloads' pods; empty: reclaim from borrowers.
    DemotedWorkloads only;
    // The head borrows within what its cohort lends (else it is within its
    // guarantee): victims only among borrowers outside its cohort.
    bool cohort_loan = false;
    // Non-empty: a fair-share reclaim (reclaim.fairShare); victims only in
    // these namespaces, each kept at or above its floor (PlanInputs::floors).
    absl::flat_hash_map<std::string, int64_t> floors;
    // A gang's plan with a topology request: what it achieves (GangPlan::where).
    std::string where;
  };
  // What every planner reads (the preempt verb, the tick's reclaim batch,
  // the debug pages): an immutable copy of the queue's planning state,
  // stamped with the versions it copies and published once per change of
  // them (PlanningViewLocked), so planners made on the same state share one
  // copy and plan without the mutex.
  struct PlanningView {
    // What it was copied from: the usage's cluster generation, the config
    // version, the claims' generation and the evictions' version.
    struct Stamp {
      uint64_t usage = 0, config = 0, claims = 0, evicted = 0;
      bool operator==(const Stamp&) const = default;
    } stamp;
    std::shared_ptr<const ClusterSnapshot> snapshot;  // the usage's
    std::shared_ptr<const QueueOptions> options;
    std::unique_ptr<const QuotaLedger> ledger;  // with claims; bound to options->quotas
    absl::flat_hash_map<std::string, int64_t> evicted;
    std::shared_ptr<const GangUsage> gangs;  // the usage's, shared
    PlanInputs Inputs() const { return {ledger.get(), options.get(), &evicted, gangs.get()}; }
  };
  // The view of the state as it is now: the published one while nothing it
  // copies moved, else a new copy (O(namespaces + evictions); the gang sums are shared).
  std::shared_ptr<const PlanningView> PlanningViewLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The commit rule (plan_commit.cc; docs/architecture.md, "Plans and the
  // commit"), the one way a plan made without the mutex is recorded under
  // it, for every plan: reclaim, attained-service and fair-share batches,
  // the preempt verb, a gang's preemption plan and a gang's reservation.
  //   A plan is recorded if the config is the one it was planned under and
  //   its pod (if any) still waits as planned (a gang's reservation: the
  //   member unchanged and no reservation for its gang); and either nothing
  //   it read has moved (its view's stamp and the queue's version are the
  //   current ones), or every fact it adds still holds now.
  // The facts a plan may add: its pod still heads its queue (`heads_queue`);
  // every victim still exists and is not being evicted (`victims`); each
  // namespace it evicts from above its limit is used as planned (`usage`);
  // a gang reservation's (`gang`): the gang's members on nodes are as many as when
  // it was placed, its whole demand is within its namespace's quota and
  // each pick within the per-model quota, as usage is now. Devices a plan
  // takes are checked where they are assumed (ClusterState::AssumeAll).
  struct GangPlacement;
  struct PlanBasis {
    PlanningView::Stamp stamp;   // of the view it was planned on
    uint64_t queue_version = 0;  // queue_version_ when it was prepared
    std::string for_uid;         // the pod it is for; "": none to check
    bool heads_queue = false;
    const std::vector<std::string>* victims = nullptr;
    const GangPlacement* gang = nullptr;  // a gang reservation's placement
    // Over-limit evictions: namespace -> its usage (milli) as planned; the
    // fact is that each is still used exactly so.
    const std::map<std::string, int64_t>* usage = nullptr;
  };
  bool PlanCurrentLocked(const PlanBasis& basis) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PlanningView::Stamp CurrentStampLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One round of reclaim planning: the jobs, planned on `view` (evictions
  // planned earlier in the round are added to `evicted`, a copy of the
  // view's).
  struct PlanBatch {
    std::vector<ReclaimJob> jobs;
    std::shared_ptr<const PlanningView> view;
    uint64_t queue_version = 0;  // when its jobs were chosen
    absl::flat_hash_map<std::string, int64_t> evicted;
    std::shared_ptr<const policy::Framework> fw;
  };
  // This tick's reclaim jobs (empty: nothing to plan), chosen in bounded
  // holds (ChooseReclaimsLocked), with the queue's version at the first.
  PlanBatch ChooseReclaims() ABSL_LOCKS_EXCLUDED(mu_);
  // The tick's steps. What the background planner left (taken under
  // plan_mu_, never under mu_).
  struct PlannerState {
    std::optional<PlanBatch> done;  // planned, to commit
    bool attached = false;
    bool busy = false;  // a batch waits for it or is being planned
  };
  PlannerState TakePlanned() ABSL_LOCKS_EXCLUDED(plan_mu_);
  // Sync, expiry of reservations, plans, evictions and reclaims, attained
  // service; moves a planned batch made under an older config to `stale`;
  // true when reclaim jobs are to be chosen (ChooseReclaims, in holds of
  // their own).
  bool TickHousekeepingLocked(PlannerState& planner, std::optional<PlanBatch>* stale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands `batch` to the attached planner, or plans it here (within the
  // budget) and leaves it in planner.done.
  void PlanOrHandOver(PlanBatch batch, std::chrono::steady_clock::time_point started,
                      PlannerState& planner) ABSL_LOCKS_EXCLUDED(mu_, plan_mu_);
  // Victim gangs' other members and pods over a lowered limit; returns the
  // evictions sent. The over-limit evictions are planned on the planning
  // view without the mutex and recorded by the commit rule.
  int FollowupEvictions(bool after_evictions) ABSL_LOCKS_EXCLUDED(mu_);
  // Plans `batch` without the mutex; `deadline` (if set) stops before a job;
  // `yield` (the planner thread's) is passed at every node visited.
  void PlanBatchJobs(PlanBatch& batch,
                     std::optional<std::chrono::steady_clock::time_point> deadline,
                     YieldPoint* yield = nullptr);

  int64_t Now() const;
  void Log(const std::string& line) const;
  static bool IsGang(const PodRequest& pod) { return !pod.gang.empty() && pod.gang_size > 1; }
  static std::string GangKey(const std::string& ns, const std::string& gang) {
    return ns + "/" + gang;
  }
  // Applies ClusterState's pod changes to the pending index and brings the
  // usage sums to `snapshot`. Every locked entry point calls it first.
  void SyncLocked(std::shared_ptr<const ClusterSnapshot> snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpsertEntryLocked(std::shared_ptr<const PodRequest> pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseEntryLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds (sign 1) or removes (-1) `pod`'s demand from pending_milli_.
  void AddPendingLocked(const PodRequest& pod, int sign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Entry* FindEntryLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A walk over one namespace's units in several holds of the mutex (the
  // estimate refresh, Positions, Report): where the last hold stopped (a
  // copy of the last entry visited: the walk resumes after it in queue
  // order), the gangs and pods already listed (a pod re-queued behind the
  // cursor between holds is not listed twice). A unit is listed where its
  // head is when the walk reaches it.
  struct UnitCursor {
    std::optional<Entry> last;
    absl::flat_hash_set<std::string> gangs_seen;
    absl::flat_hash_set<std::string> pods_seen;  // single pods' uids
    bool done = false;
  };
  // Units one hold of a walk copies at most: a hold stays far below 1 ms
  // however deep a namespace's queue is.
  static constexpr size_t kUnitsPerHold = 512;
  // The next units of `ns` from `cursor`, at most `max_units` (UnitsLocked's
  // units, in the same order); sets cursor->done when the queue is walked.
  std::vector<Unit> NextUnitsLocked(const std::string& ns, UnitCursor* cursor, size_t max_units)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The unit of gang member `head` (its first pending member in order).
  Unit GangUnitLocked(const std::string& ns, const Entry* head) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Units of `ns` in order, up to and including the one holding `stop_uid`
  // (all of them if empty or not queued). O(units walked).
  std::vector<Unit> UnitsLocked(const std::string& ns, const std::string& stop_uid = "",
                                size_t max_units = SIZE_MAX) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Units copied out of the queue with their entries (owned, stable
  // addresses), for evaluating without the mutex (the debug pages).
  struct UnitCopies {
    std::deque<Entry> entries;
    std::vector<Unit> units;
    void Add(const Unit& unit);
  };
  // The node-scan half of an evaluation (is an earlier unit able to use a
  // node this pod could use?), copied so that it can run without the mutex:
  // the pod and the heads of the earlier units kube-scheduler has asked
  // about, at most kBehindScanHeads of them.
  static constexpr size_t kBehindScanHeads = 64;
  struct BehindScan {
    struct Head {
      std::shared_ptr<const PodRequest> pod;  // the queue's, shared
      int64_t demand = 0;
      // A cohort Backfill reservation (cohort_backfill.cc): the reason the
      // pod waits if this head holds it back (empty: an earlier unit of its
      // own namespace). `always`: it holds whatever the nodes (both borrow).
      std::string held;
      bool always = false;
    };
    PodRequest pod;
    std::vector<Head> heads;  // empty: no scan needed
    std::string position;     // "position N in queue"
    // Backfill let the pod pass earlier units: the end it promises, recorded
    // (backfilled_) only if the scan admits it.
    int64_t backfill_end = 0;
  };
  // Sets ev->behind_earlier and (if it has none yet) ev->reason when a head
  // of `scan` could use a node its pod could use. Pure.
  static void ScanBehind(const BehindScan& scan, const ClusterSnapshot& snapshot,
                         const policy::Framework& fw, Evaluation* ev);
  // `all_checks`: also decide behind_earlier when quota already refuses (the
  // preempt verb needs both; filter stops at the first reason). With
  // `deferred`, the node scan is not run but left there for the caller
  // (Admit runs it after unlocking).
  Evaluation EvaluateLocked(const PodRequest& pod, const ClusterSnapshot& snapshot,
                            const policy::Framework& fw, bool all_checks = false,
                            BehindScan* deferred = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct EstimateBoard;
  // What an evaluation reads besides the units: live members or copies.
  struct EvalInputs {
    const QuotaLedger* ledger = nullptr;
    const QueueOptions* options = nullptr;
    bool gang_reserved = false;  // the pod's gang holds a reservation
    int64_t now_ms = 0;
    const EstimateBoard* board = nullptr;  // Backfill's estimates; null: none
  };
  // Backfill (backfill.cc): the end units[k] promises (now + its runtime
  // estimate + the margin) if that is before every earlier unit's estimated
  // start, else 0 (also with no fresh board, an earlier unit without an
  // estimate, or more than kBehindScanHeads earlier units). Pure.
  static int64_t BackfillEnd(const std::vector<Unit>& units, size_t k, const EvalInputs& in);
  // The end pod `uid` promises if it starts at `now_s`: its runtime
  // estimate on `board` plus max(backfill_margin_s, a tenth of it); 0
  // without a runtime estimate.
  static int64_t PromisedEnd(const EstimateBoard& board, const std::string& uid, int64_t now_s,
                             const QueueOptions& options);
  // Cohort Backfill (cohort_backfill.cc; docs/queue.md): the units of the
  // other Backfill namespaces of `pod`'s cohort that hold it back unless
  // their nodes are apart, appended to `ev`'s node scan (`deferred`, or run
  // here without one). Applies only to a pod of a Backfill namespace with a
  // cohort, with a board at most backfill_max_age_s old, that would borrow
  // (`own_demand`: its unit's demand plus that of the earlier units of its
  // namespace that count) or passes earlier units of its own namespace by
  // Backfill (ev->backfill_end set).
  void ApplyCohortHoldsLocked(const PodRequest& pod, int64_t own_demand, const EvalInputs& in,
                              const ClusterSnapshot& snapshot, const policy::Framework& fw,
                              bool all_checks, BehindScan* deferred, Evaluation* ev)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Its half under the mutex: the holding units (estimated to start before
  // the pod's promised end: earlier ones in the estimator's order, later ones
  // when the estimate had the pod wait) into `heads`; returns the pod's
  // promised end if it passed an earlier unit of the cohort, else 0.
  int64_t CohortHoldsLocked(const PodRequest& pod, int64_t own_demand, bool passed_own,
                            const EvalInputs& in, std::vector<BehindScan::Head>* heads)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a unit of another Backfill namespace of `head`'s cohort holds
  // the queue head `head` (asking `demand`) back whatever the nodes (a
  // holding unit that borrows): the tick then plans no reclaim for it, as
  // evictions would free GPUs it may not take (docs/queue.md, "Backfill
  // across a cohort").
  bool CohortHeldLocked(const PodRequest& head, int64_t demand) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What counts ahead of one unit: rule (1)'s demand of the earlier units
  // (those not stale whose demand fits the limit; none under
  // BestEffortFIFO), how many, and the first kBehindScanHeads of them that
  // kube-scheduler has asked about (rule (2)'s candidates).
  struct Ahead {
    int64_t demand = 0;
    int32_t count = 0;
    std::vector<const Unit*> asked;
  };
  // Per namespace: every unit in queue order with what counts ahead of each
  // (prefix sums), so that a filter costs O(1) in the depth of the queue.
  // Built by one walk (UnitIndexLocked) and dropped when the namespace's
  // queue changes (an entry added, changed or removed), when a unit's head
  // is asked about again after going stale, when a counted
  // unit goes stale (valid_until_ms), when a gang's members placed change
  // (checked against gang_held when the usage generation moves) or on a
  // config change. The differential test compares it with the walk.
  struct UnitIndex {
    std::vector<Unit> units;
    absl::flat_hash_map<const Entry*, size_t> unit_of;  // every member -> its unit
    std::vector<int64_t> demand_before;                 // [i]: counted demand before unit i
    std::vector<int32_t> count_before;                  // [i]: counted units before unit i
    int64_t valid_until_ms = 0;                         // the first time a counted unit goes stale
    uint64_t config_version = 0;
    uint64_t usage_generation = 0;
    std::vector<std::pair<size_t, int32_t>> gang_held;  // (gang unit, members placed at build)
    // The queue frozen from it for the admission snapshot, if any; marked
    // no longer current when this index changes or goes.
    FrozenLink frozen;
  };
  // The walk: what counts ahead of units[k] (`strict`: StrictFIFO).
  static Ahead WalkAhead(const std::vector<Unit>& units, size_t k, const EvalInputs& in,
                         int64_t limit, bool strict);
  // `ns`'s index, rebuilt if stale. REQUIRES: LedgerLocked() current.
  UnitIndex& UnitIndexLocked(const std::string& ns, const QuotaLedger& ledger, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `ns`'s index; if a queue was frozen from it, `ns` is frozen again
  // at the end of the hold (refreeze_).
  void ForgetUnitIndexLocked(const std::string& ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets e's ask clock to now and keeps its namespace's index current: a
  // head asked again after going stale drops the index (it counts again, so
  // the prefix sums move); a first ask changes nothing the index holds.
  void NoteAskedLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node scan's candidates ahead of unit k of `x`: the first
  // kBehindScanHeads counted units before it that kube-scheduler asked about
  // (their heads' clocks), in queue order.
  static void AskedAhead(const UnitIndex& x, size_t k, std::vector<const Unit*>* heads);
  // The admission rule for the pod of units[k] (`pod`), given the units
  // before it in order. Pure.
  static Evaluation EvaluateUnits(const std::vector<Unit>& units, size_t k, const PodRequest& pod,
                                  const EvalInputs& in, const ClusterSnapshot& snapshot,
                                  const policy::Framework& fw, bool all_checks,
                                  BehindScan* deferred = nullptr);
  // The same for `unit` at 1-based position `pos` given what counts ahead.
  static Evaluation EvaluateAhead(const Unit& unit, int32_t pos, const Ahead& ahead,
                                  const PodRequest& pod, const EvalInputs& in,
                                  const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                  bool all_checks, BehindScan* deferred);
  // EvaluateAhead on sums: the unit's demand, the counted demand and units
  // ahead, and `add_heads` appending the node scan's heads (the counted
  // units asked about ahead, at most kBehindScanHeads), called only when
  // the scan is due. Pure: the mutex path and the snapshot path share it.
  struct QueuedAt {
    int64_t unit_demand = 0;
    int32_t pos = 0;
    int64_t ahead_demand = 0;
    int32_t ahead_count = 0;
  };
  static Evaluation EvaluateQueued(
      const QueuedAt& at, absl::FunctionRef<void(std::vector<BehindScan::Head>*)> add_heads,
      const PodRequest& pod, const EvalInputs& in, const ClusterSnapshot& snapshot,
      const policy::Framework& fw, bool all_checks, BehindScan* deferred);
  // The reason the source's pod `e` waits, or "" (Admit under the mutex).
  // When `deferred` comes back with heads, the answer so far is "" and the
  // caller still owes the scan and, for a gang, ReserveForGang; without
  // heads, `reserve` is set (to its position) when a gang member is due one.
  std::string AdmitLocked(Entry& e, const ClusterSnapshot& snapshot, const policy::Framework& fw,
                          BehindScan* deferred, std::optional<std::string>* reserve)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admission of a pod the source has not shown (yet): evaluated at its
  // place in the queue, then taken out again.
  std::string AdmitUnconfirmedLocked(const PodRequest& pod, const ClusterSnapshot& snapshot,
                                     const policy::Framework& fw, BehindScan* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admission::product_refusals for `pod` (per-model quota per product of
  // `snapshot`); empty when its namespace limits no model.
  std::vector<std::string> ProductRefusalsLocked(const PodRequest& pod,
                                                 const ClusterSnapshot& snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same on `ledger` (quotas enabled). Pure.
  static std::vector<std::string> ProductRefusals(const PodRequest& pod,
                                                  const ClusterSnapshot& snapshot,
                                                  const QuotaLedger& ledger);

  // ---- Admission on a snapshot (admit_snapshot.cc, admit_snapshot.h) ----
  // Admit under the mutex: syncs, decides quota in queue order, then runs
  // the node scan (and a gang's reservation) after unlocking; publishes the
  // admission snapshot at the end of its first hold.
  Admission AdmitUnderMutex(const PodRequest& request,
                            const std::shared_ptr<const ClusterSnapshot>& snapshot,
                            const policy::Framework& fw) ABSL_LOCKS_EXCLUDED(mu_);
  // Admit without the mutex, on the published snapshot: the answer the
  // mutex path would give now, or nullopt when the snapshot cannot give it
  // (not current; not a pod queued in a namespace it froze, nor one not
  // shown yet where nothing waits; a member of a reserved gang; Backfill;
  // a unit's first ask after going stale, which changes the index; a gang
  // member its queue admits, whose reservation is a write); then `*miss`
  // says why (a label of gpusched_queue_snapshot_misses_total).
  std::optional<Admission> AdmitOnSnapshot(const PodRequest& request,
                                           const ClusterSnapshot& snapshot,
                                           const policy::Framework& fw, const char** miss)
      ABSL_LOCKS_EXCLUDED(mu_);
  // AdmitOnSnapshot's answer for `ask`, found and asked on `s`.
  static std::optional<Admission> AnswerOnSnapshot(const AdmitSnapshot& s, const SnapshotAsk& ask,
                                                   const PodRequest& request,
                                                   const ClusterSnapshot& snapshot,
                                                   const policy::Framework& fw, int64_t now,
                                                   const char** miss);
  // The last step of every StateHold: takes the cluster source's pod
  // changes and newest snapshot (SyncLocked) if the queue is behind them,
  // then publishes the state as the hold leaves it, with `freeze`'s queue
  // (if any) and the namespaces whose frozen queue this hold dropped frozen
  // again (RefreezeLocked). No-op with recompute_from_scratch.
  void PublishAfterHoldLocked(const std::string* freeze) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `ns`'s queue frozen into `queues` unless it is frozen already: its
  // index made current (UnitIndexLocked), unless Backfill or empty.
  void FreezeIfCurrentLocked(const std::string& ns, const QuotaLedger& ledger, FrozenQueues* queues)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `ns`'s queue frozen from its current index `x` (and linked to it).
  std::shared_ptr<const FrozenQueue> FreezeQueueLocked(UnitIndex& x)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts an admission by path and, for one the snapshot could not answer,
  // why (`miss`, or nullptr).
  void CountAdmission(const char* path, const char* miss = nullptr) const;
  // Namespaces whose frozen queue was dropped (their index changed, went or
  // was rebuilt), frozen again by the next holds' publication, at most
  // kRefreezePerHold a hold (each rebuilds an index: O(its queue)).
  static constexpr int kRefreezePerHold = 4;
  absl::flat_hash_set<std::string> refreeze_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::shared_ptr<const AdmitSnapshot>> admit_snapshot_;  // written under mu_
  // The ledger of the usage last synced (SyncLocked), with current claims.
  const QuotaLedger& LedgerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteWaitLocked(const std::string& ns, double seconds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `uid`'s first-seen time for OnBound (binding_), if it waits.
  void NoteBindingLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Gangs (gang_reservations.cc).
  Slot* SlotOfLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string ReservedNodeLocked(const PodRequest& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang member bound without having claimed a slot of its gang's live
  // reservation: claims a free slot on `node`, else (free slots elsewhere)
  // sets `why`; null without a reservation with free slots.
  Slot* ClaimSlotForBindLocked(const PodRequest& pod, std::string_view node, std::string* why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang reservation being made: what it was prepared from under the
  // mutex (ClaimOrPrepareLocked), then the placement found without it.
  struct GangPlacement {
    PodRequest pod;       // the source's member, as placed
    int32_t missing = 0;  // members to place; 0: nothing to do
    // What the placement reads (the newest snapshot, the ledger with its
    // claims, the options) and the queue's version when it was prepared:
    // the commit rule's basis.
    std::shared_ptr<const PlanningView> view;
    uint64_t queue_version = 0;
    bool by_scan = false;  // the reference placement (recompute_from_scratch)
    bool placed = false;
    std::vector<std::pair<std::string, DeviceMask>> picks;  // (node, devices) per member
    // The gang's topology request (domain_placement.h) and, when the picks
    // fall short because no domain holds the gang, why.
    ResolvedTopology topology;
    std::string topology_why;
    PlanBasis Basis() const { return {view->stamp, queue_version, pod.uid, false, nullptr, this}; }
  };
  // Placements ReserveForGang makes (each without the mutex, on the newest
  // snapshot) before it answers that the cluster kept changing under them
  // (a curable reason: kube-scheduler retries the pod).
  static constexpr int kGangPlacements = 3;
  // An admitted gang member (the source's pod `uid`): claims its slot or
  // reserves for its gang, placing without the mutex and committing by the
  // commit rule (PlanCurrentLocked). The reason it waits (with `position`
  // appended) or "" (then `reserved_node` is its slot's node, if any).
  std::string ReserveForGang(const std::string& uid, const policy::Framework& fw,
                             const std::string& position, std::string* reserved_node)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One hold of ReserveForGang, after `placements` placements: commits
  // `place` if it is placed and still current, else prepares it again.
  // True when answered (`why`: "" reserved, claimed or nothing to do; else
  // the reason); false when `place` is to be placed without the mutex.
  bool ReserveStepLocked(const PodRequest& pod, const policy::Framework& fw, int placements,
                         GangPlacement* place, std::string* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang's last placement that fell short (plan_commit.cc;
  // docs/architecture.md, "Plans and the commit"), answered again without
  // placing to a member of the gang asking for the same placement on a view
  // of the same stamp: with the same framework, the same `missing`,
  // topology request and by_scan, and the same placement request
  // (SamePlacementRequest: every field of the pod a placement reads; the
  // uid and name are not among them). Exact: PlaceGang is a pure function of
  // exactly these and of the view, and the view is fixed by its stamp (what
  // the commit rule's "nothing moved" rests on), so placing again would
  // fall short the same way and say the same. Stamps only move forward: an
  // entry of another stamp is never used again, and the tick drops it.
  struct FailedPlacement {
    PlanningView::Stamp stamp;
    std::shared_ptr<const policy::Framework> fw;  // held: its address is compared
    PodRequest pod;
    int32_t missing = 0;
    ResolvedTopology topology;
    bool by_scan = false;
    std::string why;  // the commit's answer to the placement
  };
  absl::flat_hash_map<std::string, FailedPlacement> failed_placements_ ABSL_GUARDED_BY(mu_);
  // The answer recorded for `place` (prepared on the current view) placed
  // with `fw`, or null.
  const std::string* FailedBeforeLocked(const GangPlacement& place,
                                        const policy::Framework& fw) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `why`, the answer to `place` that fell short, placed with `fw`
  // (not kept if `fw` is no longer the current framework).
  void RememberFailureLocked(const GangPlacement& place, const policy::Framework& fw,
                             const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the failures of other stamps than the current one.
  void DropStaleFailuresLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Claims a slot of the gang's reservation, or leaves in `place` what
  // placing the missing members needs (missing 0: the gang has started).
  // A gang its namespace's quota refuses now is answered here, unplaced.
  std::string ClaimOrPrepareLocked(const PodRequest& pod, GangPlacement* place)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why `missing` members of `pod`'s gang are over its namespace's quota as
  // usage is now, or "". The admission that let the gang through ran under
  // an earlier hold, and another unit of the namespace (one BestEffortFIFO
  // let pass) may have taken the room since: checked when the placement is
  // prepared and, if anything moved, by the commit rule (two gangs admitted
  // side by side once both committed, a namespace at twice its limit).
  std::string GangQuotaLocked(const PodRequest& pod, int32_t missing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The commit rule's gang facts (plan_commit.cc): the member `now` asks for
  // what was placed and its gang holds no reservation (checked always); the
  // members on nodes and the quotas as placed (checked when anything moved).
  bool GangWaitsAsPlacedLocked(const GangPlacement& place, const PodRequest& now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool GangFactsHoldLocked(const GangPlacement& place) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Holds the placed devices with placeholder pods, or says why it cannot
  // (`conflict`: a picked device was taken meanwhile; nothing is held).
  std::string CommitGangLocked(const GangPlacement& place, bool* conflict)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places the missing members one after another on hypothetical copies of
  // the nodes (best score first), within the prepared ledger and the gang's
  // topology domain (domain_placement.h), on the view's snapshot: sets
  // picks. Pure: reads only its arguments.
  static void PlaceGang(const policy::Framework& fw, GangPlacement* place);
  int32_t HeldGangMembersLocked(const PodRequest& pod) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The gang's topology request as its pending members ask it, or one with
  // an error (invalid, or members asking different things).
  ResolvedTopology GangTopologyLocked(const PodRequest& pod) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireReservationsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked(Reservation& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Preemption and reclaim (preempt_reclaim.cc).
  // The preempt verb's steps: what it reads, prepared under the mutex
  // (false: answered already, in `answered` or with nothing); then a plan
  // per candidate node (a single pod) or the gang's whole plan, made
  // without the mutex and recorded under it.
  struct PreemptWork {
    std::shared_ptr<const PlanningView> view;
    uint64_t queue_version = 0;
    PodRequest pod;  // the source's pod where it waits
    int32_t missing = 0;
    int64_t quota_demand = 0;
    BehindScan scan;
    std::optional<PreemptionOutcome> answered;  // from the gang's current plan
  };
  bool PreparePreemptLocked(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                            const policy::Framework& fw, PreemptWork* work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PreemptionOutcome PreemptOne(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                               const policy::Framework& fw, const PreemptWork& work)
      ABSL_LOCKS_EXCLUDED(mu_);
  PreemptionOutcome PreemptGang(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                const policy::Framework& fw, const PreemptWork& work)
      ABSL_LOCKS_EXCLUDED(mu_);
  class GangSearch;  // PlanGang's state between members (gang_preemption.cc)
  class NodeSearch;  // PlanNode's candidates and quota check (preempt_reclaim.cc)
  // Victims (highest priority first) so `preemptor` fits on `node`, within
  // `rules`; a victim gang with members on other nodes is taken whole (they
  // are in gang_rest). Pure: reads only its arguments.
  static std::optional<NodePlan> PlanNode(const PlanInputs& in, const PodRequest& preemptor,
                                          const NodeInfo& node, const ClusterSnapshot& snapshot,
                                          const policy::Framework& fw, const NodePlanRules& rules);
  // One plan for `missing` members of `member`'s gang: each member on a node
  // with room as is, else on the node whose victims have the lowest highest
  // priority, then the fewest GPUs (kube-scheduler's order of nodes), on
  // the nodes as the earlier steps leave them; the victims together leave
  // quota for the whole gang. A gang that requires a topology domain
  // (domain_placement.h) is planned inside one domain: each domain that
  // could hold it, in best-fit order, and the cheapest plan (Cheaper over
  // its steps) wins. A gang that prefers one is planned the same way at its
  // level, then at each larger level (the first level with a plan wins),
  // and only when no single domain can be freed as without topology. Pure.
  static std::optional<GangPlan> PlanGang(const PlanInputs& in, const PodRequest& member,
                                          int32_t missing, const ClusterSnapshot& snapshot,
                                          const policy::Framework& fw, bool reclaim,
                                          int64_t quota_demand);
  // The cheapest plan inside one domain of `domains` (its `where`: the
  // domain's name), each domain whose healthy GPUs could hold the gang tried
  // in best-fit order; only the running members' domain when `held` names
  // one.
  static std::optional<GangPlan> PlanInOneDomain(const PlanInputs& in, const PodRequest& member,
                                                 int32_t missing, const ClusterSnapshot& snapshot,
                                                 const policy::Framework& fw, bool reclaim,
                                                 int64_t quota_demand,
                                                 const TopologyDomains& domains,
                                                 const NodeRooms& per_node,
                                                 const std::vector<int32_t>& held);
  // PlanGang on the nodes `only` (null: all).
  static std::optional<GangPlan> PlanGangOn(const PlanInputs& in, const PodRequest& member,
                                            int32_t missing, const ClusterSnapshot& snapshot,
                                            const policy::Framework& fw, bool reclaim,
                                            int64_t quota_demand, const std::vector<int32_t>* only);
  static bool Cheaper(const NodePlan& a, const NodePlan& b);
  // Report's steps: each namespace's row and units (at most `limit` pods,
  // copied) and the gang reservations (of `ns`, or all if empty), under the
  // mutex in holds of at most kEntriesPerHold copied entries (the view
  // taken again at each); then the explanation of the copies, without it.
  struct NamespaceCopy {
    NamespaceQueue row;
    UnitCopies copies;
    std::set<std::string> reserved;            // its gangs holding a reservation
    std::shared_ptr<const PlanningView> view;  // when its copy started
    UnitCursor cursor;
    size_t listed = 0;
    bool started = false;
  };
  static constexpr size_t kEntriesPerHold = 2048;
  // Copies more of `nc` (namespace `ns`) within `*budget` entries; true
  // when it is complete.
  bool CopyNamespaceLocked(const std::string& ns, size_t limit, size_t* budget, NamespaceCopy* nc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The namespaces a report lists: `query.ns`, else every namespace with a
  // quota or a queue.
  std::vector<std::string> ReportNamesLocked(const ReportQuery& query, const PlanningView& view)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<GangReservationReport> ReservationReportsLocked(const std::string& ns, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void ExplainNamespace(const PlanningView& view, const UnitCopies& copies,
                               const std::set<std::string>& reserved, int64_t now,
                               const policy::Framework& fw, NamespaceQueue* nq);
  // The three cheapest single-node preemptions that would let `pod` run
  // (the debug page's preview), planned on `view` without the mutex.
  std::vector<PreemptionPreview> PreviewPreemption(const PlanningView& view, const PodRequest& pod,
                                                   int64_t quota_demand,
                                                   const policy::Framework& fw) const;
  // The current plan of gang `key` (dropping it once older than
  // gang_plan_ms and no victim of it is terminating), or null.
  GangPlan* CurrentGangPlanLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The preempt verb's answer for a gang member from its gang's plan: the
  // member's own step, else a free step on one of its candidate nodes.
  PreemptionOutcome AnswerFromGangPlanLocked(GangPlan& plan, const PodRequest& pod,
                                             const PreemptionArgs& args,
                                             const ClusterSnapshot& snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answer for one candidate node from a plan there: its victims plus
  // kube-scheduler's CPU/memory victims; records the victim gangs' rest.
  std::optional<PreemptionOutcome::NodeVictims> AnswerNodeLocked(const PodRequest& pod,
                                                                 const PreemptionArgs::Candidate& c,
                                                                 const NodeInfo& node,
                                                                 const NodePlan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evictions of victim gangs' other members whose gang has lost one.
  std::vector<std::pair<PodRequest, std::string>> GangFollowupEvictionsLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reclaim plan for one job (cheapest node), or none. Pure.
  static void PlanReclaim(const PlanInputs& in, const ClusterSnapshot& snapshot,
                          const policy::Framework& fw, ReclaimJob* job);
  // Per node, whether reclaim planning can help there: its verdict is not
  // unresolvable, it has a reclaimable pod, and its free devices plus every
  // reclaimable pod's are enough; `fewest` gets the fewest victims any plan
  // can have (a lower bound that stops the search). Pure.
  static std::vector<uint8_t> ReclaimWorth(const PlanInputs& in, const ReclaimJob& job,
                                           const ClusterSnapshot& snapshot,
                                           policy::FilterMemo& memo, size_t* fewest);
  // Choosing the tick's reclaim jobs: the namespaces whose queue head may
  // reclaim now (cheap checks only), round-robin from reclaim_cursor_, at
  // most options_.reclaim_plans_per_tick jobs. Walked over several holds
  // of the mutex, kNamespacesPerHold namespaces each, so that the hold is
  // bounded however many namespaces there are; a namespace added or removed
  // between holds is met or skipped by its name. Jobs chosen in different
  // holds are all recorded by the commit rule against the first hold's
  // queue version (older, so every fact is checked if the queue moved).
  struct ReclaimChoice {
    std::vector<ReclaimJob> jobs;
    std::string first;  // where the turn started (the cursor; "": the first namespace)
    std::string next;   // the namespace the next hold looks at first
    bool started = false, wrapped = false, done = false;
    // A hold already ended after making the ledger and its borrowers alone
    // (they outlasted the hold's budget): at most once a turn.
    bool ledger_hold = false;
    uint64_t queue_version = 0;  // at the first hold
  };
  static constexpr size_t kNamespacesPerHold = 32;
  // One hold's share of the choice; sets c.done when the turn is over.
  void ChooseReclaimsLocked(ReclaimChoice& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job for namespace `ns` (queue `order`), if its head may reclaim now.
  std::optional<ReclaimJob> ReclaimJobForLocked(const std::string& ns, const Order& order,
                                                const QuotaLedger& ledger,
                                                const Borrowers& borrowers, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the planned reclaims still current (PlanCurrentLocked); returns
  // the evictions to send.
  std::vector<std::pair<PodRequest, std::string>> CommitReclaimsLocked(
      const std::vector<ReclaimJob>& jobs, const PlanningView::Stamp& planned,
      uint64_t queue_version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The eviction reason of a committed reclaim (an attained-service one
  // spends its namespace's budget), and its record (claim, held nodes).
  std::string ReclaimReasonLocked(const ReclaimJob& job, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordReclaimLocked(const ReclaimJob& job, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Over-limit evictions (reclaim.evict_over_limit), planned on a view
  // without the mutex: the pods to evict (lowest priority first, then the
  // newest; a gang whole) until each namespace above its limit is back
  // within it, each with its reason, and those namespaces' usage as planned
  // (the commit rule's `usage` fact). Pure.
  struct OverLimitPlan {
    std::vector<std::string> victims;
    std::vector<std::string> reasons;  // per victim
    std::map<std::string, int64_t> usage;
  };
  static OverLimitPlan PlanOverLimit(const PlanningView& view);
  // Records `plan` (planned on a view stamped `planned`) if the commit rule
  // accepts it; the evictions to send.
  std::vector<std::pair<PodRequest, std::string>> CommitOverLimitLocked(
      const OverLimitPlan& plan, const PlanningView::Stamp& planned, uint64_t queue_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `uid` evicted (not planned again while it goes); the pod to evict.
  std::optional<PodRequest> MarkEvictedLocked(const std::string& uid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends evictions (never under the mutex); returns how many succeeded.
  int SendEvictions(const std::vector<std::pair<PodRequest, std::string>>& evictions,
                    const std::string& label) ABSL_LOCKS_EXCLUDED(mu_);

  QueueDeps deps_;
  mutable absl::Mutex mu_;
  mutable LockHoldStats lock_stats_;
  // options_.yield_before_background_holds, read before taking mu_.
  std::atomic<bool> yield_background_{false};
  LockUse BackgroundUse() const {
    return yield_background_.load(std::memory_order_relaxed) ? LockUse::kBackgroundYield
                                                             : LockUse::kBackground;
  }
  // A hold of the queue's state: mu_, timed per site (TimedLock), whose last
  // step publishes the admission snapshot (PublishAfterHoldLocked). Every
  // hold of mu_ is one, so the state owner publishes after every change
  // batch: a filter after a bind, a tick or a report reads the snapshot
  // again instead of taking the mutex. FreezeAtEnd(ns) also freezes `ns`'s
  // queue (the admission that just made its index current).
  class ABSL_SCOPED_LOCKABLE StateHold {
   public:
    StateHold(QueueManager* q, const char* site, LockUse use = LockUse::kRequest)
        ABSL_EXCLUSIVE_LOCK_FUNCTION(q->mu_)
        : q_(q), lock_(&q->mu_, &q->lock_stats_, q->deps_.metrics, site, use) {}
    ~StateHold() ABSL_UNLOCK_FUNCTION() {
      q_->mu_.AssertHeld();
      q_->PublishAfterHoldLocked(freeze_);
    }
    StateHold(const StateHold&) = delete;
    StateHold& operator=(const StateHold&) = delete;
    void FreezeAtEnd(const std::string& ns) { freeze_ = &ns; }

   private:
    QueueManager* q_;
    TimedLock lock_;
    const std::string* freeze_ = nullptr;  // outlives the hold
  };
  QueueOptions options_ ABSL_GUARDED_BY(mu_);
  // options_ as one immutable copy, shared by what plans or reports without
  // the mutex (a pointer copy under it, not every namespace's quotas).
  std::shared_ptr<const QueueOptions> shared_options_ ABSL_GUARDED_BY(mu_);
  // Pending entries by uid (node map: Order holds pointers into it).
  absl::node_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Per namespace, its entries in queue order.
  std::map<std::string, Order> order_ ABSL_GUARDED_BY(mu_);
  // Background planning (AttachPlanner): the batch waiting for the planner,
  // whether it is planning one, and the planned batch waiting for a tick.
  // Under a mutex of their own, never held together with mu_ (Tick reads
  // and hands over batches before and after its holds): the planner runs at
  // the lowest CPU priority and holds plan_mu_, so a request could otherwise
  // wait for it to be scheduled again.
  absl::Mutex plan_mu_;
  bool planner_attached_ ABSL_GUARDED_BY(plan_mu_) = false;
  std::optional<PlanBatch> to_plan_ ABSL_GUARDED_BY(plan_mu_);
  bool planning_ ABSL_GUARDED_BY(plan_mu_) = false;
  std::optional<PlanBatch> planned_ ABSL_GUARDED_BY(plan_mu_);
  // Per namespace, the milli-GPUs its pending entries ask for (Report).
  absl::flat_hash_map<std::string, int64_t> pending_milli_ ABSL_GUARDED_BY(mu_);
  // Per namespace, its UnitIndex (absent: build on next use).
  absl::flat_hash_map<std::string, UnitIndex> unit_index_ ABSL_GUARDED_BY(mu_);
  // Pending members per "ns/gang" (gang pods only).
  absl::flat_hash_map<std::string, std::vector<const Entry*>> gang_members_ ABSL_GUARDED_BY(mu_);
  bool full_sync_ ABSL_GUARDED_BY(mu_) = true;
  UsageIndex usage_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Reservation> reservations_ ABSL_GUARDED_BY(mu_);
  uint64_t reservation_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The last reclaim per namespace it was for: its victims (still
  // terminating until they are gone) and the pod it frees GPUs for, whose
  // demand the namespace claims (QuotaLedger::SetClaims) while that pod
  // waits, for at most stale_after_ms.
  // The nodes the victims were on are held for that pod (and its gang) the
  // same way: no pod of no higher priority passes filter there meanwhile,
  // so the freed devices are not taken back before it binds.
  using HeldNodes = queue::HeldNodes;  // admit_snapshot.h
  struct Reclaim {
    int64_t at_ms = 0;
    std::vector<std::string> victims;
    std::string for_uid;
    int64_t demand = 0;
    std::set<std::string> nodes;
    int32_t priority = 0;
    std::string gang;
    // For a head within its guarantee (not a cohort's loan or an
    // attained-service preemption): its holds bind pods within their
    // guarantee too.
    bool for_guarantee = false;
    // `nodes`, each with the reason a filter of another pod fails there;
    // made once when the reclaim is committed.
    std::shared_ptr<const HeldNodes> held;
    // Whether any victim was still in the cluster at the last tick's sync
    // (PruneReclaimsLocked asks for all reclaims at once), so that the
    // reclaim choice does not ask ClusterState under the mutex per namespace.
    bool victims_present = true;
  };
  // The nodes `pod` may not use because reclaim freed them for another
  // pod, one shared list per reclaim (flattened by the caller without the
  // mutex).
  std::vector<std::shared_ptr<const HeldNodes>> HeldForReclaimLocked(const PodRequest& pod)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rule itself, on `holds` and `ledger` (the current ones or a
  // snapshot's). Pure.
  static std::vector<std::shared_ptr<const HeldNodes>> HeldFor(
      const PodRequest& pod, const std::vector<ReclaimHold>& holds, const QuotaLedger& ledger);
  std::map<std::string, Reclaim> reclaiming_ ABSL_GUARDED_BY(mu_);
  // Logs the quota coverage's warnings (quota_coverage.h) when they change:
  // GPUs no quota can use, guarantees over-promising the cluster.
  void LogCoverageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  QuotaCoverage logged_coverage_ ABSL_GUARDED_BY(mu_);
  uint64_t coverage_config_ ABSL_GUARDED_BY(mu_) = 0;  // config_version_ it was made for
  // What reclaiming_ means for admission now: the claims (QuotaLedger) and
  // the holds (HeldForReclaimLocked) of the reclaims that are current (not
  // stale, their pod still waiting), so that a filter does not walk every
  // namespace's last reclaim. Rebuilt on first use after reclaiming_ or an
  // entry changes (`dirty`), after the first current reclaim goes stale
  // (`valid_until_ms`) or if the clock went back (`built_at_ms`).
  struct ReclaimView {
    std::map<std::string, int64_t> claims;  // namespace -> demand it claims
    // The reclaims with nodes held, copied (the admission snapshot shares them).
    std::shared_ptr<const std::vector<ReclaimHold>> holds;
    bool dirty = true;
    int64_t built_at_ms = 0;
    int64_t valid_until_ms = 0;
    uint64_t generation = 0;  // moves when claims change
  };
  const ReclaimView& ReclaimViewLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the pods evicted longer ago than stale_after_ms, or past the
  // cool-down and gone.
  void PruneEvictedLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the reclaims gone stale (no longer read by anything), and notes
  // whether each one's victims are still there (one question to
  // ClusterState for all of them).
  void PruneReclaimsLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ReclaimView reclaim_view_ ABSL_GUARDED_BY(mu_);
  // Attained service per workload and each opted-in namespace's preemption
  // budget (a token bucket of preemptions_per_hour; attained_service.cc).
  AttainedService attained_ ABSL_GUARDED_BY(mu_);
  // Workloads forgotten per tick at most (the rest on the next ticks), so a
  // burst of finished workloads never lengthens one hold of the mutex.
  static constexpr size_t kForgetsPerTick = 2048;
  // How long a tick waits, before taking the mutex, for evictions still in
  // the writer's hands (Tick): bounded, since against the API a writer may
  // be retrying with back-off.
  static constexpr std::chrono::milliseconds kWriterWait{10};
  struct PreemptionBudget {
    double tokens = 0;
    int64_t at_ms = 0;
  };
  std::map<std::string, PreemptionBudget> attained_budget_ ABSL_GUARDED_BY(mu_);
  // reclaim.fairShare's budget per reclaiming namespace.
  std::map<std::string, PreemptionBudget> fair_budget_ ABSL_GUARDED_BY(mu_);
  // The entry's level under the current options and attained service.
  int8_t LevelLocked(const PodRequest& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Re-levels the entries of `ns` (its attained-service settings changed),
  // re-sorting those that move.
  void RelevelLocked(const std::string& ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The budget of `ns` in `budgets` (attained_budget_ or fair_budget_)
  // brought to now (tokens never above one hour's).
  static PreemptionBudget& Refill(std::map<std::string, PreemptionBudget>& budgets,
                                  const std::string& ns, int32_t per_hour, int64_t now);
  // A fair-share reclaim for `ns`'s head needing `demand` (reclaim.fairShare):
  // the victims' floors, or false when the head holds its fair share, the
  // budget is spent or nobody is above its share.
  bool FairFloorsLocked(const std::string& ns, int64_t demand, int64_t now,
                        absl::flat_hash_map<std::string, int64_t>* floors)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The eviction reason of a committed fair-share reclaim; takes one token
  // of the namespace's budget per workload (gang or pod) evicted.
  std::string FairShareReasonLocked(const ReclaimJob& job, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The running workloads `head` may have evicted by attained service (its
  // namespace's workloads past the threshold, with no pod of higher
  // priority and a pod not being evicted); false (and `out` empty) if its
  // namespace has not opted in, it is itself past the threshold, the budget
  // is spent or there is no such workload. O(the namespace's running pods),
  // no pod copied.
  bool AttainedVictimsLocked(const Entry& head, int64_t now, DemotedWorkloads* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gang preemptors' plans by "ns/gang" (gang_preemption.cc).
  std::map<std::string, GangPlan> gang_plans_ ABSL_GUARDED_BY(mu_);
  // Victim gangs to finish evicting, by "ns/gang" of the victim gang.
  std::map<std::string, GangFollowup> gang_followups_ ABSL_GUARDED_BY(mu_);
  // A namespace whose last reclaim plan found nothing for the same head is
  // planned again only after a back-off (1 s, doubling, at most 16 s):
  // planning reads every node, and an unchanged failure would repeat.
  struct ReclaimBackoff {
    std::string head_uid;
    int64_t retry_at_ms = 0;
    int32_t failures = 0;
  };
  std::map<std::string, ReclaimBackoff> reclaim_backoff_ ABSL_GUARDED_BY(mu_);
  // Where the next tick's reclaim planning starts (round-robin).
  std::string reclaim_cursor_ ABSL_GUARDED_BY(mu_);
  // Pods we asked to evict (uid -> when): not planned again while they go.
  absl::flat_hash_map<std::string, int64_t> evicted_ ABSL_GUARDED_BY(mu_);
  uint64_t evicted_version_ ABSL_GUARDED_BY(mu_) = 0;  // moves with every change of evicted_
  uint64_t queue_version_ ABSL_GUARDED_BY(mu_) = 0;    // moves with every pending entry change
  // Per namespace with pending entries, queue_version_ at the last change of
  // its units (an entry queued, changed, gone or moved): the estimate
  // refresh copies only the namespaces changed since its last copy.
  absl::flat_hash_map<std::string, uint64_t> changed_at_ ABSL_GUARDED_BY(mu_);
  // The one place a change of `ns`'s pending entries is recorded: moves
  // queue_version_ and changed_at_, drops what was derived from the units.
  void QueueChangedLocked(const std::string& ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<const PlanningView> view_ ABSL_GUARDED_BY(mu_);  // the last published
  // Ledger cache for one snapshot generation and config version.
  // Shared with the admission snapshot once published (then warmed, and
  // copied before a change of its claims).
  std::shared_ptr<QuotaLedger> ledger_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const QueueOptions> ledger_options_ ABSL_GUARDED_BY(mu_);  // it is bound to
  bool ledger_warm_ ABSL_GUARDED_BY(mu_) =
      false;  // its lazy sums filled (Warm) since its last change
  uint64_t ledger_generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t config_version_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t ledger_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ledger_claims_ ABSL_GUARDED_BY(mu_) = 0;  // reclaim_view_.generation it has
  // Wait-time histogram per namespace (seconds): bucket counts, sum, count.
  struct WaitHistogram {
    std::vector<int64_t> buckets;
    double sum = 0;
    int64_t count = 0;
  };
  std::map<std::string, WaitHistogram> waits_ ABSL_GUARDED_BY(mu_);
  // Pods assumed for a bind, by uid: when each was first seen, for OnBound
  // to observe its wait (the assume's hold already took the pod off the
  // queue as it ended). OnBound takes its pod's; the tick drops those whose
  // bind never completed (the API write failed) after kBindingForgetMs.
  struct Binding {
    std::string ns;
    int64_t first_seen_ms = 0;
    int64_t at_ms = 0;
  };
  static constexpr int64_t kBindingForgetMs = 60'000;
  absl::flat_hash_map<std::string, Binding> binding_ ABSL_GUARDED_BY(mu_);

  // Estimates (estimate_refresh.cc). refresh_mu_: one refresh at a time,
  // held across it and taken before mu_; est_mu_: a leaf guarding the
  // published board (a pointer copy for readers, never held with mu_).
  struct EstimateBoard {
    StartEstimates starts;
    absl::flat_hash_map<std::string, RuntimeFacts> runtimes;  // pending pods
  };
  std::shared_ptr<const EstimateBoard> Board() const ABSL_LOCKS_EXCLUDED(est_mu_);
  // The debug pages' and Positions' estimate fields, from the board.
  void FillEstimates(std::vector<QueuedPod>* pods) const ABSL_LOCKS_EXCLUDED(est_mu_);
  void FillEstimate(const PodRequest& pod, PodReport* report) const ABSL_LOCKS_EXCLUDED(est_mu_);
  // ExplainPod's cohort Backfill holds (cohort_backfill.cc) for a pod whose
  // own namespace admits it, as Admit answers them: the holding units are
  // collected under the mutex, the node scan runs without it.
  void ExplainCohortHolds(const PodRequest& pod, const std::vector<Unit>& units,
                          const EvalInputs& in, const ClusterSnapshot& snapshot,
                          const policy::Framework& fw, Evaluation* ev) ABSL_LOCKS_EXCLUDED(mu_);
  // ExplainPod's what-if answers (what_if.h) for `pod`, on `view`, after
  // the units of `copies` (its namespace's, up to and including its own).
  void AddWhatIfs(const PlanningView& view, const std::vector<Unit>& units, const PodRequest& pod,
                  const policy::Framework& fw, int64_t now_ms, PodReport* report) const
      ABSL_LOCKS_EXCLUDED(est_mu_);
  // The runtime history brought to `view` (seeded from finished pods first).
  void UpdateHistoryLocked(const PlanningView& view, int64_t now_s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(refresh_mu_);
  // Seconds a pod running now is expected to run (0: no estimate): as the
  // last refresh that saw it running, else as `previous` (the last board)
  // had it while it waited, else from its pod and the history as at its
  // start (a Job's deadline: the time left when it started).
  int64_t RunningRuntimeLocked(const PodOnNode& p, const EstimateBoard* previous, int64_t now_s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(refresh_mu_);
  // A namespace with pending entries as the refresh's first hold saw it.
  struct QueueStamp {
    std::string ns;
    uint64_t changed_at = 0;  // changed_at_[ns]
  };
  // One namespace's units as a refresh copied them (runtimes not set).
  struct CopiedQueue {
    uint64_t copied_at = 0;  // queue_version_ when its copy began
    size_t max_units = 0;    // estimate_max_units it was copied with
    std::vector<EstimateUnit> units;
  };
  // What the first hold of a refresh reads for EstimateQueuesLocked.
  struct CopyPlan {
    std::vector<QueueStamp> queues;
    size_t max_units = 0;
    bool reuse = true;  // false: recompute_from_scratch (copy every namespace)
  };
  // The estimator's queues at `now_s`: every namespace's units. A
  // namespace unchanged since the last refresh copied it is taken from that
  // copy (copies_) without the mutex; the others are copied in holds of
  // kUnitsPerHold units.
  std::vector<EstimateQueue> EstimateQueuesLocked(const CopyPlan& plan, EstimateBoard* board,
                                                  int64_t now_s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(refresh_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // `ns`'s units copied under the mutex, in holds of kUnitsPerHold units.
  CopiedQueue CopyUnits(const std::string& ns, size_t max_units) ABSL_LOCKS_EXCLUDED(mu_);
  mutable absl::Mutex refresh_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  RuntimeHistory history_ ABSL_GUARDED_BY(refresh_mu_);
  RunObserver observer_ ABSL_GUARDED_BY(refresh_mu_);
  bool history_seeded_ ABSL_GUARDED_BY(refresh_mu_) = false;
  // Runtime estimates of the pods on nodes, by uid, from the refresh that
  // first saw each running (pods still waiting have theirs on the board).
  absl::flat_hash_map<std::string, int64_t> runtime_of_ ABSL_GUARDED_BY(refresh_mu_);
  absl::flat_hash_map<std::string, int64_t> runtime_seen_ ABSL_GUARDED_BY(refresh_mu_);
  // The last refresh's copy of each namespace's units.
  absl::flat_hash_map<std::string, CopiedQueue> copies_ ABSL_GUARDED_BY(refresh_mu_);
  // The last board, for Backfill's admissions (set by the refresh under
  // mu_: a pointer copy), and the units admitted by Backfill: uid -> the
  // end promised by its estimate (an overrun is counted, never evicted).
  std::shared_ptr<const EstimateBoard> admit_board_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> backfilled_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> backfill_overruns_{0};
  // Counts the backfilled units on a node past their promised end (once
  // each) and forgets those gone; returns how many overran.
  int64_t CountOverrunsLocked(int64_t now_s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  mutable absl::Mutex est_mu_;
  std::shared_ptr<const EstimateBoard> board_ ABSL_GUARDED_BY(est_mu_);
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_QUEUE_MANAGER_H_
