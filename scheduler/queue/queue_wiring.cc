#include "scheduler/queue/queue_wiring.h"

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

}  // namespace gpusched::queue
