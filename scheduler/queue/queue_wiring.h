// Wiring of the queue manager into a running extender (gpusched serve):
// options from the config file, the gate, the quota and queue gauges, and
// the periodic tick. Called once at start-up by the serve command and on
// every config reload (SetOptions). Thread-safe as QueueManager.
#ifndef GPUSCHED_QUEUE_QUEUE_WIRING_H_
#define GPUSCHED_QUEUE_QUEUE_WIRING_H_

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/core/config.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/util/metrics.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {

QueueOptions QueueOptionsFrom(const SchedulerConfig& config);
// QueueOptionsFrom plus what only a serving process sets: a wall-clock
// budget for the tick's reclaim planning (QueueOptions::reclaim_plan_budget_ms).
QueueOptions ServingQueueOptions(const SchedulerConfig& config);

// Returns a QueueManager installed as `service`'s gate, its queue filled from
// `state`, its gauges added to `metrics`. `writer` (may be null) receives
// reclaim and over-limit evictions. The manager must outlive the service.
std::unique_ptr<QueueManager> InstallQueue(ExtenderService* service, ClusterState* state,
                                           ClusterWriter* writer, const SchedulerConfig& config,
                                           Metrics* metrics);

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

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_QUEUE_WIRING_H_
