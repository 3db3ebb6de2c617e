// GangSizes: the sizes of gangs whose pods name an object but do not carry
// the size (scheduler-plugins and Volcano PodGroups, JobSets, PyTorchJobs,
// MPIJobs; codec/gang_codec.h), read from the API server on demand and kept
// current. The source calls Fill on every pod before it enters ClusterState.
//
//  - Fill answers from the cache and never waits on the API: an object not
//    read yet leaves gang_size at kGangSizeUnknown (the gang waits) and
//    queues a read; an object that is not there, cannot be read or declares
//    an invalid size also leaves it unknown, with why in
//    PodRequest::gang_size_reason (naming the object and the field);
//  - every kind is optional: its first read asks discovery for its
//    group/version. A 404 there (the CRD is not installed) disables the
//    kind: Fill drops those pods' declarations (they are scheduled as single
//    pods), and discovery is asked again after `discovery_retry`;
//  - an object not there yet (404) or unreadable is read again after
//    `retry`; objects in use are re-read every `refresh` (minMember can
//    change); entries no pod has named for `forget_after` are dropped;
//  - when a read changes what Fill answers, `on_change` runs on the reader
//    thread with no lock held, so the source can re-fill its pods.
//
// Thread-safe. Start spawns the reader thread; Stop (or the destructor)
// joins it.
#ifndef GPUSCHED_KUBE_GANG_OBJECTS_H_
#define GPUSCHED_KUBE_GANG_OBJECTS_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/model/pod.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"

namespace gpusched::kube {

struct GangSizesOptions {
  std::chrono::milliseconds refresh{30000};
  std::chrono::milliseconds retry{2000};
  std::chrono::milliseconds discovery_retry{300000};
  std::chrono::milliseconds forget_after{600000};
  std::chrono::milliseconds request_timeout{10000};
};

class GangSizes {
 public:
  GangSizes(KubeHttpClient* client, GangSizesOptions options, Metrics* metrics);
  ~GangSizes();
  GangSizes(const GangSizes&) = delete;
  GangSizes& operator=(const GangSizes&) = delete;

  void Start(std::function<void()> on_change) ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Sets pod.gang, pod.gang_size and pod.group_topology from the cache if
  // pod.gang_owner names an object (see above); other pods are left as they
  // are.
  void Fill(PodRequest& pod) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Served : uint8_t { kUnknown, kYes, kNo };
  struct Entry {
    GangOwnerKind kind = GangOwnerKind::kNone;
    std::string ns, name;
    bool known = false;
    int32_t size = kGangSizeUnknown;
    std::string error;         // why the size is unknown, once a read said so
    TopologyRequest topology;  // the object's (PodRequest::group_topology)
    bool queued = false;
    int64_t due_ms = 0;   // next read (retry or refresh)
    int64_t used_ms = 0;  // last Fill that named it
  };
  struct KindState {
    Served served = Served::kUnknown;
    int64_t due_ms = 0;  // next discovery while kNo
  };
  static constexpr size_t kKinds = 6;

  int64_t Now() const;
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads `key` (and its kind's discovery if needed); true if Fill's answer
  // for it changed.
  bool Read(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Discovery for `kind`; true if it changed whether the kind is served.
  bool Discover(GangOwnerKind kind) ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<int64_t> NextDueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KubeHttpClient* client_;
  const GangSizesOptions options_;
  Metrics* metrics_;
  std::function<void()> on_change_;
  std::thread thread_;
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::array<KindState, kKinds> kinds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_GANG_OBJECTS_H_
