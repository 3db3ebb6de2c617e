#include "scheduler/codec/agent_codec.h"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gpusched/model/pod.h"
#include "gpusched/util/strings.h"

namespace gpusched::codec {
namespace {

using Json = nlohmann::json;

const Json* Member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string StringAt(const Json& j, const char* key) {
  const Json* m = Member(j, key);
  return m != nullptr && m->is_string() ? m->get<std::string>() : "";
}

// An extended resource count ("2", or the number 2). Fractions and negative
// counts are errors: the kubelet refuses them too.
absl::StatusOr<int64_t> ResourceCount(const Json& list, const char* name, const std::string& path) {
  const Json* v = Member(list, name);
  if (v == nullptr) return 0;
  int64_t n = -1;
  if (v->is_number_integer()) n = v->get<int64_t>();
  if (v->is_string() && !absl::SimpleAtoi(v->get<std::string>(), &n)) n = -1;
  if (n < 0 || n > 1024) {
    return absl::InvalidArgumentError(
        StrCat(path, "[\"", name, "\"]: '", v->dump(), "' is not a whole number 0..1024"));
  }
  return n;
}

// Limits win over requests for extended resources (they must be equal when
// both are set; a pod with only a limit gets it as its request).
absl::StatusOr<ContainerDevices> DecodeContainer(const Json& c, const std::string& path) {
  ContainerDevices out;
  out.name = StringAt(c, "name");
  const Json* res = Member(c, "resources");
  if (res == nullptr) return out;
  for (const char* kind : {"requests", "limits"}) {
    const Json* list = Member(*res, kind);
    if (list == nullptr) continue;
    const std::string lpath = StrCat(path, ".resources.", kind);
    auto gpus = ResourceCount(*list, kResourceGpu, lpath);
    if (!gpus.ok()) return gpus.status();
    auto shares = ResourceCount(*list, kResourceGpuShares, lpath);
    if (!shares.ok()) return shares.status();
    if (Member(*list, kResourceGpu) != nullptr) out.gpus = *gpus;
    if (Member(*list, kResourceGpuShares) != nullptr) out.shares = *shares;
  }
  return out;
}

std::optional<std::string> Annotation(const Json& annotations, const char* key) {
  const Json* v = Member(annotations, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

absl::StatusOr<NodePodRecord> DecodeItem(const Json& item, const std::string& path) {
  NodePodRecord pod;
  const Json* meta = Member(item, "metadata");
  if (meta == nullptr) return absl::InvalidArgumentError(StrCat(path, ".metadata: missing"));
  pod.ns = StringAt(*meta, "namespace");
  pod.name = StringAt(*meta, "name");
  pod.uid = StringAt(*meta, "uid");
  if (pod.name.empty() || pod.uid.empty()) {
    return absl::InvalidArgumentError(StrCat(path, ".metadata: name and uid are required"));
  }
  pod.deleting = Member(*meta, "deletionTimestamp") != nullptr;
  if (const Json* ann = Member(*meta, "annotations"); ann != nullptr) {
    pod.gpu_ids = Annotation(*ann, kAnnotationGpuIds);
    pod.gpu_ids_confirmed = Annotation(*ann, kAnnotationGpuIdsConfirmed);
    pod.gpu_milli = Annotation(*ann, kAnnotationGpuMilli);
  }
  if (const Json* spec = Member(item, "spec"); spec != nullptr) {
    pod.node_name = StringAt(*spec, "nodeName");
    const Json* containers = Member(*spec, "containers");
    for (size_t i = 0; containers != nullptr && containers->is_array() && i < containers->size();
         ++i) {
      auto c = DecodeContainer((*containers)[i], StrCat(path, ".spec.containers[", i, "]"));
      if (!c.ok()) return c.status();
      pod.containers.push_back(std::move(*c));
    }
  }
  if (const Json* status = Member(item, "status"); status != nullptr) {
    pod.phase = StringAt(*status, "phase");
  }
  return pod;
}

}  // namespace

int64_t NodePodRecord::total_gpus() const {
  int64_t n = 0;
  for (const ContainerDevices& c : containers) n += c.gpus;
  return n;
}

int64_t NodePodRecord::total_shares() const {
  int64_t n = 0;
  for (const ContainerDevices& c : containers) n += c.shares;
  return n;
}

absl::StatusOr<NodePodList> DecodeNodePodList(std::string_view body) {
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("PodList: malformed JSON");
  }
  const Json* items = Member(j, "items");
  if (items == nullptr) return NodePodList{};
  if (!items->is_array()) return absl::InvalidArgumentError("PodList.items: not an array");
  NodePodList out;
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string path = StrCat("items[", i, "]");
    auto pod = DecodeItem((*items)[i], path);
    if (pod.ok()) {
      out.pods.push_back(std::move(*pod));
    } else {
      out.errors.emplace_back(pod.status().message());
    }
  }
  return out;
}

absl::StatusOr<uint64_t> ParseDeviceIds(std::string_view text, std::string_view path) {
  uint64_t mask = 0;
  for (absl::string_view part : absl::StrSplit(ToAbsl(text), ',', absl::SkipWhitespace())) {
    int id = -1;
    part = absl::StripAsciiWhitespace(part);
    if (!absl::SimpleAtoi(part, &id) || id < 0 || id >= kMaxGpusPerNode) {
      return absl::InvalidArgumentError(
          StrCat(path, ": '", FromAbsl(part), "' is not a GPU 0..63"));
    }
    const uint64_t bit = uint64_t{1} << id;
    if ((mask & bit) != 0)
      return absl::InvalidArgumentError(StrCat(path, ": GPU ", id, " repeated"));
    mask |= bit;
  }
  return mask;
}

std::string EncodeAnnotationsPatch(
    std::string_view uid,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& annotations) {
  Json ann = Json::object();
  for (const auto& [key, value] : annotations) {
    ann[key] = value ? Json(*value) : Json(nullptr);
  }
  Json meta = {{"annotations", ann}};
  if (!uid.empty()) meta["uid"] = std::string(uid);
  return Json{{"metadata", meta}}.dump();
}

}  // namespace gpusched::codec
