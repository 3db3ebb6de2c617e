#include "scheduler/kube/pod_jobs.h"

#include "gpusched/util/strings.h"

namespace gpusched::kube {

void PodJobs::Set(std::string_view pod_uid, std::string_view ns, std::string_view name,
                  std::string_view job_uid) {
  pods_[std::string(pod_uid)] = {StrCat(ns, "/", name), std::string(name), std::string(job_uid)};
}

void PodJobs::Erase(std::string_view pod_uid) { pods_.erase(std::string(pod_uid)); }

void PodJobs::Clear() { pods_.clear(); }

void PodJobs::ForEachPodOf(
    const absl::flat_hash_set<std::string>& jobs,
    absl::FunctionRef<void(const std::string& pod_uid, std::string_view job_name,
                           std::string_view job_uid)>
        f) const {
  for (const auto& [uid, ref] : pods_) {
    if (jobs.contains(ref.key)) f(uid, ref.name, ref.uid);
  }
}

}  // namespace gpusched::kube
