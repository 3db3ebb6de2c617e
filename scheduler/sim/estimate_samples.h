// EstimateSampler: measures gpusched's estimated start in the replay
// (EstimateAccuracy, results.h). A unit is sampled at its first estimate
// refresh in the queue and at each hour it has waited; when it starts, each
// sample's prediction (and the naive baseline's: queue position times the
// mean runtime of the units completed so far) is compared with the start.
// A unit stopped and queued again starts over. Used by the queue replay
// (queue_replay.cc); thread-compatible.
#ifndef GPUSCHED_SIM_ESTIMATE_SAMPLES_H_
#define GPUSCHED_SIM_ESTIMATE_SAMPLES_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "scheduler/sim/results.h"

namespace gpusched::sim {

class EstimateSampler {
 public:
  // A refresh at `t` estimated that `unit` (queued since `since`, at
  // `position` in its namespace) starts at `predicted` (< 0: no estimate).
  void Offer(int unit, double t, double since, int32_t position, double predicted);
  // `unit` started at `t`.
  void Started(int unit, double t);
  // `unit` was stopped before it started (its samples no longer count).
  void Forget(int unit) { open_.erase(unit); }
  // A unit completed after running `seconds` (the naive baseline's mean).
  void Completed(double seconds) {
    runtime_sum_ += seconds;
    ++runtimes_;
  }
  EstimateAccuracy Summary() const;

 private:
  struct Sample {
    double at = 0, predicted = -1, naive = 0;
  };
  absl::flat_hash_map<int, std::vector<Sample>> open_;
  std::vector<double> errors_, naive_errors_;
  int64_t within_ = 0, naive_within_ = 0, samples_ = 0;
  double runtime_sum_ = 0;
  int64_t runtimes_ = 0;
};

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_ESTIMATE_SAMPLES_H_
