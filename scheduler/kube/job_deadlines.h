// JobDeadlines: the deadlines of batch/v1 Jobs, kept current by list+watch
// of /apis/batch/v1/jobs (all namespaces), for runtime estimates: a pod
// whose controlling Job sets spec.activeDeadlineSeconds may run until the
// Job's status.startTime plus that (scheduler/queue/runtime_estimates.h).
// The source calls Fill on every pod before it enters ClusterState.
//
//  - A Reflector (reflector.h) lists and watches them: a paginated list
//    replaces the Jobs, a watch continues from the list's resourceVersion
//    with bookmarks; 410 Gone relists; errors back off exponentially.
//  - Jobs are optional: when the API refuses them (403: the RBAC does not
//    grant list/watch on jobs; 404), that is logged once, Fill fills
//    nothing (estimates fall back to the next source) and the list is tried
//    again every `refused_retry`.
//  - A Job that cannot be read (a field of the wrong type, a deadline that
//    is not positive) is skipped with its reason logged (once per Job and
//    reason): its pods get no deadline from it, nothing else changes.
//  - Only what estimates use is kept: namespace, name, uid, the deadline
//    and the start of Jobs that set a deadline (about 100 bytes a Job).
//  - `on_change` gets the "namespace/name" of the Jobs whose deadline,
//    start or uid changed (or that appeared or went), on the watch thread
//    with no lock held, never concurrently with itself, so the source can
//    re-fill those Jobs' pods.
//
// Thread-safe. Start spawns the thread; Stop (or the destructor) joins it.
#ifndef GPUSCHED_KUBE_JOB_DEADLINES_H_
#define GPUSCHED_KUBE_JOB_DEADLINES_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/model/pod.h"
#include "gpusched/util/metrics.h"
#include "scheduler/codec/job_codec.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/reflector.h"

namespace gpusched::kube {

// refused_retry: how soon a refused list (403/404) is asked again.
using JobDeadlinesOptions = ReflectorOptions;

class JobDeadlines {
 public:
  using OnChange = std::function<void(const absl::flat_hash_set<std::string>& jobs)>;

  JobDeadlines(KubeHttpClient* client, JobDeadlinesOptions options, Metrics* metrics);
  ~JobDeadlines();
  JobDeadlines(const JobDeadlines&) = delete;
  JobDeadlines& operator=(const JobDeadlines&) = delete;

  // Start once; Stop may be called more than once.
  void Start(OnChange on_change) ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Sets pod.job_deadline_s and pod.job_start_unix from the Job `job_name`
  // of pod.ns (its uid `job_uid` when the pod names one); both 0 when there
  // is no such Job, it sets no deadline, was skipped, or Jobs are not read.
  void Fill(const std::string& job_name, const std::string& job_uid, PodRequest& pod) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Jobs have been listed at least once since the last refusal.
  bool listed() const ABSL_LOCKS_EXCLUDED(mu_);
  // The last list was refused (403/404).
  bool refused() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Jobs = absl::flat_hash_map<std::string, codec::JobDeadline>;  // "ns/name" ->
  Reflector<codec::JobDeadline>::Hooks ReflectorHooks();
  // Keeps `job` if it sets a usable deadline (logs it if skipped).
  void Keep(codec::JobDeadline job, Jobs* jobs) ABSL_LOCKS_EXCLUDED(log_mu_);
  // A complete list.
  void Replace(std::vector<codec::JobDeadline> listed) ABSL_LOCKS_EXCLUDED(mu_);
  // One watch event's Job (`deleted`: it is gone).
  void Apply(const codec::JobDeadline& job, bool deleted) ABSL_LOCKS_EXCLUDED(mu_);
  void Refused(int status) ABSL_LOCKS_EXCLUDED(mu_);

  const JobDeadlinesOptions options_;
  Metrics* metrics_;
  OnChange on_change_;
  bool started_ = false;  // Start's caller only

  mutable absl::Mutex mu_;
  bool listed_ ABSL_GUARDED_BY(mu_) = false;
  bool refused_ ABSL_GUARDED_BY(mu_) = false;
  Jobs jobs_ ABSL_GUARDED_BY(mu_);
  absl::Mutex log_mu_;
  absl::flat_hash_map<std::string, std::string> skipped_ ABSL_GUARDED_BY(log_mu_);  // key -> why
  Reflector<codec::JobDeadline> reflector_;  // last: stops before the rest goes
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_JOB_DEADLINES_H_
