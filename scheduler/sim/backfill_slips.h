// BackfillSlips: counts, in the replay, the queue heads whose start slipped
// because of a unit Backfill let pass them (docs/simulator.md, "Head
// slips"). When unit B starts by Backfill, every unit of its namespace that
// was ahead of it at the last estimate refresh and still waits is "passed"
// with the estimated start S that refresh gave it, and so is every unit of
// another Backfill namespace of its cohort that was earlier in the
// estimator's order (StartEstimate::order) and still waits. A passed unit A slipped
// when it starts more than kSlipToleranceSeconds after S while B, running
// past S (still running at S, or ended after it), ran on a node A starts
// on. Each start of A counts once, however many units passed it.
// Used by the queue replay (queue_replay.cc); thread-compatible.
#ifndef GPUSCHED_SIM_BACKFILL_SLIPS_H_
#define GPUSCHED_SIM_BACKFILL_SLIPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace gpusched::sim {

// One estimate refresh's period in the replay: a start within it of the
// estimate is on time.
inline constexpr double kSlipToleranceSeconds = 60;

class BackfillSlips {
 public:
  struct Waiting {
    int unit = 0;
    int ns = 0;
    int32_t position = 0;  // in its namespace's queue, 1-based
    double estimated_start = -1;
    int64_t order = -1;  // in the estimator's order across namespaces (-1: none)
    int cohort = -1;     // its namespace's cohort if it queues by Backfill, else -1
  };
  // An estimate refresh: the waiting units and their estimated starts.
  void Refreshed(std::vector<Waiting> waiting);
  // `unit` of namespace `ns` started at `t` on `nodes`; `backfilled`: the
  // queue let it pass the units ahead of it by Backfill.
  void Started(int unit, int ns, double t, const std::vector<std::string>& nodes, bool backfilled);
  // `unit` stopped running (completed or evicted) at `t`.
  void Stopped(int unit, double t);

  // Starts of units that a backfilled unit had passed, and of those, the
  // ones that slipped.
  int64_t heads_passed() const { return heads_passed_; }
  int64_t slips() const { return slips_; }

 private:
  struct Run {  // one run of a backfilled unit
    absl::flat_hash_set<std::string> nodes;
    double end = 1e300;  // still running
  };
  struct Pass {
    double estimated_start = 0;
    size_t run = 0;  // index in runs_
  };
  absl::flat_hash_map<int, Waiting> waiting_;  // at the last refresh, by unit
  absl::flat_hash_set<int> running_;
  std::vector<Run> runs_;
  absl::flat_hash_map<int, size_t> open_run_;           // backfilled unit -> its run
  absl::flat_hash_map<int, std::vector<Pass>> passed_;  // waiting unit -> passes
  int64_t heads_passed_ = 0, slips_ = 0;
};

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_BACKFILL_SLIPS_H_
