#include "scheduler/queue/queue_wiring.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <iterator>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpusched/util/strings.h"

namespace gpusched::queue {

QueueOptions QueueOptionsFrom(const SchedulerConfig& config) {
  QueueOptions o;
  o.quotas = config.quotas;
  o.reclaim = config.reclaim;
  o.gang = config.gang;
  return o;
}

QueueOptions ServingQueueOptions(const SchedulerConfig& config) {
  QueueOptions o = QueueOptionsFrom(config);
  o.reclaim_plan_budget_ms = 5;
  o.reclaim_choice_hold_us = 250;
  o.yield_before_background_holds = true;
  return o;
}

std::unique_ptr<QueueManager> InstallQueue(ExtenderService* service, ClusterState* state,
                                           ClusterWriter* writer, const SchedulerConfig& config,
                                           Metrics* metrics) {
  QueueDeps deps;
  deps.state = state;
  deps.writer = writer;
  deps.framework = [service] { return service->framework(); };
  deps.metrics = metrics;
  auto queue = std::make_unique<QueueManager>(std::move(deps), ServingQueueOptions(config));
  queue->Resync();
  if (metrics != nullptr) {
    metrics->AddCollector([q = queue.get()](GaugeWriter& w) { q->CollectMetrics(w); });
  }
  service->SetGate(queue.get());
  return queue;
}

QueueConfigApplier::QueueConfigApplier(QueueManager* queue, const SchedulerConfig& file,
                                       std::string file_label,
                                       std::function<void(const std::string&)> log)
    : queue_(queue), file_label_(std::move(file_label)), log_(std::move(log)), file_(file) {}

QueueOptions QueueConfigApplier::OptionsFor(const SchedulerConfig& file,
                                            const std::string& file_label,
                                            const std::optional<ResolvedQuotas>& objects) {
  QueueOptions o = ServingQueueOptions(file);
  if (!objects) {
    o.quota_source = file.quotas.enabled
                         ? StrCat("policy file ", file_label)
                         : StrCat("none (policy file ", file_label, " has no quotas section)");
    return o;
  }
  o.quota_source = "GPUQuota objects (gpusched.io/v1alpha1)";
  o.quotas.enabled = true;
  o.quotas.namespaces = objects->namespaces;
  if (!file.quotas.enabled) {
    o.quotas.default_quota = NamespaceQuota{};
    o.quotas.default_quota.gpus.limit = kUnlimitedGpus;
  }
  return o;
}

void QueueConfigApplier::SetFile(const SchedulerConfig& file) {
  absl::MutexLock l(&mu_);
  file_ = file;
  ApplyLocked();
}

void QueueConfigApplier::SetObjects(std::optional<ResolvedQuotas> objects) {
  absl::MutexLock l(&mu_);
  objects_ = std::move(objects);
  ApplyLocked();
}

std::string QueueConfigApplier::source() const {
  absl::MutexLock l(&mu_);
  return source_;
}

void QueueConfigApplier::ApplyLocked() {
  QueueOptions o = OptionsFor(file_, file_label_, objects_);
  if (o.quota_source != source_ && log_) {
    std::string line = StrCat("quotas: source is now ", o.quota_source);
    if (objects_ && !file_.quotas.namespaces.empty()) {
      StrAppend(&line, "; the policy file's quotas.namespaces (", file_.quotas.namespaces.size(),
                " entries) is not used while GPUQuota objects are the source");
    }
    log_(line);
  }
  source_ = o.quota_source;
  queue_->SetOptions(std::move(o));
}

TickThread::TickThread(QueueManager* queue, std::chrono::milliseconds every)
    : thread_([this, queue, every] {
        while (true) {
          {
            absl::MutexLock l(&mu_);
            if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(every))) return;
          }
          queue->Tick();
        }
      }) {}

TickThread::~TickThread() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

SourceSyncThread::SourceSyncThread(QueueManager* queue, const ClusterState* state)
    : thread_([this, queue, state] {
        while (!stopping_.load(std::memory_order_acquire)) {
          if (!state->AwaitPodChanges(kPoll)) continue;
          // A change made inside a queue hold (a bind's assumption) is taken
          // as that hold ends: no hold of its own.
          absl::SleepFor(kSettle);
          if (state->PodChangesPending()) queue->SyncWithCluster();
        }
      }) {}

SourceSyncThread::~SourceSyncThread() {
  stopping_.store(true, std::memory_order_release);
  thread_.join();
}

EstimateThread::EstimateThread(QueueManager* queue, std::chrono::milliseconds first,
                               std::chrono::milliseconds every, std::chrono::milliseconds budget)
    : thread_([this, queue, first, every, budget] {
        for (auto wait = first;; wait = every) {
          {
            absl::MutexLock l(&mu_);
            if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(wait))) return;
          }
          queue->RefreshEstimates(budget,
                                  [this](IdleRunner::Job simulate) { simulation_.Run(simulate); });
        }
      }) {}

EstimateThread::~EstimateThread() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

}  // namespace gpusched::queue

namespace gpusched::queue {

void LowerToIdlePriority() {
  // SCHED_IDLE (Linux; any thread may lower itself to it): a thread of any
  // other policy that wakes takes the core at once. A nice-19 thread, once
  // it has the core, keeps it for its slice, up to a scheduler tick of
  // several milliseconds, while a request's thread waits for it.
  sched_param param{};
  param.sched_priority = 0;
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) != 0) {
    // Linux: a thread's nice value is its own; 19 is the lowest priority.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  }
}

IdleRunner::IdleRunner()
    : thread_([this] {
        LowerToIdlePriority();
        // As the reclaim planner's: the core is handed over every 200 us.
        YieldPoint yield(std::chrono::microseconds(200));
        while (true) {
          std::optional<Job> job;
          {
            absl::MutexLock l(&mu_);
            mu_.Await(absl::Condition(this, &IdleRunner::WorkOrStopLocked));
            if (!job_.has_value()) return;  // stopping, nothing left
            job.emplace(*job_);
          }
          (*job)(&yield);
          absl::MutexLock l(&mu_);
          job_.reset();
        }
      }) {}

IdleRunner::~IdleRunner() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void IdleRunner::Run(Job job) {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(this, &IdleRunner::DoneLocked));  // one caller at a time
  job_.emplace(job);
  mu_.Await(absl::Condition(this, &IdleRunner::DoneLocked));
}

ReclaimPlannerThread::ReclaimPlannerThread(QueueManager* queue) : queue_(queue) {
  queue_->AttachPlanner(true);
  thread_ = std::thread([this] {
    LowerToIdlePriority();
    while (true) {
      {
        absl::MutexLock l(&mu_);
        if (stopping_) return;
      }
      queue_->PlanReclaims(absl::Milliseconds(100));
    }
  });
}

ReclaimPlannerThread::~ReclaimPlannerThread() {
  queue_->AttachPlanner(false);
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

}  // namespace gpusched::queue

namespace gpusched::queue {

AsyncClusterWriter::AsyncClusterWriter(ClusterWriter* inner)
    : inner_(inner), thread_([this] { Run(); }) {}

AsyncClusterWriter::~AsyncClusterWriter() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

absl::Status AsyncClusterWriter::Evict(const PodRequest& pod, const std::string& reason) {
  absl::MutexLock l(&mu_);
  queue_.emplace_back(pod, reason);
  return absl::OkStatus();
}

bool AsyncClusterWriter::AwaitSent(std::chrono::milliseconds within) {
  absl::MutexLock l(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !sending_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), absl::FromChrono(within));
}

void AsyncClusterWriter::Drain() {
  absl::MutexLock l(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !sending_; };
  mu_.Await(absl::Condition(&idle));
}

void AsyncClusterWriter::Run() {
  while (true) {
    std::vector<std::pair<PodRequest, std::string>> batch;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and everything handed over is sent
      // Everything handed over so far, together (a burst of evictions is
      // one commit for a writer that applies them itself).
      batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
      sending_ = true;
    }
    inner_->EvictAll(batch);  // the wrapped writer reports failures
    absl::MutexLock l(&mu_);
    sending_ = false;
  }
}

}  // namespace gpusched::queue
