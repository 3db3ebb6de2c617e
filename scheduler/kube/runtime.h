// KubeRuntime: everything `gpusched serve --kube|--kubeconfig` adds to the
// extender, wired in one place so serve.cc stays small: the API client, the
// list+watch source feeding ClusterState (with the gang sizes objects
// declare and the deadlines of Jobs), the bind write-back, the evictor,
// Events, and (with --leader-elect) the Lease elector.
//
// Readiness: the service is ready (filter and bind answer) only while the
// source has synced and, with leader election, this replica is the leader.
// A follower answers filter and bind with an Error.
//
// Created once at start-up by serve; its accessors are thread-safe. The
// destructor stops the elector (releasing the lease) and the source.
#ifndef GPUSCHED_KUBE_RUNTIME_H_
#define GPUSCHED_KUBE_RUNTIME_H_

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/kube_source.h"
#include "scheduler/kube/kube_writer.h"
#include "scheduler/kube/leader_elector.h"

namespace gpusched::kube {

struct KubeOptions {
  bool in_cluster = false;  // --kube
  std::string kubeconfig;   // --kubeconfig PATH
  std::string context;      // --context NAME (kubeconfig)
  ClientOptions client;
  SourceOptions source;
  WriteOptions write;
  bool leader_elect = false;
  LeaderOptions leader;
};

// Flag names serve accepts for this (valued, then switches).
std::set<std::string> KubeValuedFlags();
std::set<std::string> KubeSwitchFlags();
// True if the flags ask for a Kubernetes cluster source.
bool KubeRequested(const std::function<bool(const std::string&)>& has);
// Builds options from serve's flags; `get(name)` is "" when absent.
absl::StatusOr<KubeOptions> KubeOptionsFromFlags(
    const std::function<bool(const std::string&)>& has,
    const std::function<std::string(const std::string&)>& get);
// Parses "300s", "1500ms", "2m", or plain seconds.
absl::StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text);
// A client from --kube / --kubeconfig options.
absl::StatusOr<std::unique_ptr<KubeHttpClient>> MakeClient(const KubeOptions& options);

// The Event gpusched posts on a pod that no node passed in filter
// (RouteDeps::on_unplaced), reason kWaitingEventReason.
inline constexpr char kWaitingEventReason[] = "GpuschedWaiting";
// "Warning" when every node is FailedAndUnresolvable (nothing short of a
// change to the pod or the nodes helps); "Normal" when the pod waits (its
// queue, quota, gang, or GPUs in use).
std::string WaitingEventType(const FilterOutcome& out);
// The Event message: when every node failed with the same reason (the queue
// holds the pod back: quota, priority, gang), that reason; otherwise
// "gpusched: 0 of N nodes fit: <reason> (K nodes); ...", the most common
// reasons first, at most 1024 bytes.
std::string WaitingEventMessage(const ExtenderArgs& args, const FilterOutcome& out);

class KubeRuntime {
 public:
  ~KubeRuntime();
  bool leader() const;
  bool synced() const { return source_->synced(); }
  // RouteDeps::ready and ExtenderService::SetBindWriteBack.
  std::function<bool()> ReadyFn();
  std::function<std::string(const BindingArgs&, DeviceMask)> AfterBindFn();
  // RouteDeps::on_unplaced: a rate-limited waiting Event on the pod.
  std::function<void(const ExtenderArgs&, const FilterOutcome&)> UnplacedFn();
  ClusterWriter* writer() { return evictor_.get(); }
  EventRecorder* events() { return events_.get(); }
  KubeClusterSource* source() { return source_.get(); }
  KubeHttpClient* client() { return client_.get(); }
  // gpusched's own namespace (--lease-namespace, else $POD_NAMESPACE, else
  // gpusched-system): where its Lease and runtime history live.
  const std::string& own_namespace() const { return own_namespace_; }

 private:
  friend absl::StatusOr<std::unique_ptr<KubeRuntime>> StartKube(const KubeOptions&, ClusterState*,
                                                                ExtenderService*, Metrics*);
  KubeRuntime() = default;
  void UpdateReady();

  bool leader_elect_ = false;
  std::string own_namespace_;
  ExtenderService* service_ = nullptr;
  std::unique_ptr<KubeHttpClient> client_;
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<GangSizes> gang_sizes_;
  std::unique_ptr<JobDeadlines> jobs_;
  std::unique_ptr<KubeClusterSource> source_;
  std::unique_ptr<LeaderElector> elector_;
  std::unique_ptr<KubeBinder> binder_;
  std::unique_ptr<KubeEvictor> evictor_;
};

absl::StatusOr<std::unique_ptr<KubeRuntime>> StartKube(const KubeOptions& options,
                                                       ClusterState* state,
                                                       ExtenderService* service, Metrics* metrics);

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_RUNTIME_H_
