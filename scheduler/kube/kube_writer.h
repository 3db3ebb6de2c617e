// Writes to the API server on gpusched's behalf:
//
//  - EventRecorder: core/v1 Events on pods (waiting, preemption, bad
//    annotations), sent by a background thread; rate-limited per pod and
//    reason and globally; dropped (and counted) rather than blocking callers.
//    Only pods the cluster source shows get Events (Options::shown): a pod
//    named only in an extender request (anyone may send one) gets none.
//  - KubeBinder: the bind write-back run after the in-memory assumption:
//    PATCH the pod's gpusched.io/gpu-ids, then POST pods/binding. A 409 that
//    says the pod is already on the same node is success (a retried bind
//    whose first response was lost); a lost response is resolved by reading
//    the pod back. Only the leader writes.
//  - KubeEvictor: ClusterWriter over policy/v1 Eviction; 429 (a
//    PodDisruptionBudget forbids it now) is ResourceExhausted for the caller
//    to retry later; 404 means already gone.
//
// All three are thread-safe.
#ifndef GPUSCHED_KUBE_KUBE_WRITER_H_
#define GPUSCHED_KUBE_KUBE_WRITER_H_

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/extender_args.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/kube_source.h"

namespace gpusched::kube {

class EventRecorder {
 public:
  struct Options {
    std::chrono::seconds per_pod_interval{60};  // same pod+reason at most this often
    double qps = 2;
    int burst = 25;
    size_t max_queue = 1000;
    std::string instance = "gpusched";  // reportingInstance
    // Whether the cluster source shows `pod` (same uid, namespace and
    // name). Unset: every pod is (tests of the recorder alone).
    std::function<bool(const PodRequest&)> shown;
  };
  EventRecorder(KubeHttpClient* client, Options options, Metrics* metrics);
  ~EventRecorder();

  // type: "Normal" or "Warning". Never blocks on the network.
  void Record(const PodRequest& pod, std::string type, std::string reason, std::string message)
      ABSL_LOCKS_EXCLUDED(mu_);
  // As Record, but calls `message` only when the Event is not rate-limited
  // (for messages that cost something to build).
  void RecordLazy(const PodRequest& pod, std::string type, std::string reason,
                  absl::FunctionRef<std::string()> message) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the queue is empty (tests).
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  KubeHttpClient* client_;
  const Options options_;
  Metrics* metrics_;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);  // "ns\nbody"
  absl::flat_hash_map<std::string, std::chrono::steady_clock::time_point> last_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  TokenBucket bucket_;
  std::thread thread_;
};

struct WriteOptions {
  int attempts = 3;  // per API call, on 429/5xx/transport errors
  std::chrono::milliseconds backoff{100};
  std::chrono::milliseconds timeout{2000};  // per API call (kube-scheduler waits 5 s in all)
};

class KubeBinder {
 public:
  KubeBinder(KubeHttpClient* client, KubeClusterSource* source, ClusterState* state,
             std::function<bool()> may_write, WriteOptions options, Metrics* metrics);

  // ExtenderService::SetBindWriteBack: "" or the error that rolls the
  // assumption back.
  std::string AfterBind(const BindingArgs& args, DeviceMask devices);

 private:
  std::string WriteBack(const PodRequest& pod, const std::string& node, DeviceMask devices);
  // Calls `fn` until it returns a status that is not retryable.
  absl::StatusOr<HttpResult> Retry(const std::function<absl::StatusOr<HttpResult>()>& fn);

  KubeHttpClient* client_;
  KubeClusterSource* source_;
  ClusterState* state_;
  std::function<bool()> may_write_;
  const WriteOptions options_;
  Metrics* metrics_;
};

class KubeEvictor final : public ClusterWriter {
 public:
  KubeEvictor(KubeHttpClient* client, std::function<bool()> may_write, WriteOptions options,
              Metrics* metrics, EventRecorder* events);
  absl::Status Evict(const PodRequest& pod, const std::string& reason) override;

 private:
  KubeHttpClient* client_;
  std::function<bool()> may_write_;
  const WriteOptions options_;
  Metrics* metrics_;
  EventRecorder* events_;
};

// "/api/v1/namespaces/NS/pods/NAME" (+ "/" + sub if given).
std::string PodPath(std::string_view ns, std::string_view name, std::string_view sub = "");

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_KUBE_WRITER_H_
