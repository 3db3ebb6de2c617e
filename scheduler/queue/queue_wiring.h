// Wiring of the queue manager into a running extender (gpusched serve):
// options from the config file, the gate, the quota and queue gauges, and
// the periodic tick. Called once at start-up by the serve command and on
// every config reload (SetOptions). Thread-safe as QueueManager.
#ifndef GPUSCHED_QUEUE_QUEUE_WIRING_H_
#define GPUSCHED_QUEUE_QUEUE_WIRING_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/core/config.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/util/metrics.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/quota_objects.h"
#include "scheduler/queue/yield_point.h"

namespace gpusched::queue {

QueueOptions QueueOptionsFrom(const SchedulerConfig& config);
// QueueOptionsFrom plus what only a serving process sets: wall-clock
// budgets for the tick's reclaim planning and for each hold of its choice
// (QueueOptions::reclaim_plan_budget_ms, reclaim_choice_hold_us).
QueueOptions ServingQueueOptions(const SchedulerConfig& config);

// Returns a QueueManager installed as `service`'s gate, its queue filled from
// `state`, its gauges added to `metrics`. `writer` (may be null) receives
// reclaim and over-limit evictions. The manager must outlive the service.
std::unique_ptr<QueueManager> InstallQueue(ExtenderService* service, ClusterState* state,
                                           ClusterWriter* writer, const SchedulerConfig& config,
                                           Metrics* metrics);

// The one source of namespace quotas the queue enforces, and the options it
// runs with. The policy file gives scoring, reclaim, gang and the default
// quota; the namespaces' quotas come from the file's quotas.namespaces, or
// from GPUQuota/ElasticQuota objects while the GPUQuota CRD is installed
// (SetObjects with a resolution). With objects, a namespace that has none
// gets the file's quotas.default, or no limit if the file has no quotas
// section. Every switch of source is logged, and /debug/queues states the
// source. Called by the config reloader and the object watcher; thread-safe.
class QueueConfigApplier {
 public:
  // Applies nothing until the first SetFile or SetObjects (which logs the
  // source).
  QueueConfigApplier(QueueManager* queue, const SchedulerConfig& file, std::string file_label,
                     std::function<void(const std::string&)> log);
  // The policy file changed (it was validated).
  void SetFile(const SchedulerConfig& file) ABSL_LOCKS_EXCLUDED(mu_);
  // The objects changed; nullopt: the CRD is not installed (the file's
  // quotas apply).
  void SetObjects(std::optional<ResolvedQuotas> objects) ABSL_LOCKS_EXCLUDED(mu_);
  // "policy file <path>" or "GPUQuota objects (gpusched.io/v1alpha1)".
  std::string source() const ABSL_LOCKS_EXCLUDED(mu_);

  // The options for a file and objects (pure; tests).
  static QueueOptions OptionsFor(const SchedulerConfig& file, const std::string& file_label,
                                 const std::optional<ResolvedQuotas>& objects);

 private:
  void ApplyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  QueueManager* queue_;
  const std::string file_label_;
  std::function<void(const std::string&)> log_;
  mutable absl::Mutex mu_;
  SchedulerConfig file_ ABSL_GUARDED_BY(mu_);
  std::optional<ResolvedQuotas> objects_ ABSL_GUARDED_BY(mu_);
  std::string source_ ABSL_GUARDED_BY(mu_);
};

// Calls queue->Tick() every `every` on a thread of its own, never on the
// HTTP server's I/O threads (planning reclaim at scale may take longer than
// a request can wait behind it). No periodic resync: the queue follows
// ClusterState's pod change feed, and a relist makes its next read a full
// one. Stops and joins on destruction.
class TickThread {
 public:
  TickThread(QueueManager* queue, std::chrono::milliseconds every);
  ~TickThread();
  TickThread(const TickThread&) = delete;
  TickThread& operator=(const TickThread&) = delete;

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The queue's side of the cluster source: applies each burst of pod changes
// (a watch batch, a file reload, an eviction) to the queue as it comes
// (QueueManager::SyncWithCluster), on a thread of its own, so that the
// admission snapshot is current again before the next filter asks; without
// it the first filter after every change would decide under the queue
// mutex. Sleeps while nothing changes. Stops and joins on destruction
// (within kPoll).
class SourceSyncThread {
 public:
  SourceSyncThread(QueueManager* queue, const ClusterState* state);
  ~SourceSyncThread();
  SourceSyncThread(const SourceSyncThread&) = delete;
  SourceSyncThread& operator=(const SourceSyncThread&) = delete;

 private:
  static constexpr absl::Duration kPoll = absl::Milliseconds(100);
  // How long a change is left before the thread takes it: one the queue
  // made itself in a hold (a bind's assumption) is taken as that hold ends,
  // and a stream of single changes is taken in batches, not a hold each.
  static constexpr absl::Duration kSettle = absl::Milliseconds(1);
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Runs one closure at a time on a thread of its own at the lowest CPU
// priority (LowerToIdlePriority), handing it that thread's YieldPoint: Run
// blocks its caller until the closure has run. For long computations that
// hold no lock the request path needs. Joins on destruction; one caller at
// a time.
class IdleRunner {
 public:
  using Job = absl::FunctionRef<void(YieldPoint*)>;
  IdleRunner();
  ~IdleRunner();
  IdleRunner(const IdleRunner&) = delete;
  IdleRunner& operator=(const IdleRunner&) = delete;

  void Run(Job job) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool WorkOrStopLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return job_.has_value() || stopping_;
  }
  bool DoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !job_.has_value(); }

  absl::Mutex mu_;
  std::optional<Job> job_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Calls queue->RefreshEstimates(budget) `first` after the start, then every
// `every`, on a thread of its own (estimated starts and runtime history; off
// every request's path): a pod pending at start has an estimate within
// `first`, not a whole period later. The refresh's copies under the queue's
// mutex run on this thread at the normal CPU priority (a thread at the
// lowest priority could be descheduled inside such a hold); its simulation,
// which holds no lock the request path takes and is most of its CPU, runs
// on an IdleRunner, so a request's thread that wakes takes the core from it.
// Its wall-clock time is bounded by `budget` per refresh. Stops and joins on
// destruction.
class EstimateThread {
 public:
  EstimateThread(QueueManager* queue, std::chrono::milliseconds first,
                 std::chrono::milliseconds every, std::chrono::milliseconds budget);
  ~EstimateThread();
  EstimateThread(const EstimateThread&) = delete;
  EstimateThread& operator=(const EstimateThread&) = delete;

 private:
  IdleRunner simulation_;  // outlives thread_
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// A ClusterWriter that sends evictions on a thread of its own, in order: the
// tick hands them over and goes on (an eviction through the API takes a
// round trip, and retries with back-off). Evict returns OK at once; the
// wrapped writer logs and counts what each eviction became. Drains and joins
// on destruction. Thread-safe.
class AsyncClusterWriter final : public ClusterWriter {
 public:
  explicit AsyncClusterWriter(ClusterWriter* inner);
  ~AsyncClusterWriter() override;
  AsyncClusterWriter(const AsyncClusterWriter&) = delete;
  AsyncClusterWriter& operator=(const AsyncClusterWriter&) = delete;

  absl::Status Evict(const PodRequest& pod, const std::string& reason) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // The queue's tick waits here (outside its mutex) for the evictions it
  // just sent: the file source commits them under ClusterState's mutex, which
  // the tick's next sync needs.
  bool AwaitSent(std::chrono::milliseconds within) override ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every eviction handed over so far has been sent (tests).
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  ClusterWriter* inner_;
  absl::Mutex mu_;
  std::deque<std::pair<PodRequest, std::string>> queue_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Puts the calling thread at the lowest CPU priority: SCHED_IDLE, so any
// other thread that wakes preempts it at once (nice 19 where that fails).
void LowerToIdlePriority();

// Plans reclaim on a thread of its own at the lowest CPU priority
// (QueueManager::AttachPlanner, LowerToIdlePriority): the tick stays short,
// and the verbs' threads get a core the moment they wake. Plans land at the
// next tick after they are done. Detaches and joins on destruction.
class ReclaimPlannerThread {
 public:
  explicit ReclaimPlannerThread(QueueManager* queue);
  ~ReclaimPlannerThread();
  ReclaimPlannerThread(const ReclaimPlannerThread&) = delete;
  ReclaimPlannerThread& operator=(const ReclaimPlannerThread&) = delete;

 private:
  QueueManager* queue_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_QUEUE_WIRING_H_
