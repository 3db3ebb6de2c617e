// QuotaStatusWriter: keeps each GPUQuota's status current (used, borrowed,
// lent and to whom, pending pods and GPUs, the head of the queue and why it
// waits, conditions Active and Valid), so a team reads its quota with
// `kubectl get gpuquota` and `kubectl describe`, no access to /debug needed.
//
// A background thread computes every GPUQuota's status each `period`
// (queue::QuotaObjectStatuses over the watcher's resolution and the
// queue's report), diffs it against what it wrote and merge-patches the
// status subresource of the objects whose status changed, at most `qps`
// patches per second. Only while `may_write` (the leader). A condition's
// lastTransitionTime changes only when its status flips. Failed patches
// are retried next period.
//
// Thread-safe. Created by serve when the objects are watched; joins its
// thread on destruction.
#ifndef GPUSCHED_KUBE_QUOTA_STATUS_H_
#define GPUSCHED_KUBE_QUOTA_STATUS_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/queue/queue_report.h"
#include "scheduler/queue/quota_objects.h"

namespace gpusched::kube {

class QuotaStatusWriter {
 public:
  struct Options {
    std::chrono::milliseconds period{2000};
    double qps = 10;
    int burst = 20;
  };
  struct Inputs {
    std::function<std::optional<queue::ResolvedQuotas>()> resolved;  // watcher's Current
    std::function<queue::QueueReport()> report;  // every namespace, its head listed
    std::function<bool()> may_write;             // the leader, synced
    std::function<std::string()> now_rfc3339;    // wall clock if unset
  };
  QuotaStatusWriter(KubeHttpClient* client, Inputs inputs, Options options, Metrics* metrics);
  ~QuotaStatusWriter();

  // Runs one round now and waits for it (tests); a no-op unless may_write.
  void RunOnce() ABSL_LOCKS_EXCLUDED(mu_, round_mu_);

 private:
  struct Written {
    queue::QuotaObjectStatus status;
    std::vector<std::string> since;
  };
  void Loop();
  void Round() ABSL_LOCKS_EXCLUDED(mu_, round_mu_);
  std::string Now() const;

  KubeHttpClient* client_;
  Inputs in_;
  const Options options_;
  Metrics* metrics_;
  TokenBucket bucket_;
  absl::Mutex round_mu_;                                               // one round at a time
  std::map<std::string, Written> written_ ABSL_GUARDED_BY(round_mu_);  // "ns/name" ->
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_QUOTA_STATUS_H_
