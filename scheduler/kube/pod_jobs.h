// PodJobs: which batch/v1 Job controls each pod the source holds (pod uid
// -> the Job's namespace, name and uid), so that the pods of a Job whose
// deadline changed can be filled again (KubeClusterSource::RefillJobs).
// Only pods a Job controls are in it.
//
// Compact, because it holds an entry per Job-controlled pod of the cluster:
// each Job's namespace, name and uid are stored once, however many pods it
// has, and a pod uid of the API server's shape (lowercase 8-4-4-4-12 hex)
// is kept as its 16 bytes; a uid of any other shape is kept as text.
// bench/kube/pod_jobs_bench measures the bytes per pod.
//
// Owned by KubeClusterSource, under its mutex; thread-compatible.
#ifndef GPUSCHED_KUBE_POD_JOBS_H_
#define GPUSCHED_KUBE_POD_JOBS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"

namespace gpusched::kube {

class PodJobs {
 public:
  // Pod `pod_uid` is controlled by Job `name` of `ns` (its uid `job_uid`,
  // "" when the pod names none); replaces what was known of the pod.
  void Set(std::string_view pod_uid, std::string_view ns, std::string_view name,
           std::string_view job_uid);
  void Erase(std::string_view pod_uid);
  void Clear();
  size_t size() const { return packed_pods_.size() + text_pods_.size(); }
  // Calls `f(pod_uid, job_name, job_uid)` for each pod of a Job whose
  // "namespace/name" is in `jobs`.
  void ForEachPodOf(const absl::flat_hash_set<std::string>& jobs,
                    absl::FunctionRef<void(const std::string& pod_uid, std::string_view job_name,
                                           std::string_view job_uid)>
                        f) const;

 private:
  using PackedUid = std::array<uint8_t, 16>;
  // One Job: "namespace/name\nuid" in one string; `pods` counts its pods.
  struct Job {
    std::string id;
    uint32_t slash = 0, newline = 0, pods = 0;
    std::string_view key() const { return std::string_view(id).substr(0, newline); }
    std::string_view name() const { return key().substr(slash + 1); }
    std::string_view uid() const { return std::string_view(id).substr(newline + 1); }
  };

  static std::optional<PackedUid> Pack(std::string_view uid);
  static void Unpack(const PackedUid& packed, std::string* out);
  uint32_t* FindPod(std::string_view pod_uid);
  uint32_t AddPodTo(std::string_view ns, std::string_view name, std::string_view job_uid);
  void DropPodFrom(uint32_t job);

  std::deque<Job> jobs_;  // a deque: a Job's id never moves, the index below views it
  std::vector<uint32_t> free_jobs_;
  absl::flat_hash_map<std::string_view, uint32_t> job_index_;  // Job::id -> its index
  absl::flat_hash_map<PackedUid, uint32_t> packed_pods_;       // pod uid -> Job index
  absl::flat_hash_map<std::string, uint32_t> text_pods_;       // other pod uids -> Job index
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_POD_JOBS_H_
