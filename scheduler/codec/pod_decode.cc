// v1.Pod -> PodRequest. Effective requests follow Kubernetes: for each
// resource, max(sum over containers, max over init containers); a
// container's nvidia.com/gpu is its limit, or its request if it has no limit.
#include <simdjson.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gpusched/util/quantity.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/agent_codec.h"
#include "scheduler/codec/internal/dom.h"
#include "scheduler/codec/internal/gang_decode.h"
#include "scheduler/codec/internal/topology_decode.h"

namespace gpusched::codec {
namespace {

// The most nvidia.com/gpu one container may ask for. Far above any node (a
// pod gets at most 64), low enough that sums over containers never overflow.
constexpr int64_t kMaxGpusPerContainer = 1024;

struct Resources {
  int64_t gpus = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
};

// *sum += v, or an error naming `path` if the sum leaves int64.
absl::Status AddChecked(int64_t* sum, int64_t v, std::string_view path, std::string_view what) {
  if (__builtin_add_overflow(*sum, v, sum)) {
    return absl::InvalidArgumentError(StrCat(path, ": total ", what, " overflows"));
  }
  return absl::OkStatus();
}

// Reads one quantity from `list` (limits or requests).
absl::StatusOr<std::optional<std::string_view>> Quantity(const std::optional<Object>& list,
                                                         std::string_view key,
                                                         std::string_view path) {
  if (!list) return std::optional<std::string_view>();
  return OptString(*list, key, path);
}

absl::StatusOr<Resources> ContainerResources(const Element& c, std::string_view path) {
  Object obj;
  if (c.get_object().get(obj) != simdjson::SUCCESS) return TypeError(path, "object");
  Resources r;
  GPUSCHED_ASSIGN_OR_RETURN(auto res, OptObject(obj, "resources", path));
  if (!res) return r;
  std::string rpath = StrCat(path, ".resources");
  GPUSCHED_ASSIGN_OR_RETURN(auto limits, OptObject(*res, "limits", rpath));
  GPUSCHED_ASSIGN_OR_RETURN(auto requests, OptObject(*res, "requests", rpath));
  std::string lpath = StrCat(rpath, ".limits");
  std::string qpath = StrCat(rpath, ".requests");
  GPUSCHED_ASSIGN_OR_RETURN(auto gpu_limit, Quantity(limits, kResourceGpu, lpath));
  GPUSCHED_ASSIGN_OR_RETURN(auto gpu_request, Quantity(requests, kResourceGpu, qpath));
  if (gpu_limit || gpu_request) {
    auto text = gpu_limit ? *gpu_limit : *gpu_request;
    const std::string gpath = StrCat(gpu_limit ? lpath : qpath, "[\"", kResourceGpu, "\"]");
    auto n = ParseQuantityInteger(text);
    if (!n.ok()) return absl::InvalidArgumentError(StrCat(gpath, ": ", n.status().message()));
    if (*n > kMaxGpusPerContainer) {
      return absl::InvalidArgumentError(
          StrCat(gpath, ": '", text, "' GPUs; at most ", kMaxGpusPerContainer, " per container"));
    }
    r.gpus = *n;
  }
  for (const auto& [key, out, is_memory] :
       {std::tuple<std::string_view, int64_t*, bool>{"cpu", &r.cpu_milli, false},
        std::tuple<std::string_view, int64_t*, bool>{"memory", &r.memory_mib, true}}) {
    GPUSCHED_ASSIGN_OR_RETURN(auto req, Quantity(requests, key, qpath));
    GPUSCHED_ASSIGN_OR_RETURN(auto lim, Quantity(limits, key, lpath));
    auto text = req ? req : lim;
    if (!text) continue;
    auto v = is_memory ? ParseQuantityMiB(*text) : ParseQuantityMilli(*text);
    if (!v.ok()) {
      return absl::InvalidArgumentError(StrCat(rpath, "[\"", key, "\"]: ", v.status().message()));
    }
    *out = *v;
  }
  return r;
}

absl::StatusOr<Resources> EffectiveResources(const Object& spec, std::string_view path) {
  Resources sum;
  Resources init_max;
  for (std::string_view list :
       {std::string_view("containers"), std::string_view("initContainers")}) {
    auto e = Member(spec, list);
    if (!e) continue;
    simdjson::dom::array arr;
    std::string lpath = StrCat(path, ".", list);
    if (e->get_array().get(arr) != simdjson::SUCCESS) return TypeError(lpath, "array");
    size_t i = 0;
    for (Element c : arr) {
      GPUSCHED_ASSIGN_OR_RETURN(Resources r, ContainerResources(c, StrCat(lpath, "[", i++, "]")));
      if (list == "containers") {
        GPUSCHED_RETURN_IF_ERROR(AddChecked(&sum.gpus, r.gpus, lpath, kResourceGpu));
        GPUSCHED_RETURN_IF_ERROR(AddChecked(&sum.cpu_milli, r.cpu_milli, lpath, "cpu"));
        GPUSCHED_RETURN_IF_ERROR(AddChecked(&sum.memory_mib, r.memory_mib, lpath, "memory"));
      } else {
        init_max.gpus = std::max(init_max.gpus, r.gpus);
        init_max.cpu_milli = std::max(init_max.cpu_milli, r.cpu_milli);
        init_max.memory_mib = std::max(init_max.memory_mib, r.memory_mib);
      }
    }
  }
  return Resources{std::max(sum.gpus, init_max.gpus), std::max(sum.cpu_milli, init_max.cpu_milli),
                   std::max(sum.memory_mib, init_max.memory_mib)};
}

absl::StatusOr<DeviceMask> ParseGpuIds(std::string_view text, std::string_view path) {
  DeviceMask m = 0;
  for (absl::string_view part : absl::StrSplit(ToAbsl(text), ',', absl::SkipWhitespace())) {
    int id = -1;
    if (!absl::SimpleAtoi(part, &id) || id < 0 || id >= kMaxGpusPerNode) {
      return absl::InvalidArgumentError(StrCat(path, ": bad GPU id '", FromAbsl(part), "'"));
    }
    DeviceMask bit = DeviceMask{1} << id;
    if (m & bit) return absl::InvalidArgumentError(StrCat(path, ": GPU ", id, " listed twice"));
    m |= bit;
  }
  return m;
}

absl::Status ApplyAnnotations(const Object& ann, std::string_view path, PodRequest& pod) {
  auto str = [&](std::string_view key) { return OptString(ann, key, path); };
  GPUSCHED_ASSIGN_OR_RETURN(auto models, str(kAnnotationGpuModel));
  if (models) {
    for (absl::string_view m : absl::StrSplit(ToAbsl(*models), ',', absl::SkipWhitespace())) {
      pod.gpu.models.emplace_back(absl::StripAsciiWhitespace(m));
    }
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto mem, str(kAnnotationGpuMemory));
  if (mem) {
    auto v = ParseQuantityMiB(*mem);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          StrCat(path, "[\"", kAnnotationGpuMemory, "\"]: ", v.status().message()));
    }
    pod.gpu.min_memory_mib = *v;
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto topo, str(kAnnotationTopology));
  if (topo) {
    if (*topo == "nvlink-required") {
      pod.gpu.topology = TopologyMode::kNvlinkRequired;
    } else if (*topo == "nvlink-preferred") {
      pod.gpu.topology = TopologyMode::kNvlinkPreferred;
    } else if (*topo == "none") {
      pod.gpu.topology = TopologyMode::kNone;
    } else {
      return absl::InvalidArgumentError(
          StrCat(path, "[\"", kAnnotationTopology, "\"]: '", *topo,
                 "' is not nvlink-required, nvlink-preferred or none"));
    }
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto milli, str(kAnnotationGpuMilli));
  if (milli) {
    int v = 0;
    if (!absl::SimpleAtoi(ToAbsl(*milli), &v) || v < 1 || v > 1000) {
      return absl::InvalidArgumentError(
          StrCat(path, "[\"", kAnnotationGpuMilli, "\"]: '", *milli, "' is not 1..1000"));
    }
    pod.gpu.milli_per_gpu = v;
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto ids, str(kAnnotationGpuIds));
  if (ids) {
    auto m = ParseGpuIds(*ids, StrCat(path, "[\"", kAnnotationGpuIds, "\"]"));
    // A bad annotation is not a bad request: the pod still holds GPUs, the
    // devices are just unknown (ClusterState fails closed on them).
    if (m.ok()) {
      pod.has_gpu_ids = true;
      pod.gpu_ids = *m;
    }
  }
  // The node agent's confirmation, shown beside the record; a bad value only
  // means not confirmed.
  GPUSCHED_ASSIGN_OR_RETURN(auto confirmed, str(kAnnotationGpuIdsConfirmed));
  if (confirmed) {
    auto m = ParseGpuIds(*confirmed, StrCat(path, "[\"", kAnnotationGpuIdsConfirmed, "\"]"));
    if (m.ok()) {
      pod.has_gpu_ids_confirmed = true;
      pod.gpu_ids_confirmed = *m;
    }
  }
  // Kept as text: a malformed duration is judged (and reported) where the
  // estimate is made, never a reason to refuse the pod.
  GPUSCHED_ASSIGN_OR_RETURN(auto runtime, str(kAnnotationExpectedRuntime));
  if (runtime) pod.expected_runtime = std::string(*runtime);
  GPUSCHED_ASSIGN_OR_RETURN(auto gang, str(kAnnotationGang));
  if (gang) pod.gang = std::string(*gang);
  GPUSCHED_ASSIGN_OR_RETURN(auto gang_size, str(kAnnotationGangSize));
  if (gang_size) {
    int v = 0;
    if (!absl::SimpleAtoi(ToAbsl(*gang_size), &v) || v < 1 || v > 100000) {
      return absl::InvalidArgumentError(
          StrCat(path, "[\"", kAnnotationGangSize, "\"]: '", *gang_size, "' is not a count"));
    }
    pod.gang_size = v;
  }
  pod.topology_request = DecodeTopologyAnnotations(ann);
  return absl::OkStatus();
}

// The name of the Job that controls the pod: the ownerReferences entry with
// kind Job and controller true, else the job-name label the Job controller
// sets. Malformed owner data is not the pod's GPU request: it only means no
// Job, never a decode error.
std::string OwningJob(const Object& meta) {
  if (auto owners = Member(meta, "ownerReferences")) {
    simdjson::dom::array refs;
    if (owners->get_array().get(refs) == simdjson::SUCCESS) {
      for (Element ref : refs) {
        Object o;
        std::string_view kind, name;
        bool controller = false;
        if (ref.get_object().get(o) != simdjson::SUCCESS) continue;
        auto k = Member(o, "kind");
        auto n = Member(o, "name");
        auto c = Member(o, "controller");
        if (!k || !n || !c || k->get_string().get(kind) != simdjson::SUCCESS ||
            n->get_string().get(name) != simdjson::SUCCESS ||
            c->get_bool().get(controller) != simdjson::SUCCESS) {
          continue;
        }
        if (kind == "Job" && controller && !name.empty()) return std::string(name);
      }
    }
  }
  if (auto labels = Member(meta, "labels")) {
    Object l;
    if (labels->get_object().get(l) == simdjson::SUCCESS) {
      for (std::string_view key : {"batch.kubernetes.io/job-name", "job-name"}) {
        std::string_view v;
        auto m = Member(l, key);
        if (m && m->get_string().get(v) == simdjson::SUCCESS && !v.empty()) return std::string(v);
      }
    }
  }
  return "";
}

PodPhase ParsePhase(std::string_view p) {
  if (p == "Pending") return PodPhase::kPending;
  if (p == "Running") return PodPhase::kRunning;
  if (p == "Succeeded") return PodPhase::kSucceeded;
  if (p == "Failed") return PodPhase::kFailed;
  return PodPhase::kUnknown;
}

// A string member, "" if absent or of another type (DecodeHeldPod reads
// what it can and never fails on a field it does not need).
std::string_view LenientString(const Object& obj, std::string_view key) {
  std::string_view v;
  auto m = Member(obj, key);
  if (!m || m->get_string().get(v) != simdjson::SUCCESS) return "";
  return v;
}

std::optional<Object> LenientObject(const Object& obj, std::string_view key) {
  Object o;
  auto m = Member(obj, key);
  if (!m || m->get_object().get(o) != simdjson::SUCCESS) return std::nullopt;
  return o;
}

// The most GPUs a bound pod can hold on a node: what DecodeHeldPod counts
// for a pod whose requests cannot be read.
constexpr int32_t kMaxGpusHeld = 64;

// What a bound pod holds: its requests, or (unreadable) a whole node.
void HeldResources(const std::optional<Object>& spec, std::string_view path, PodRequest& pod) {
  absl::StatusOr<Resources> r = spec ? EffectiveResources(*spec, StrCat(path, ".spec"))
                                     : absl::StatusOr<Resources>(Resources{});
  if (!r.ok()) {
    pod.gpu.count = kMaxGpusHeld;
    return;
  }
  pod.gpu.count = static_cast<int32_t>(std::min<int64_t>(r->gpus, kMaxGpusHeld));
  pod.cpu_milli = r->cpu_milli;
  pod.memory_mib = r->memory_mib;
}

// DecodePod's steps, in its order (the first error wins): the metadata
// (`mpath` names it), the spec and the status into `pod`.
absl::Status DecodePodMetadata(const Object& meta, const std::string& mpath, PodRequest& pod) {
  GPUSCHED_ASSIGN_OR_RETURN(auto name, OptString(meta, "name", mpath));
  if (!name || name->empty()) return absl::InvalidArgumentError(StrCat(mpath, ".name: missing"));
  pod.name = std::string(*name);
  GPUSCHED_ASSIGN_OR_RETURN(auto ns, OptString(meta, "namespace", mpath));
  pod.ns = ns && !ns->empty() ? std::string(*ns) : "default";
  GPUSCHED_ASSIGN_OR_RETURN(auto uid, OptString(meta, "uid", mpath));
  pod.uid = uid && !uid->empty() ? std::string(*uid) : pod.ns + "/" + pod.name;
  GPUSCHED_ASSIGN_OR_RETURN(auto created, OptString(meta, "creationTimestamp", mpath));
  if (created) {
    GPUSCHED_ASSIGN_OR_RETURN(pod.creation_unix,
                              ParseTimestamp(*created, StrCat(mpath, ".creationTimestamp")));
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto deleting, OptString(meta, "deletionTimestamp", mpath));
  pod.deleting = deleting.has_value();
  GPUSCHED_ASSIGN_OR_RETURN(auto ann, OptObject(meta, "annotations", mpath));
  if (ann) GPUSCHED_RETURN_IF_ERROR(ApplyAnnotations(*ann, StrCat(mpath, ".annotations"), pod));
  // gang-size without a gang name: the gang is the pod's Job (the annotation
  // set once in the Job's pod template). No Job: the pod runs alone.
  if (pod.gang.empty() && pod.gang_size > 1) pod.gang = OwningJob(meta);
  ApplyGangDeclarations(meta, pod);  // framework labels; gpusched.io/gang* win
  pod.workload = pod.gang.empty() ? OwningJob(meta) : pod.gang;
  return absl::OkStatus();
}

// spec.activeDeadlineSeconds; 0 if unset, -1 if not an integer (the
// runtime estimate says so and uses the next source).
int64_t ActiveDeadline(const Object& spec) {
  auto m = Member(spec, "activeDeadlineSeconds");
  if (!m) return 0;
  int64_t v = 0;
  return m->get_int64().get(v) == simdjson::SUCCESS ? v : -1;
}

absl::Status DecodePodSpec(const Object& spec, const std::string& spath, PodRequest& pod) {
  GPUSCHED_ASSIGN_OR_RETURN(Resources r, EffectiveResources(spec, spath));
  if (r.gpus > 64) {
    return absl::InvalidArgumentError(
        StrCat(spath, ": ", r.gpus, " nvidia.com/gpu requested; at most 64 per pod"));
  }
  pod.gpu.count = static_cast<int32_t>(r.gpus);
  pod.cpu_milli = r.cpu_milli;
  pod.memory_mib = r.memory_mib;
  GPUSCHED_ASSIGN_OR_RETURN(auto prio, OptInt(spec, "priority", spath));
  if (prio) {
    // Kubernetes priorities are int32; a wider value is never truncated.
    if (*prio < std::numeric_limits<int32_t>::min() ||
        *prio > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          StrCat(spath, ".priority: ", *prio, " is not a 32-bit integer"));
    }
    pod.priority = static_cast<int32_t>(*prio);
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto pc, OptString(spec, "priorityClassName", spath));
  if (pc) pod.priority_class = std::string(*pc);
  GPUSCHED_ASSIGN_OR_RETURN(auto pp, OptString(spec, "preemptionPolicy", spath));
  pod.preempt_never = pp && *pp == "Never";
  GPUSCHED_ASSIGN_OR_RETURN(auto node, OptString(spec, "nodeName", spath));
  if (node) pod.node_name = std::string(*node);
  pod.active_deadline_s = ActiveDeadline(spec);
  return absl::OkStatus();
}

// The latest containerStatuses[].state.terminated.finishedAt of a finished
// pod (0 if none can be read): the end of its run for runtime history.
int64_t FinishedAt(const Object& status) {
  int64_t latest = 0;
  simdjson::dom::array list;
  auto cs = Member(status, "containerStatuses");
  if (!cs || cs->get_array().get(list) != simdjson::SUCCESS) return 0;
  for (Element c : list) {
    Object co;
    if (c.get_object().get(co) != simdjson::SUCCESS) continue;
    auto state = LenientObject(co, "state");
    auto term = state ? LenientObject(*state, "terminated") : std::nullopt;
    if (!term) continue;
    auto t = ParseTimestamp(LenientString(*term, "finishedAt"), "finishedAt");
    if (t.ok()) latest = std::max(latest, *t);
  }
  return latest;
}

absl::Status DecodePodStatus(const Object& status, const std::string& stpath, PodRequest& pod) {
  GPUSCHED_ASSIGN_OR_RETURN(auto phase, OptString(status, "phase", stpath));
  if (phase) pod.phase = ParsePhase(*phase);
  if (pod.phase == PodPhase::kSucceeded || pod.phase == PodPhase::kFailed) {
    pod.finish_unix = FinishedAt(status);
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto start, OptString(status, "startTime", stpath));
  if (start) {
    GPUSCHED_ASSIGN_OR_RETURN(pod.start_unix, ParseTimestamp(*start, StrCat(stpath, ".startTime")));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PodRequest> DecodeHeldPod(const Element& e, std::string_view path) {
  Object pod_obj;
  if (e.get_object().get(pod_obj) != simdjson::SUCCESS) return TypeError(path, "object");
  auto meta = LenientObject(pod_obj, "metadata");
  if (!meta || LenientString(*meta, "name").empty()) {
    return absl::InvalidArgumentError(StrCat(path, ".metadata.name: missing"));
  }
  auto spec = LenientObject(pod_obj, "spec");
  auto status = LenientObject(pod_obj, "status");
  PodRequest pod;
  pod.name = std::string(LenientString(*meta, "name"));
  const std::string_view ns = LenientString(*meta, "namespace");
  pod.ns = ns.empty() ? "default" : std::string(ns);
  const std::string_view uid = LenientString(*meta, "uid");
  pod.uid = uid.empty() ? pod.ns + "/" + pod.name : std::string(uid);
  if (spec) pod.node_name = std::string(LenientString(*spec, "nodeName"));
  if (status) pod.phase = ParsePhase(LenientString(*status, "phase"));
  if (!pod.HoldsGpus()) {
    return absl::InvalidArgumentError(StrCat(path, ": not bound to a node, holds nothing"));
  }
  pod.deleting = Member(*meta, "deletionTimestamp").has_value();
  HeldResources(spec, path, pod);
  if (spec) {
    int64_t prio = 0;
    auto p = Member(*spec, "priority");
    if (p && p->get_int64().get(prio) == simdjson::SUCCESS) {
      pod.priority = static_cast<int32_t>(std::clamp<int64_t>(
          prio, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
    }
    pod.priority_class = std::string(LenientString(*spec, "priorityClassName"));
  }
  for (auto [obj, key, out] : {std::tuple{&meta, "creationTimestamp", &pod.creation_unix},
                               std::tuple{&status, "startTime", &pod.start_unix}}) {
    if (!*obj) continue;
    auto t = ParseTimestamp(LenientString(**obj, key), key);
    if (t.ok()) *out = *t;
  }
  if (pod.start_unix == 0) pod.start_unix = pod.creation_unix;
  // The gang it belongs to, if a framework declares one (never fails);
  // gpusched's own annotations are not read: one of them may be what failed.
  ApplyGangDeclarations(*meta, pod);
  pod.workload = pod.gang.empty() ? OwningJob(*meta) : pod.gang;
  return pod;
}

absl::StatusOr<PodRequest> DecodePod(const Element& e, std::string_view path) {
  Object pod_obj;
  if (e.get_object().get(pod_obj) != simdjson::SUCCESS) return TypeError(path, "object");
  PodRequest pod;
  std::string mpath = StrCat(path, ".metadata");
  GPUSCHED_ASSIGN_OR_RETURN(auto meta, OptObject(pod_obj, "metadata", path));
  if (!meta) return absl::InvalidArgumentError(StrCat(mpath, ": missing"));
  GPUSCHED_RETURN_IF_ERROR(DecodePodMetadata(*meta, mpath, pod));
  GPUSCHED_ASSIGN_OR_RETURN(auto spec, OptObject(pod_obj, "spec", path));
  if (spec) GPUSCHED_RETURN_IF_ERROR(DecodePodSpec(*spec, StrCat(path, ".spec"), pod));
  if (pod.gpu.milli_per_gpu < 1000 && pod.gpu.count != 1) {
    if (pod.gpu.count == 0) {
      // gpu-milli without nvidia.com/gpu: a shared-GPU pod asking for one device.
      pod.gpu.count = 1;
    } else {
      return absl::InvalidArgumentError(StrCat(path, ": ", kAnnotationGpuMilli,
                                               " needs nvidia.com/gpu: 1, pod asks for ",
                                               pod.gpu.count));
    }
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto status, OptObject(pod_obj, "status", path));
  if (status) GPUSCHED_RETURN_IF_ERROR(DecodePodStatus(*status, StrCat(path, ".status"), pod));
  if (pod.start_unix == 0) pod.start_unix = pod.creation_unix;
  return pod;
}

namespace {

// A string member, or nullopt if absent or of another type.
std::optional<std::string_view> StringMember(const Object& o, std::string_view key) {
  std::string_view v;
  auto m = Member(o, key);
  if (!m || m->get_string().get(v) != simdjson::SUCCESS) return std::nullopt;
  return v;
}

// The ownerReferences entry that is a controlling batch/v1 Job, if any.
bool JobOwner(const Object& meta, std::string* name, std::string* uid) {
  auto owners = Member(meta, "ownerReferences");
  simdjson::dom::array refs;
  if (!owners || owners->get_array().get(refs) != simdjson::SUCCESS) return false;
  for (Element ref : refs) {
    Object o;
    bool controller = false;
    if (ref.get_object().get(o) != simdjson::SUCCESS) continue;
    auto c = Member(o, "controller");
    if (!c || c->get_bool().get(controller) != simdjson::SUCCESS || !controller) continue;
    auto kind = StringMember(o, "kind");
    auto api = StringMember(o, "apiVersion");
    auto n = StringMember(o, "name");
    if (kind != "Job" || api != "batch/v1" || !n || n->empty()) continue;
    *name = std::string(*n);
    *uid = std::string(StringMember(o, "uid").value_or(""));
    return true;
  }
  return false;
}

}  // namespace

void ControllingJob(const Object& pod, std::string* name, std::string* uid) {
  name->clear();
  uid->clear();
  auto m = Member(pod, "metadata");
  Object meta;
  if (!m || m->get_object().get(meta) != simdjson::SUCCESS) return;
  if (JobOwner(meta, name, uid)) return;
  // The label the Job controller sets on its pods (batch/v1 JobNameLabel).
  auto labels = Member(meta, "labels");
  Object l;
  if (!labels || labels->get_object().get(l) != simdjson::SUCCESS) return;
  if (auto v = StringMember(l, "batch.kubernetes.io/job-name"); v && !v->empty()) {
    *name = std::string(*v);
  }
}

}  // namespace gpusched::codec
