// Estimated start times: a forward simulation of the live queue on an
// immutable snapshot and a copy of the quota ledger.
//
// Every pod running now ends at its start plus its runtime estimate (or the
// stated default when it has none; a pod already past its estimate is taken
// to end max(1 min, a quarter of its estimate) from now). At each simulated
// time the waiting units (a pod, or a gang's pending members together) are
// tried in queue order: within a namespace its own order; across namespaces
// priority, then creation time. A unit starts when the quota ledger admits
// its demand (and the per-model quota each pick) and every member finds a
// node through the same Framework filters and device selector
// (policy::FitsWithDevices) on the nodes as the simulation has changed
// them, best fit first (fewest free GPUs that are enough). Under StrictFIFO
// a unit that cannot start holds the rest of its namespace back for that
// step; under BestEffortFIFO it does not. A started unit runs for its own
// estimate (or the default). Gang reservation holders count as free (their
// members are the ones waiting).
//
// Bounded: a step at time t takes every end up to t + max(1 min, 1 % of the
// time simulated so far) as at t (so steps are at least that far apart, and
// an estimate may be early by that much), the simulation stops at
// `horizon_s`, and at a wall-clock `deadline`; units not started by then get
// no estimate, with the reason.
// Guarantee reclaim (when `reclaim` is set, as QueueOptions::reclaim
// enables it): the first waiting unit of a namespace that its guarantee
// admits (usage + demand <= guaranteed) but no node has room for takes the
// GPUs of borrowers' pods (pods of namespaces above their guarantee; of
// lower priority than the unit only, with `reclaim_lower_priority_only`),
// per member on the node that needs the fewest of them (lowest priority,
// then newest first there), never taking a borrower below its guarantee,
// and starts `reclaim_delay_s` later (the victims' termination).
// Preemption (when `preempt` is set): a head that reclaim does not start
// (and whose pod does not say preemptionPolicy: Never) takes pods of lower
// priority the same way, as the preempt verb allows them (another
// namespace's only while it borrows and never below its guarantee when the
// head's unit would itself borrow), and starts `reclaim_delay_s` later.
// The pods taken leave the simulation: the pods their controllers create
// again are not simulated, so the estimates of units behind them may be
// early by that much.
// Cohort Backfill (docs/queue.md): the namespaces of one cohort whose
// strategy is Backfill hold each other back where they compete. In a step,
// a unit of such a namespace that would borrow (its namespace's usage, the
// demand of its queue's units not started in this step before it and its
// own demand above its guarantee) is not tried while an earlier unit of
// another such namespace of its cohort did not start in this step and
// either would borrow so much that the two together borrow more than the
// idle GPUs it may borrow (QuotaLedger::Lendable), or accepts a GPU product
// it accepts (the nodes it could use, coarsened to products). A unit within
// its guarantee is never held back by another namespace.
// A cohort's loan (as QueueManager's reclaim has it): a head that would
// borrow, within its limit and no more than the idle guarantee of its
// cohort's other members (QuotaLedger::CohortLendable), reclaims the same
// way from borrowers outside its cohort only.
// A victim that is a gang member is taken with every other running member
// of its gang, wherever they run (the planners evict a gang whole); the
// guarantee floor counts them all.
// Not modelled: fair-share reclaim and attained-service preemption; a
// shared-GPU pod is placed only on a device that is wholly free.
//
// Pure: reads only its input. Callers: QueueManager's estimate refresh
// (off the request path, on a PlanningView) and tests.
#ifndef GPUSCHED_QUEUE_START_ESTIMATOR_H_
#define GPUSCHED_QUEUE_START_ESTIMATOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/model/snapshot.h"
#include "gpusched/policy/framework.h"
#include "scheduler/queue/quota_ledger.h"
#include "scheduler/queue/runtime_estimates.h"
#include "scheduler/queue/yield_point.h"

namespace gpusched::queue {

struct EstimateUnit {
  // Pending members that start together (shared with the queue, never
  // changed).
  std::vector<std::shared_ptr<const PodRequest>> members;
  RuntimeEstimate runtime;  // of the unit's first member
};

struct EstimateQueue {
  std::string ns;
  std::vector<EstimateUnit> units;  // in the namespace's queue order
};

struct StartEstimatorInput {
  const ClusterSnapshot* snapshot = nullptr;
  const policy::Framework* fw = nullptr;
  const QuotaLedger* ledger = nullptr;  // copied; its config decides the strategy
  std::vector<EstimateQueue> queues;
  // The runtime estimate of a pod running now, in seconds (0: none).
  std::function<int64_t(const PodOnNode&)> running_seconds;
  int64_t now_s = 0;
  int64_t default_runtime_s = 3600;
  int64_t horizon_s = int64_t{7} * 24 * 3600;
  // A step takes the ends within max(min_step_s, step_share x time simulated)
  // together (0 and 0: every end is a step of its own, exact).
  int64_t min_step_s = 60;
  double step_share = 0.01;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Passed once per unit tried (a low-priority thread's; may be null).
  YieldPoint* yield = nullptr;
  // Guarantee reclaim and preemption (see above); the delay is the victims'
  // termination, for both.
  bool reclaim = false;
  bool reclaim_lower_priority_only = true;
  bool preempt = false;
  int64_t reclaim_delay_s = 30;
};

struct StartEstimate {
  int64_t start_s = -1;  // -1: no estimate (see basis)
  // "now"; "when 3 running pods end (1 of them on the default runtime)";
  // or why there is none.
  std::string basis;
  // Where its unit stands in the order the simulation tries units in,
  // across namespaces (0 first): Backfill's "earlier" (QueueManager).
  int64_t order = -1;
};

struct StartEstimates {
  int64_t made_at_s = 0;
  absl::flat_hash_map<std::string, StartEstimate> by_uid;  // every member of every unit
  absl::flat_hash_map<std::string, int64_t> running_end;   // pods running now: their expected end
  int32_t steps = 0;                                       // simulated times visited
  bool truncated = false;                                  // the deadline stopped it
};

StartEstimates EstimateStarts(const StartEstimatorInput& in);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_START_ESTIMATOR_H_
