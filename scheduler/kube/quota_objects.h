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
//  - A Reflector (reflector.h) per kind, discovery as its gate: a
//    paginated list replaces that kind's objects, a watch continues from
//    the list's resourceVersion with bookmarks; 410 Gone relists; errors
//    back off exponentially.
//  - `on_change` runs on a watch thread, with no lock held, only when the
//    resolution changed, never concurrently with itself.
//  - settled(): both kinds have been discovered and, where served, listed
//    once. Until then the extender is not ready, so no pod is admitted
//    under the file's quotas moments before the objects replace them.
//
// Thread-safe. Start (once) spawns one thread per kind; Stop (or the
// destructor) joins them.
#ifndef GPUSCHED_KUBE_QUOTA_OBJECTS_H_
#define GPUSCHED_KUBE_QUOTA_OBJECTS_H_

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/reflector.h"
#include "scheduler/queue/quota_objects.h"

namespace gpusched::kube {

// The reflectors' options (refused_retry unused: a refused list backs
// off), and how often discovery is asked again while the CRD is not
// installed.
struct QuotaObjectsOptions : ReflectorOptions {
  std::chrono::milliseconds discovery_retry{30000};
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
  };

  std::unique_ptr<Reflector<queue::QuotaObject>> NewReflector(KubeHttpClient* client,
                                                              queue::QuotaObjectKind kind);
  // Before each list: discovery (and its publication).
  ReflectorGate Gate(queue::QuotaObjectKind kind) ABSL_LOCKS_EXCLUDED(mu_);
  // One discovery; kUnknown on a transport or server error.
  Served Discover(queue::QuotaObjectKind kind);
  void Replace(queue::QuotaObjectKind kind, std::vector<queue::QuotaObject> items)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Apply(queue::QuotaObjectKind kind, codec::WatchEvent::Type type, queue::QuotaObject object)
      ABSL_LOCKS_EXCLUDED(mu_);
  void SetServed(queue::QuotaObjectKind kind, Served served) ABSL_LOCKS_EXCLUDED(mu_);
  void Publish() ABSL_LOCKS_EXCLUDED(mu_, publish_mu_);
  KindState& State(queue::QuotaObjectKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KubeHttpClient* client_;
  const QuotaObjectsOptions options_;
  Metrics* metrics_;
  OnChange on_change_;
  bool started_ = false;  // Start's caller only

  mutable absl::Mutex mu_;
  std::array<KindState, 2> kinds_ ABSL_GUARDED_BY(mu_);
  std::optional<queue::ResolvedQuotas> current_ ABSL_GUARDED_BY(mu_);
  bool applied_ ABSL_GUARDED_BY(mu_) = false;  // current_ set by a Publish
  mutable absl::Mutex publish_mu_;             // one on_change at a time, in order
  bool published_ ABSL_GUARDED_BY(publish_mu_) = false;
  std::optional<queue::ResolvedQuotas> last_ ABSL_GUARDED_BY(publish_mu_);
  // Last: they stop before the rest goes.
  std::array<std::unique_ptr<Reflector<queue::QuotaObject>>, 2> reflectors_;
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_QUOTA_OBJECTS_H_
