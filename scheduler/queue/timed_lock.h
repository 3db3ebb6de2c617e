// TimedLock: a scoped exclusive lock on an absl::Mutex that reports how long
// it was held, per call site: to Prometheus histograms of the wall time
// (`gpusched_queue_lock_hold_seconds{site}`) and of the holder's own CPU time
// over the same span and its acquisition
// (`gpusched_queue_lock_hold_cpu_seconds{site}`), and to a running maximum.
// A hold whose wall time is far above its CPU time was a thread descheduled
// inside it, not work done under the lock; holds of kLongHold or more are
// also counted by which it was
// (`gpusched_queue_lock_long_holds_total{site,holder="ran"|"waited"}`:
// "waited" when the holder used under half the hold's wall time). It also
// reports how long each acquisition waited for the mutex
// (`gpusched_queue_lock_wait_seconds{site}`), and counts the waits of
// kLongWait or more by the site that held the mutex when the wait began
// (`gpusched_queue_lock_long_waits_total{site,holder}`): the direct measure
// of "no request waits on background work for more than 1 ms". A
// background acquisition may first yield the CPU (kBackgroundYield,
// sched_yield): the kernel's scheduler then starts the hold on a fresh
// time slice, so a short hold is rarely cut by the holder's own preemption,
// which a waiting request would otherwise sit through. The queue manager
// wraps every acquisition of its mutex in one, so /metrics shows whether a
// request could ever wait long on background work, and on which.
// Thread-safe; LockHoldStats is shared by all holders.
#ifndef GPUSCHED_QUEUE_TIMED_LOCK_H_
#define GPUSCHED_QUEUE_TIMED_LOCK_H_

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"

namespace gpusched::queue {

struct LockHoldStats {
  std::atomic<int64_t> max_ns{0};
  std::atomic<int64_t> count{0};
  // The site holding the mutex now (nullptr: none), for the waits' holder.
  std::atomic<const char*> holder{nullptr};

  void Record(int64_t ns) {
    count.fetch_add(1, std::memory_order_relaxed);
    int64_t seen = max_ns.load(std::memory_order_relaxed);
    while (ns > seen && !max_ns.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }
};

// CPU time the calling thread has used, in nanoseconds.
inline int64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// How a hold of `wall_ns` in which the holder used `cpu_ns` of CPU is
// counted: "waited" when the holder ran for under half of it (it waited
// for another lock or was descheduled), else "ran" (work under the lock).
inline const char* LongHoldHolder(int64_t wall_ns, int64_t cpu_ns) {
  return 2 * cpu_ns < wall_ns ? "waited" : "ran";
}

// Who takes the mutex: a verb kube-scheduler waits on, or background work
// (yielding the CPU first with kBackgroundYield).
enum class LockUse { kRequest, kBackground, kBackgroundYield };

class ABSL_SCOPED_LOCKABLE TimedLock {
 public:
  static constexpr int64_t kLongHold = 5'000'000;  // ns: the longest a verb should wait
  static constexpr int64_t kLongWait = 1'000'000;  // ns: the request path's goal

  // `site` names the caller in the histograms (a string literal).
  TimedLock(absl::Mutex* mu, LockHoldStats* stats, Metrics* metrics, const char* site,
            LockUse use = LockUse::kRequest) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu), stats_(stats), metrics_(metrics), site_(site) {
    if (use == LockUse::kBackgroundYield) sched_yield();
    // The thread's CPU clock is a system call: read outside the hold, so
    // the span it measures is the hold plus the (short) acquisition.
    cpu_start_ns_ = ThreadCpuNanos();
    held_by_ = stats_->holder.load(std::memory_order_relaxed);
    const auto asked = std::chrono::steady_clock::now();
    mu_->Lock();
    start_ = std::chrono::steady_clock::now();
    stats_->holder.store(site_, std::memory_order_relaxed);
    wait_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(start_ - asked).count();
  }
  ~TimedLock() ABSL_UNLOCK_FUNCTION() {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - start_)
                           .count();
    stats_->holder.store(nullptr, std::memory_order_relaxed);
    mu_->Unlock();
    const int64_t cpu_ns = ThreadCpuNanos() - cpu_start_ns_;
    stats_->Record(ns);
    if (metrics_ != nullptr) {
      const Labels labels = {{"site", site_}};
      metrics_->Observe("gpusched_queue_lock_wait_seconds",
                        "How long an acquisition of the queue manager's mutex waited for it, by "
                        "call site.",
                        labels, static_cast<double>(wait_ns_) / 1e9);
      if (wait_ns_ >= kLongWait) {
        metrics_->Inc("gpusched_queue_lock_long_waits_total",
                      "Acquisitions of the queue manager's mutex that waited 1 ms or more, by "
                      "call site and by the site that held it when the wait began (\"none\": "
                      "free then, taken by another first).",
                      {{"site", site_}, {"holder", held_by_ == nullptr ? "none" : held_by_}});
      }
      metrics_->Observe("gpusched_queue_lock_hold_seconds",
                        "How long the queue manager's mutex was held at a time, by call site.",
                        labels, static_cast<double>(ns) / 1e9);
      metrics_->Observe("gpusched_queue_lock_hold_cpu_seconds",
                        "CPU time the holder of the queue manager's mutex used while holding "
                        "it, by call site (wall time far above it: the holder was descheduled).",
                        labels, static_cast<double>(cpu_ns) / 1e9);
      if (ns >= kLongHold) {
        metrics_->Inc("gpusched_queue_lock_long_holds_total",
                      "Holds of the queue manager's mutex of 5 ms or more, by call site and by "
                      "whether the holder ran for most of it or waited (for another lock, or "
                      "descheduled).",
                      {{"site", site_}, {"holder", LongHoldHolder(ns, cpu_ns)}});
      }
    }
  }
  TimedLock(const TimedLock&) = delete;
  TimedLock& operator=(const TimedLock&) = delete;

 private:
  absl::Mutex* mu_;
  LockHoldStats* stats_;
  Metrics* metrics_;
  const char* site_;
  const char* held_by_ = nullptr;  // the holder when this one asked
  std::chrono::steady_clock::time_point start_;
  int64_t cpu_start_ns_ = 0;
  int64_t wait_ns_ = 0;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_TIMED_LOCK_H_
