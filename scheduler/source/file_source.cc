#include "scheduler/source/file_source.h"

#include <fstream>
#include <iostream>

#include "gpusched/util/strings.h"
#include "scheduler/codec/extender_codec.h"
#include "scheduler/codec/gang_codec.h"

namespace gpusched {
namespace {

// Spare capacity for the JSON parser's padding (it reallocates without it).
constexpr size_t kReadPadding = 64;

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(StrCat(path, ": cannot open"));
  // One read into a buffer sized once, with room for the JSON parser's
  // padding (a stream copy of a 30 MB cluster file took a quarter of
  // start-up).
  const std::streamoff size = in.tellg();
  if (size < 0) return absl::NotFoundError(StrCat(path, ": cannot read"));
  std::string text;
  text.reserve(static_cast<size_t>(size) + kReadPadding);
  text.resize(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(text.data(), size)) return absl::NotFoundError(StrCat(path, ": cannot read"));
  return text;
}

absl::Status FileClusterSource::Start(ClusterState* state, std::function<void(bool)> on_synced) {
  auto text = ReadFile(path_);
  if (!text.ok()) return text.status();
  codec::RequestDecoder decoder(256);
  auto objects = decoder.DecodeClusterList(*text);
  if (!objects.ok()) {
    return absl::InvalidArgumentError(
        StrCat("cluster ", path_, ": ", FromAbsl(objects.status().message())));
  }
  // A gang whose size an object declares (PodGroup, JobSet, ...) can never
  // learn it here: the pods say why instead of waiting for a read.
  for (PodRequest& p : objects->pods) {
    if (p.gang_size != kGangSizeUnknown || p.gang_owner.kind == GangOwnerKind::kNone) continue;
    p.gang_size_reason =
        StrCat("its size is declared by ", codec::GangOwnerApiOf(p.gang_owner.kind).kind, " ",
               p.gang_owner.name, ", which the --cluster file source does not read; set ",
               kAnnotationGangSize, " on its pods");
  }
  state->Reset(std::move(objects->nodes), std::move(objects->pods));
  state->Commit();
  state_ = state;
  if (on_synced) on_synced(true);
  return absl::OkStatus();
}

absl::Status FileClusterSource::Evict(const PodRequest& pod, const std::string& reason) {
  if (state_ == nullptr) return absl::FailedPreconditionError("cluster source not started");
  EvictAll({{pod, reason}});
  return absl::OkStatus();
}

void FileClusterSource::EvictAll(const std::vector<std::pair<PodRequest, std::string>>& pods) {
  if (state_ == nullptr || pods.empty()) return;
  std::string log;
  std::vector<std::string> uids;
  for (const auto& [pod, reason] : pods) {
    StrAppend(&log, "gpusched: evict ", pod.Key(), " from ", pod.node_name, ": ", reason,
              " (applied to the in-memory cluster)\n");
    uids.push_back(pod.uid);
  }
  std::cerr << log;
  state_->RemovePodsAndCommit(uids);
}

}  // namespace gpusched
