#include "scheduler/kube/pod_jobs.h"

#include "absl/strings/string_view.h"
#include "gpusched/util/strings.h"

namespace gpusched::kube {
namespace {

constexpr size_t kUidLength = 36;

// The hash sets' heterogeneous lookup takes abseil's string_view.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsDash(size_t i) { return i == 8 || i == 13 || i == 18 || i == 23; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case too: only the API server's own shape is packed
}

}  // namespace

std::optional<PodJobs::PackedUid> PodJobs::Pack(std::string_view uid) {
  if (uid.size() != kUidLength) return std::nullopt;
  PackedUid out{};
  size_t nibble = 0;
  for (size_t i = 0; i < kUidLength; ++i) {
    if (IsDash(i)) {
      if (uid[i] != '-') return std::nullopt;
      continue;
    }
    const int v = HexValue(uid[i]);
    if (v < 0) return std::nullopt;
    out[nibble / 2] |= static_cast<uint8_t>(nibble % 2 == 0 ? v << 4 : v);
    ++nibble;
  }
  return out;
}

void PodJobs::Unpack(const PackedUid& packed, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->resize(kUidLength);
  size_t nibble = 0;
  for (size_t i = 0; i < kUidLength; ++i) {
    if (IsDash(i)) {
      (*out)[i] = '-';
      continue;
    }
    const uint8_t byte = packed[nibble / 2];
    (*out)[i] = kHex[nibble % 2 == 0 ? byte >> 4 : byte & 0xf];
    ++nibble;
  }
}

uint32_t* PodJobs::FindPod(std::string_view pod_uid) {
  if (std::optional<PackedUid> packed = Pack(pod_uid)) {
    auto it = packed_pods_.find(*packed);
    return it == packed_pods_.end() ? nullptr : &it->second;
  }
  auto it = text_pods_.find(AbslView(pod_uid));
  return it == text_pods_.end() ? nullptr : &it->second;
}

uint32_t PodJobs::AddPodTo(std::string_view ns, std::string_view name, std::string_view job_uid) {
  std::string id = StrCat(ns, "/", name, "\n", job_uid);
  if (auto it = job_index_.find(id); it != job_index_.end()) {
    ++jobs_[it->second].pods;
    return it->second;
  }
  uint32_t index;
  if (free_jobs_.empty()) {
    index = static_cast<uint32_t>(jobs_.size());
    jobs_.emplace_back();
  } else {
    index = free_jobs_.back();
    free_jobs_.pop_back();
  }
  Job& job = jobs_[index];
  job.id = std::move(id);
  job.slash = static_cast<uint32_t>(ns.size());
  job.newline = static_cast<uint32_t>(ns.size() + 1 + name.size());
  job.pods = 1;
  job_index_.emplace(std::string_view(job.id), index);
  return index;
}

void PodJobs::DropPodFrom(uint32_t index) {
  Job& job = jobs_[index];
  if (--job.pods > 0) return;
  job_index_.erase(std::string_view(job.id));
  std::string().swap(job.id);
  free_jobs_.push_back(index);
}

void PodJobs::Set(std::string_view pod_uid, std::string_view ns, std::string_view name,
                  std::string_view job_uid) {
  const uint32_t job = AddPodTo(ns, name, job_uid);
  if (uint32_t* known = FindPod(pod_uid)) {
    DropPodFrom(*known);
    *known = job;
  } else if (std::optional<PackedUid> packed = Pack(pod_uid)) {
    packed_pods_.emplace(*packed, job);
  } else {
    text_pods_.emplace(std::string(pod_uid), job);
  }
}

void PodJobs::Erase(std::string_view pod_uid) {
  if (std::optional<PackedUid> packed = Pack(pod_uid)) {
    auto it = packed_pods_.find(*packed);
    if (it == packed_pods_.end()) return;
    DropPodFrom(it->second);
    packed_pods_.erase(it);
    return;
  }
  auto it = text_pods_.find(AbslView(pod_uid));
  if (it == text_pods_.end()) return;
  DropPodFrom(it->second);
  text_pods_.erase(it);
}

void PodJobs::Clear() {
  packed_pods_.clear();
  text_pods_.clear();
  job_index_.clear();
  jobs_.clear();
  free_jobs_.clear();
}

void PodJobs::ForEachPodOf(
    const absl::flat_hash_set<std::string>& jobs,
    absl::FunctionRef<void(const std::string& pod_uid, std::string_view job_name,
                           std::string_view job_uid)>
        f) const {
  std::vector<bool> asked(jobs_.size(), false);
  bool any = false;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].pods > 0 && jobs.contains(AbslView(jobs_[i].key()))) asked[i] = any = true;
  }
  if (!any) return;
  std::string uid;
  for (const auto& [packed, job] : packed_pods_) {
    if (!asked[job]) continue;
    Unpack(packed, &uid);
    f(uid, jobs_[job].name(), jobs_[job].uid());
  }
  for (const auto& [text, job] : text_pods_) {
    if (asked[job]) f(text, jobs_[job].name(), jobs_[job].uid());
  }
}

}  // namespace gpusched::kube
