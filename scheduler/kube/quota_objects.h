// QuotaObjectWatcher: namespace GPU quotas from Kubernetes objects, kept
// current by list+watch: GPUQuota (gpusched.io/v1alpha1) and, for users of
// the capacity-scheduling plugin, ElasticQuota (scheduling.x-k8s.io/
// v1alpha1). Which object sets a namespace's quota, and what an invalid one
// does, is queue::ResolveQuotaObjects (scheduler/queue/quota_objects.h).
//
//  - Exactly one source at a time: while the GPUQuota CRD is installed the
//    objects are the source (`on_change` gets the resolution); while it is
//    not (discovery answers 404), `on_change` gets nullopt and the policy
//    file's quotas apply. Discovery is asked again every `discovery_retry`,
//    and a watch that answers 404 (the CRD was removed) goes back to it.
//    ElasticQuotas are read only while the GPUQuota CRD is installed.
//  - Reflector semantics per kind: a paginated list replaces that kind's
//    objects, a watch continues from the list's resourceVersion with
//    bookmarks; 410 Gone relists; errors back off exponentially.
//  - `on_change` runs on a watch thread, with no lock held, only when the
//    resolution changed, never concurrently with itself.
//  - settled(): both kinds have been discovered and, where served, listed
//    once. Until then the extender is not ready, so no pod is admitted
//    under the file's quotas moments before the objects replace them.
//
// Thread-safe. Start spawns one thread per kind; Stop (or the destructor)
// joins them.
#ifndef GPUSCHED_KUBE_QUOTA_OBJECTS_H_
#define GPUSCHED_KUBE_QUOTA_OBJECTS_H_

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/queue/quota_objects.h"

namespace gpusched::kube {

struct QuotaObjectsOptions {
  std::chrono::milliseconds discovery_retry{30000};
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds backoff_initial{250};
  std::chrono::milliseconds backoff_max{30000};
  std::chrono::milliseconds request_timeout{10000};
  int64_t page_size = 500;
};

class QuotaObjectWatcher {
 public:
  using OnChange = std::function<void(const std::optional<queue::ResolvedQuotas>&)>;

  QuotaObjectWatcher(KubeHttpClient* client, QuotaObjectsOptions options, Metrics* metrics);
  ~QuotaObjectWatcher();
  QuotaObjectWatcher(const QuotaObjectWatcher&) = delete;
  QuotaObjectWatcher& operator=(const QuotaObjectWatcher&) = delete;

  void Start(OnChange on_change) ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Every served kind listed and a resolution published (on_change
  // returned): from then on Current() is what the queue enforces.
  bool settled() const ABSL_LOCKS_EXCLUDED(mu_);
  // The last resolution published, set once on_change has returned (so it
  // is what the queue enforces; a call during a publication waits for it,
  // so it is never older than what the queue applies); nullopt: the CRD is
  // not installed, or nothing is settled yet.
  std::optional<queue::ResolvedQuotas> Current() const ABSL_LOCKS_EXCLUDED(mu_, publish_mu_);

 private:
  enum class Served : uint8_t { kUnknown, kYes, kNo };
  struct KindState {
    Served served = Served::kUnknown;
    bool listed = false;
    std::map<std::string, queue::QuotaObject> objects;  // "ns/name" ->
    StreamCanceller canceller;
  };

  void Run(queue::QuotaObjectKind kind);
  // One discovery; kUnknown on a transport or server error.
  Served Discover(queue::QuotaObjectKind kind);
  // Lists every page; false (and `*gone`, on 410) if it did not complete.
  bool List(queue::QuotaObjectKind kind, std::string* rv);
  // Watches from `*rv` until the stream ends; returns the HTTP status of
  // the failure (0: ended normally or an error logged, 404, 410).
  int Watch(queue::QuotaObjectKind kind, std::string* rv);
  void SetServed(queue::QuotaObjectKind kind, Served served) ABSL_LOCKS_EXCLUDED(mu_);
  void Publish() ABSL_LOCKS_EXCLUDED(mu_, publish_mu_);
  bool Sleep(std::chrono::milliseconds d) ABSL_LOCKS_EXCLUDED(mu_);
  KindState& State(queue::QuotaObjectKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KubeHttpClient* client_;
  const QuotaObjectsOptions options_;
  Metrics* metrics_;
  OnChange on_change_;
  std::array<std::thread, 2> threads_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::array<KindState, 2> kinds_ ABSL_GUARDED_BY(mu_);
  std::optional<queue::ResolvedQuotas> current_ ABSL_GUARDED_BY(mu_);
  bool applied_ ABSL_GUARDED_BY(mu_) = false;  // current_ set by a Publish
  mutable absl::Mutex publish_mu_;             // one on_change at a time, in order
  bool published_ ABSL_GUARDED_BY(publish_mu_) = false;
  std::optional<queue::ResolvedQuotas> last_ ABSL_GUARDED_BY(publish_mu_);
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_QUOTA_OBJECTS_H_
