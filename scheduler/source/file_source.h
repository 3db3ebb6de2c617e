// FileClusterSource: cluster state from a Kubernetes List JSON file, exactly
// as `kubectl get nodes,pods -A -o json` writes it (--cluster). Loaded once
// at Start; evictions decided by gpusched are applied to the in-memory state
// and logged. No object that declares a gang's size (PodGroup, JobSet, ...)
// is read: such gangs' pods are refused, saying so, and hold no one back. Not thread-safe for
// Start; Evict is thread-safe.
#ifndef GPUSCHED_SOURCE_FILE_SOURCE_H_
#define GPUSCHED_SOURCE_FILE_SOURCE_H_

#include <string>

#include "gpusched/core/cluster_source.h"

namespace gpusched {

class FileClusterSource final : public ClusterSource, public ClusterWriter {
 public:
  explicit FileClusterSource(std::string path) : path_(std::move(path)) {}

  absl::Status Start(ClusterState* state, std::function<void(bool)> on_synced) override;
  void Stop() override {}
  absl::Status Evict(const PodRequest& pod, const std::string& reason) override;
  // Applies every eviction, then commits once.
  void EvictAll(const std::vector<std::pair<PodRequest, std::string>>& pods) override;

 private:
  std::string path_;
  ClusterState* state_ = nullptr;
};

// Reads a whole file; errors name the file.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace gpusched

#endif  // GPUSCHED_SOURCE_FILE_SOURCE_H_
