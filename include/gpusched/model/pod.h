// PodRequest: what one pod asks of the GPU scheduler, decoded from a v1.Pod
// by the codec (scheduler/codec) and consumed by policies, the queue and the
// simulator. Pure value type; no JSON. Thread-compatible.
#ifndef GPUSCHED_MODEL_POD_H_
#define GPUSCHED_MODEL_POD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/model/topology.h"

namespace gpusched {

// Pod annotations understood by gpusched (documented in the README).
inline constexpr char kAnnotationGpuModel[] = "gpusched.io/gpu-model";
inline constexpr char kAnnotationGpuMemory[] = "gpusched.io/gpu-memory";
inline constexpr char kAnnotationTopology[] = "gpusched.io/topology";
inline constexpr char kAnnotationGpuMilli[] = "gpusched.io/gpu-milli";
inline constexpr char kAnnotationGpuIds[] = "gpusched.io/gpu-ids";
inline constexpr char kAnnotationGang[] = "gpusched.io/gang";
inline constexpr char kAnnotationGangSize[] = "gpusched.io/gang-size";
inline constexpr char kResourceGpu[] = "nvidia.com/gpu";
// A gang's topology request (docs/queue.md, "Topology-aware gangs"): the
// value is a level, a node-label key of the policy file's
// gang.topologyLevels.
inline constexpr char kAnnotationTopologyRequired[] = "gpusched.io/topology-required";
inline constexpr char kAnnotationTopologyPreferred[] = "gpusched.io/topology-preferred";
inline constexpr char kAnnotationKueueRequired[] = "kueue.x-k8s.io/podset-required-topology";
inline constexpr char kAnnotationKueuePreferred[] = "kueue.x-k8s.io/podset-preferred-topology";
inline constexpr char kAnnotationKueueUnconstrained[] =
    "kueue.x-k8s.io/podset-unconstrained-topology";
// Runtime estimates (scheduler/queue/runtime_estimates.h): the user's
// expected runtime (a duration, "2h30m"), and the estimated start gpusched
// writes on waiting pods (RFC 3339).
inline constexpr char kAnnotationExpectedRuntime[] = "gpusched.io/expected-runtime";
inline constexpr char kAnnotationEstimatedStart[] = "gpusched.io/estimated-start";

enum class TopologyMode : uint8_t {
  kNone,             // devices chosen for packing only
  kNvlinkPreferred,  // default for multi-GPU pods: NVLink only scores
  kNvlinkRequired,   // every pair of the set must be NVLink-connected
};

enum class PodPhase : uint8_t { kPending, kRunning, kSucceeded, kFailed, kUnknown };

// The object that declares a gang's size when the pod does not carry it
// (docs/queue.md, "Gangs from framework labels"). The object lives in the
// pod's namespace; scheduler/kube reads it and fills PodRequest::gang_size.
enum class GangOwnerKind : uint8_t {
  kNone,
  kPodGroup,         // scheduling.x-k8s.io/v1alpha1 PodGroup (scheduler-plugins)
  kVolcanoPodGroup,  // scheduling.volcano.sh/v1beta1 PodGroup
  kJobSet,           // jobset.x-k8s.io/v1alpha2 JobSet (also a TrainJob's pods)
  kPyTorchJob,       // kubeflow.org/v1 PyTorchJob
  kMpiJob,           // kubeflow.org/v2beta1 MPIJob (mpi-operator)
};

// How a gang asks to be placed by network topology.
enum class TopologyRule : uint8_t {
  kNone,           // nothing asked
  kRequired,       // every member in one domain of the level
  kPreferred,      // one domain if one fits, else as few as possible
  kUnconstrained,  // asked explicitly for no constraint (Kueue)
};

// One source's topology request: a pod's annotations
// (PodRequest::topology_request) or its gang's Volcano PodGroup
// (PodRequest::group_topology). The queue resolves it against the
// configured levels (gpusched/model/topology_domains.h).
struct TopologyRequest {
  TopologyRule rule = TopologyRule::kNone;
  std::string level;  // a node-label key; empty when `tier` says
  int32_t tier = 0;   // a Volcano highestTierAllowed (> 0), or 0
  // Where it was read, for messages: an annotation, or
  // "PodGroup NAME spec.networkTopology".
  std::string source;
  // Not empty: the request is invalid (two annotations that disagree, an
  // empty level...), naming the annotations or field. The gang is not
  // placed until it is fixed.
  std::string error;
  bool operator==(const TopologyRequest&) const = default;
};

struct GangOwner {
  GangOwnerKind kind = GangOwnerKind::kNone;
  std::string name;
  bool operator==(const GangOwner&) const = default;
};

// PodRequest::gang_size of a gang whose size is not known: declared by an
// object not read yet, or by an invalid annotation or object
// (PodRequest::gang_size_reason says which). The pod belongs to a gang and
// must not be admitted (alone or otherwise) until the size is known; it
// waits outside its namespace's queue, holding no one back.
inline constexpr int32_t kGangSizeUnknown = -1;

// What the pod needs from GPUs on one node.
struct GpuRequest {
  int32_t count = 0;             // devices; 0 = the pod needs no GPU
  int32_t milli_per_gpu = 1000;  // < 1000 only with count == 1 (shared device)
  int64_t min_memory_mib = 0;    // per device
  // Allowed products (gpusched.io/gpu-model entries); empty = any.
  std::vector<std::string> models;
  TopologyMode topology = TopologyMode::kNvlinkPreferred;

  int64_t total_milli() const { return int64_t{count} * milli_per_gpu; }
  bool shared() const { return count == 1 && milli_per_gpu < 1000; }
};

struct PodRequest {
  std::string ns;
  std::string name;
  std::string uid;
  int32_t priority = 0;
  std::string priority_class;
  bool preempt_never = false;  // preemptionPolicy: Never
  int64_t creation_unix = 0;   // metadata.creationTimestamp, seconds
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  GpuRequest gpu;
  // gpusched.io/gang (namespace-scoped); when only gang-size is set, the name
  // of the Job that controls the pod. Declared by a framework instead, a
  // kind prefix and the group's name ("pg/llm", "jobset/llm").
  std::string gang;
  // Members that must be placed at once: gpusched.io/gang-size, or a
  // framework's minMember (smaller than the pod count for elastic gangs).
  // kGangSizeUnknown while gang_owner has not been read.
  int32_t gang_size = 0;
  GangOwner gang_owner;  // kind kNone when the size is on the pod
  // With gang_size kGangSizeUnknown: why, naming the annotation or object
  // ("annotation kueue.x-k8s.io/pod-group-total-count: 'abc' is not a
  // member count (1..100000)"); empty: the declaring object is not read yet.
  std::string gang_size_reason;
  // The gang's topology request from the pod's annotations, and from its
  // declaring object (a Volcano PodGroup's spec.networkTopology, filled in
  // by scheduler/kube with the size).
  TopologyRequest topology_request;
  TopologyRequest group_topology;
  // The workload the pod belongs to, whose GPU-seconds add up across its
  // pods and their replacements (attained-service ordering): its gang, else
  // its controlling Job; empty: the pod alone (WorkloadKey).
  std::string workload;
  // Binding state as the API server (or our own assumption) knows it.
  std::string node_name;
  PodPhase phase = PodPhase::kPending;
  bool has_gpu_ids = false;  // gpusched.io/gpu-ids present and valid
  DeviceMask gpu_ids = 0;
  // gpusched.io/gpu-ids-confirmed present and valid: the devices the node
  // agent read from the kubelet's PodResources. Shown (/debug/pods), never
  // counted: the agent corrects gpu_ids itself, and a record it has not
  // confirmed yet holds its devices all the same.
  bool has_gpu_ids_confirmed = false;
  DeviceMask gpu_ids_confirmed = 0;
  int64_t start_unix = 0;  // status.startTime, seconds
  bool deleting = false;   // metadata.deletionTimestamp set
  // A gang reservation holder: devices the queue manager holds for a gang's
  // members, not a workload. Set only by the queue manager (never by a
  // decoder: no pod the cluster source shows is one).
  bool reservation = false;
  // Runtime estimate inputs, read by scheduler/queue/runtime_estimates.h
  // (never judged by the decoder: a bad value falls back to the next
  // source there): spec.activeDeadlineSeconds (0: unset), the raw text of
  // gpusched.io/expected-runtime ("": unset), and for a finished pod the
  // latest containerStatuses[].state.terminated.finishedAt (0: unknown).
  int64_t active_deadline_s = 0;
  std::string expected_runtime;
  int64_t finish_unix = 0;
  // The controlling batch/v1 Job's spec.activeDeadlineSeconds (0: no Job,
  // no deadline, or the Job not read) and status.startTime (0: not started
  // or suspended), filled in by scheduler/kube from the Job object (never by
  // the pod decoder): the Job's pods may run until job_start_unix +
  // job_deadline_s.
  int64_t job_deadline_s = 0;
  int64_t job_start_unix = 0;

  // True if the pod holds its GPUs on a node: bound and not finished.
  bool HoldsGpus() const {
    return !node_name.empty() && phase != PodPhase::kSucceeded && phase != PodPhase::kFailed;
  }
  std::string Key() const { return ns + "/" + name; }
  // The name attained service is counted under (namespace-scoped).
  const std::string& WorkloadKey() const { return workload.empty() ? name : workload; }
  // Why a pod of a gang of unknown size is not admitted (the filter's
  // reason on every node).
  std::string UnknownGangSizeReason() const {
    if (!gang_size_reason.empty()) {
      return "gpusched: gang " + gang + ": " + gang_size_reason +
             "; the pod is not scheduled until this is fixed (it holds no one back)";
    }
    return "gpusched: gang " + gang + ": its size is not known yet (declared by " +
           (gang_owner.name.empty() ? std::string("an object not read yet") : gang_owner.name) +
           "); the pod waits until it is read";
  }
};

}  // namespace gpusched

#endif  // GPUSCHED_MODEL_POD_H_
