#include "scheduler/queue/queue_wiring.h"

namespace gpusched::queue {

QueueOptions QueueOptionsFrom(const SchedulerConfig& config) {
  QueueOptions o;
  o.quotas = config.quotas;
  o.reclaim = config.reclaim;
  o.gang = config.gang;
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
  auto queue = std::make_unique<QueueManager>(std::move(deps), QueueOptionsFrom(config));
  queue->Resync();
  if (metrics != nullptr) {
    metrics->AddCollector([q = queue.get()](GaugeWriter& w) { q->CollectMetrics(w); });
  }
  service->SetGate(queue.get());
  return queue;
}

std::function<void()> QueueTicker(QueueManager* queue) {
  return [queue] { queue->Tick(); };
}

}  // namespace gpusched::queue
