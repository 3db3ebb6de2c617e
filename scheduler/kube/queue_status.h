// QueueStatusPublisher: keeps the annotations gpusched.io/queue-position and
// gpusched.io/queue-reason current on pending pods, so a user who may read
// their pods (no admin rights, no access to /debug) sees where each waits
// and why: `kubectl get pod -o yaml`, or `gpusched queue` / `kubectl
// gpusched queue`.
//
// A background thread pulls the queue's positions every `period`, diffs them
// against what it wrote and merge-patches the pods whose text changed, at
// most `qps` patches per second. Positions past `exact_up_to` are written in
// buckets of a hundred ("101+", "201+"), so a bind at the head of a deep
// queue does not rewrite every pod behind it. The estimated start
// (gpusched.io/estimated-start, RFC 3339) is written with them, and again
// only when it moves by more than StartMoved's margin. Only while `may_write` (the
// leader). Patches are best effort: a failed one is retried next period.
//
// Thread-safe. Created by the kube wiring in serve; joins its thread on
// destruction.
#ifndef GPUSCHED_KUBE_QUEUE_STATUS_H_
#define GPUSCHED_KUBE_QUEUE_STATUS_H_

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/queue/queue_report.h"

namespace gpusched::kube {

class QueueStatusPublisher {
 public:
  struct Options {
    std::chrono::milliseconds period{5000};
    double qps = 20;
    int burst = 40;
    int32_t exact_up_to = 100;  // positions written exactly up to this
    int32_t explained = 20;     // pods per namespace with a full reason
  };
  // `positions(explained)`: QueueManager::Positions.
  QueueStatusPublisher(KubeHttpClient* client,
                       std::function<std::vector<queue::QueuedPod>(int32_t)> positions,
                       std::function<bool()> may_write, Options options, Metrics* metrics);
  ~QueueStatusPublisher();

  // The annotation texts for a pod at `position` with `reason`.
  static std::pair<std::string, std::string> Texts(const queue::QueuedPod& pod,
                                                   int32_t exact_up_to);
  // Whether an estimated start (unix seconds, -1: none) moved enough from
  // the one written to be written again: to or from none, or by more than
  // max(5 min, a tenth of the time still to wait).
  static bool StartMoved(int64_t written, int64_t estimate, int64_t now_s);
  // Runs one round now and waits for it (tests).
  void RunOnce() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();
  void Round();

  KubeHttpClient* client_;
  std::function<std::vector<queue::QueuedPod>(int32_t)> positions_;
  std::function<bool()> may_write_;
  const Options options_;
  Metrics* metrics_;
  TokenBucket bucket_;
  absl::Mutex round_mu_;  // one round at a time
  // uid -> the (position, reason) texts and the estimated start last written.
  struct Written {
    std::pair<std::string, std::string> texts;
    int64_t start = -1;
  };
  absl::flat_hash_map<std::string, Written> written_ ABSL_GUARDED_BY(round_mu_);
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_QUEUE_STATUS_H_
