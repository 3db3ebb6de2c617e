// KubeClusterSource: ClusterState fed by list+watch of Nodes and Pods (all
// namespaces) from the API server, with client-go reflector semantics:
//
//  - a full, paginated (limit/continue) list of both kinds replaces the state
//    (ClusterState::Reset), then one watch per kind continues from the list's
//    resourceVersion with bookmarks and a server-side timeout;
//  - a watch that ends or breaks is resumed from the last resourceVersion
//    seen (events or bookmarks), with exponential backoff and jitter on
//    errors (5xx, 429, transport);
//  - 410 Gone (HTTP or a watch ERROR event) means the version is too old:
//    on_synced(false), then a full relist; no decision is made on the stale
//    view meanwhile.
//
// Binds in flight: the bind write-back registers the pod it assumed
// (NoteAssumed). Until the watch shows the pod bound (or deleted), pod
// events and relists that still show it pending keep the assumption, so the
// devices cannot be handed out twice in between.
//
// Bad gpu-ids annotations (undecodable, or naming devices the node does not
// have) are reported once per pod and value through `on_problem` (reason
// GpuIdsUnusable); the state fails closed on them (see cluster_state.h).
// A bound, unfinished pod that does not decode (an invalid gpusched
// annotation, say) is never skipped: it enters the state as what it holds,
// its requests with devices unknown, so its GPUs count against its
// namespace and its node and are never counted free; it is logged, counted
// in gpusched_kube_decode_errors_total and reported (reason
// PodUndecodable) once per pod and error.
//
// Threading: Start spawns a list thread and one watch thread per kind; all
// public methods are thread-safe. Stop joins them.
#ifndef GPUSCHED_KUBE_KUBE_SOURCE_H_
#define GPUSCHED_KUBE_KUBE_SOURCE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/util/metrics.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/gang_objects.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/job_deadlines.h"
#include "scheduler/kube/pod_jobs.h"

namespace gpusched::kube {

struct SourceOptions {
  // Items per list request. Every page is a request under the client's QPS
  // limit (50/s after a burst of 100 by default): pages of 5,000 list
  // 200,000 pods in 40 requests, inside the burst, where pages of 500 took
  // 400 and about 7 s of waiting on the limit. (One unpaginated answer is no
  // better: decoding 300 MB at once cost more than the 40 pages together.)
  int64_t page_size = 5000;
  int watch_timeout_seconds = 300;  // randomised in [t, 2t) per watch, as client-go does
  std::chrono::milliseconds backoff_initial{250};
  std::chrono::milliseconds backoff_max{30000};
  std::chrono::milliseconds list_timeout{60000};
};

// A pod that holds GPUs under a gpusched.io/gpu-ids annotation, as
// KubeClusterSource checks it against its node once the node is known.
struct IdsCheck {
  std::string uid, ns, name, node;
  std::string raw;         // the annotation as written
  bool decodable = false;  // it decoded to `ids`
  DeviceMask ids = 0;
};

// Called for a pod whose objects gpusched cannot fully honour: (pod, Event
// reason, why). On the source's threads.
using PodProblemReporter =
    std::function<void(const PodRequest&, const std::string&, const std::string&)>;
inline constexpr char kGpuIdsUnusableReason[] = "GpuIdsUnusable";
inline constexpr char kPodUndecodableReason[] = "PodUndecodable";

class KubeClusterSource final : public ClusterSource {
 public:
  KubeClusterSource(KubeHttpClient* client, SourceOptions options, Metrics* metrics,
                    PodProblemReporter on_problem = nullptr);
  ~KubeClusterSource() override;

  // Returns at once; the first list happens on the source's thread.
  absl::Status Start(ClusterState* state, std::function<void(bool)> on_synced) override;
  void Stop() override;

  bool synced() const { return synced_.load(); }
  int64_t relists() const { return relists_.load(); }

  // The bind write-back's assumption of `bound` (node_name and gpu_ids set).
  void NoteAssumed(const PodRequest& bound) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetAssumed(const std::string& uid) ABSL_LOCKS_EXCLUDED(mu_);
  // True if the API (as watched) shows the pod bound to `node`.
  bool ApiBound(const std::string& uid, const std::string& node) const ABSL_LOCKS_EXCLUDED(mu_);

  // Gang sizes declared by objects (PodGroups, JobSets, ...): every pod is
  // filled from `sizes` before it enters the state. Set before Start.
  void set_gang_sizes(GangSizes* sizes) { gang_sizes_ = sizes; }
  // Re-fills the gang of every pod the API shows whose size an object
  // declares (GangSizes' on_change).
  void RefillGangs() ABSL_LOCKS_EXCLUDED(mu_);
  // Jobs' deadlines (runtime estimates): every pod a Job controls is filled
  // from `jobs` before it enters the state. Set before Start.
  void set_job_deadlines(JobDeadlines* jobs) { jobs_ = jobs; }
  // Re-fills the pods of the Jobs `jobs` ("namespace/name"; JobDeadlines'
  // on_change).
  void RefillJobs(const absl::flat_hash_set<std::string>& jobs) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Watch;
  void Run();
  bool ListAll(std::string* node_rv, std::string* pod_rv);
  // One full list into the state, pods merged with this process's
  // assumptions; consumes the pages (read their resourceVersions first).
  void InstallList(codec::ListPage nodes, std::vector<codec::ListPage> pods)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every page of one list, in order.
  absl::StatusOr<std::vector<codec::ListPage>> List(codec::ObjectKind kind);
  absl::StatusOr<HttpResult> FetchPage(codec::ObjectKind kind, const std::string& cont);
  void WatchLoop(codec::ObjectKind kind, std::string rv, Watch* w);
  // Applies watch events of pods in order, in one commit; empties `events`.
  void ApplyPods(std::vector<codec::WatchEvent>& events) ABSL_LOCKS_EXCLUDED(mu_);
  // What one event changes in the cluster state (nullopt: nothing, an
  // undecodable pod keeps its last version).
  std::optional<ClusterState::PodUpdate> PodUpdateLocked(codec::WatchEvent& ev)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyNode(codec::WatchEvent& ev);
  void CheckIds(const IdsCheck& c) ABSL_LOCKS_EXCLUDED(report_mu_);
  // Logs, counts and reports a held pod that did not decode, once per pod
  // and error.
  void ReportUndecodable(const codec::PodItem& item) ABSL_LOCKS_EXCLUDED(report_mu_);
  // True the first time `key` is seen.
  bool FirstReport(const std::string& key) ABSL_LOCKS_EXCLUDED(report_mu_);
  PodRequest Merge(const PodRequest& api, const PodRequest& assumed) const;
  // Fills `item.pod` from its Job and remembers the Job of the pod.
  void FillJobLocked(codec::PodItem& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sleeps up to `d`; returns false if stopping or a relist was requested.
  bool Sleep(std::chrono::milliseconds d) ABSL_LOCKS_EXCLUDED(ctl_mu_);
  void RequestRelist(const char* why) ABSL_LOCKS_EXCLUDED(ctl_mu_);
  std::chrono::milliseconds Jitter(std::chrono::milliseconds d);

  KubeHttpClient* client_;
  const SourceOptions options_;
  Metrics* metrics_;
  PodProblemReporter on_problem_;
  GangSizes* gang_sizes_ = nullptr;
  JobDeadlines* jobs_ = nullptr;
  ClusterState* state_ = nullptr;
  std::function<void(bool)> on_synced_;

  std::atomic<bool> synced_{false};
  std::atomic<int64_t> relists_{0};
  std::thread thread_;

  mutable absl::Mutex ctl_mu_;
  bool stopping_ ABSL_GUARDED_BY(ctl_mu_) = false;
  bool relist_ ABSL_GUARDED_BY(ctl_mu_) = false;
  Watch* watches_[2] ABSL_GUARDED_BY(ctl_mu_) = {nullptr, nullptr};

  mutable absl::Mutex mu_;  // serialises pod updates against assumptions
  absl::flat_hash_map<std::string, PodRequest> assumed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> api_node_ ABSL_GUARDED_BY(mu_);  // uid -> nodeName
  // Pods a Job controls, while jobs_ is set.
  PodJobs pod_job_ ABSL_GUARDED_BY(mu_);

  absl::Mutex report_mu_;
  absl::flat_hash_set<std::string> reported_ ABSL_GUARDED_BY(report_mu_);
  absl::Mutex rng_mu_;
  uint64_t rng_ ABSL_GUARDED_BY(rng_mu_) = 0x9e3779b97f4a7c15ULL;
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_KUBE_SOURCE_H_
