// TimedLock: a scoped exclusive lock on an absl::Mutex that reports how long
// it was held: to a Prometheus histogram (`name`, seconds) and to a running
// maximum. The queue manager wraps every acquisition of its mutex in one, so
// /metrics shows whether a request could ever wait long on background work.
// Thread-safe; LockHoldStats is shared by all holders.
#ifndef GPUSCHED_QUEUE_TIMED_LOCK_H_
#define GPUSCHED_QUEUE_TIMED_LOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"

namespace gpusched::queue {

struct LockHoldStats {
  std::atomic<int64_t> max_ns{0};
  std::atomic<int64_t> count{0};

  void Record(int64_t ns) {
    count.fetch_add(1, std::memory_order_relaxed);
    int64_t seen = max_ns.load(std::memory_order_relaxed);
    while (ns > seen && !max_ns.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }
};

class ABSL_SCOPED_LOCKABLE TimedLock {
 public:
  TimedLock(absl::Mutex* mu, LockHoldStats* stats, Metrics* metrics)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu), stats_(stats), metrics_(metrics) {
    mu_->Lock();
    start_ = std::chrono::steady_clock::now();
  }
  ~TimedLock() ABSL_UNLOCK_FUNCTION() {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - start_)
                           .count();
    mu_->Unlock();
    stats_->Record(ns);
    if (metrics_ != nullptr) {
      metrics_->Observe("gpusched_queue_lock_hold_seconds",
                        "How long the queue manager's mutex was held at a time.", {},
                        static_cast<double>(ns) / 1e9);
    }
  }
  TimedLock(const TimedLock&) = delete;
  TimedLock& operator=(const TimedLock&) = delete;

 private:
  absl::Mutex* mu_;
  LockHoldStats* stats_;
  Metrics* metrics_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_TIMED_LOCK_H_
