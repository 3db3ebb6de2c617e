// The replay's work-conserving and fairness metrics, computed the same way
// for every policy from the state the policy's event loop reports after
// each event time (GPUs in use and GPUs of waiting jobs, per namespace):
//  - GPU utilisation while jobs wait: over the time when at least one job
//    waits, the share of the pool's GPUs in use;
//  - time to guarantee: episodes from a namespace holding less than its
//    guarantee while a job of it waits, to it holding its guarantee or
//    nothing of it waiting (episodes still open at the end close there);
//  - fairness of the surplus: Jain's index, over the namespaces entitled to
//    part of the GPUs above guarantees, of each one's surplus in use
//    against its weighted fair surplus (WeightedFairShares), averaged over
//    the time when at least two namespaces are so entitled.
//
// Callers: the replay's policies (replay.cc, kueue_like.cc, kai_like.cc,
// queue_replay.cc) and tests. Pure functions; ShareMetrics is
// thread-compatible (one per run).
#ifndef GPUSCHED_SIM_SHARE_METRICS_H_
#define GPUSCHED_SIM_SHARE_METRICS_H_

#include <cstdint>
#include <vector>

namespace gpusched::sim {

// One namespace's entitlement (GPUs).
struct ShareSpec {
  int64_t guarantee = 0;
  double weight = 1;  // > 0
  int64_t limit = 0;  // most GPUs it may use
};

// Each namespace's weighted fair share of `capacity` GPUs at demands
// `demand` (GPUs in use plus GPUs of its waiting jobs): first
// min(guarantee, demand, limit) each (scaled down alike if those exceed the
// capacity); the rest divided among the namespaces that want more, in
// proportion to weight, none beyond min(demand, limit), the part a
// namespace cannot take going to the others (water-filling).
std::vector<double> WeightedFairShares(const std::vector<ShareSpec>& ns,
                                       const std::vector<double>& demand, double capacity);

// Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n
// when one has everything. -1 when empty or all zero.
double JainIndex(const std::vector<double>& x);

// The surplus fairness at one instant: Jain's index over the namespaces
// whose fair share (WeightedFairShares) exceeds their guaranteed part
// min(guarantee, demand, limit), of (used - guaranteed part, at least 0) /
// (fair share - guaranteed part). -1 when fewer than two such namespaces
// or none uses any surplus.
double SurplusJain(const std::vector<ShareSpec>& ns, const std::vector<int64_t>& used,
                   const std::vector<int64_t>& waiting, double capacity);

class ShareMetrics {
 public:
  ShareMetrics(std::vector<ShareSpec> ns, int64_t capacity);

  // The state from `t` until the next call (one call per event time, times
  // ascending): GPUs in use and GPUs of waiting jobs per namespace.
  void Observe(double t, const std::vector<int64_t>& used, const std::vector<int64_t>& waiting);
  // Ends the run at `t` (the makespan): closes the last interval and the
  // open time-to-guarantee episodes.
  void Finish(double t);

  // Share of GPUs in use over the time some job waited; -1 if none ever did.
  double UtilisationWhileWaiting() const;
  double WaitingSeconds() const { return waiting_seconds_; }
  // Time-weighted mean of SurplusJain where it is defined; -1 if nowhere.
  double MeanSurplusJain() const;
  const std::vector<double>& GuaranteeWaits() const { return guarantee_waits_; }

 private:
  void CloseInterval(double t);

  std::vector<ShareSpec> ns_;
  int64_t capacity_;
  double last_t_ = 0;
  bool started_ = false;
  std::vector<int64_t> used_, waiting_;
  double waiting_seconds_ = 0, used_while_waiting_ = 0;  // s, GPU-s
  double jain_seconds_ = 0, jain_sum_ = 0;
  double jain_now_ = -1;            // SurplusJain of the current state
  std::vector<double> owed_since_;  // per namespace: start of its open episode, or -1
  std::vector<double> guarantee_waits_;
};

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_SHARE_METRICS_H_
