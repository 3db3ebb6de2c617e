// PodJobs: which batch/v1 Job controls each pod the source holds (pod uid
// -> the Job's namespace, name and uid), so that the pods of a Job whose
// deadline changed can be filled again (KubeClusterSource::RefillJobs).
// Only pods a Job controls are in it.
//
// Owned by KubeClusterSource, under its mutex; thread-compatible.
#ifndef GPUSCHED_KUBE_POD_JOBS_H_
#define GPUSCHED_KUBE_POD_JOBS_H_

#include <cstddef>
#include <string>
#include <string_view>

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
  size_t size() const { return pods_.size(); }
  // Calls `f(pod_uid, job_name, job_uid)` for each pod of a Job whose
  // "namespace/name" is in `jobs`.
  void ForEachPodOf(const absl::flat_hash_set<std::string>& jobs,
                    absl::FunctionRef<void(const std::string& pod_uid, std::string_view job_name,
                                           std::string_view job_uid)>
                        f) const;

 private:
  struct JobRef {
    std::string key;  // "namespace/name"
    std::string name, uid;
  };
  absl::flat_hash_map<std::string, JobRef> pods_;  // pod uid ->
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_POD_JOBS_H_
