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
// which a waiting request would otherwise sit through. Requests go first:
// a background acquisition waits (at most kMaxDefer) while any request is
// waiting for the mutex, so a background thread that releases and at once
// takes the mutex again (the tick's holds follow one another) never barges
// ahead of a request it just woke; a request then waits for at most one
// background hold, not a chain of them. The queue manager
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
  // Request acquisitions between asking for the mutex and getting it:
  // background acquisitions let them go first.
  std::atomic<int32_t> requests_waiting{0};
  // Acquisitions so far, counted as each one gets the mutex (before its
  // holder writes anything): an admission snapshot is current only while
  // this has not moved since the hold that published it.
  std::atomic<uint64_t> acquisitions{0};

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

// How a background acquisition's deferral to requests ended.
enum class Deferral { kNone, kRequestsWent, kLimit };

// Background work's side of "requests go first": returns once no request
// waits for the mutex (kNone: none did), or after `limit` (kLimit: a stream
// of requests cannot starve the tick). Sleeps in short steps: on a machine
// with few cores, spinning would take the core the woken request needs.
inline Deferral DeferToRequests(const LockHoldStats& stats, std::chrono::nanoseconds limit) {
  if (stats.requests_waiting.load(std::memory_order_acquire) == 0) return Deferral::kNone;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (stats.requests_waiting.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() >= until) return Deferral::kLimit;
    const timespec step{0, 20'000};  // 20 us
    nanosleep(&step, nullptr);
  }
  return Deferral::kRequestsWent;
}

class ABSL_SCOPED_LOCKABLE TimedLock {
 public:
  static constexpr int64_t kLongHold = 5'000'000;  // ns: the longest a verb should wait
  static constexpr int64_t kLongWait = 1'000'000;  // ns: the request path's goal
  // The longest a background acquisition lets waiting requests go first.
  static constexpr std::chrono::milliseconds kMaxDefer{2};

  // `site` names the caller in the histograms (a string literal).
  TimedLock(absl::Mutex* mu, LockHoldStats* stats, Metrics* metrics, const char* site,
            LockUse use = LockUse::kRequest) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu), stats_(stats), metrics_(metrics), site_(site) {
    const bool request = use == LockUse::kRequest;
    if (!request) CountDeferral(DeferToRequests(*stats_, kMaxDefer));
    if (use == LockUse::kBackgroundYield) sched_yield();
    // The thread's CPU clock is a system call: read outside the hold, so
    // the span it measures is the hold plus the (short) acquisition.
    cpu_start_ns_ = ThreadCpuNanos();
    held_by_ = stats_->holder.load(std::memory_order_relaxed);
    const auto asked = std::chrono::steady_clock::now();
    if (request) stats_->requests_waiting.fetch_add(1, std::memory_order_acq_rel);
    mu_->Lock();
    stats_->acquisitions.fetch_add(1, std::memory_order_seq_cst);
    if (request) stats_->requests_waiting.fetch_sub(1, std::memory_order_acq_rel);
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
  void CountDeferral(Deferral d) {
    if (d == Deferral::kNone || metrics_ == nullptr) return;
    metrics_->Inc("gpusched_queue_lock_deferrals_total",
                  "Background acquisitions of the queue manager's mutex that let waiting "
                  "requests go first, by call site and by how the deferral ended "
                  "(\"requests-went\", or \"limit\": 2 ms passed with requests still waiting).",
                  {{"site", site_}, {"ended", d == Deferral::kLimit ? "limit" : "requests-went"}});
  }

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
