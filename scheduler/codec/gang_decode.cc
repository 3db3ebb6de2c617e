// Framework gang declarations: the pod's labels, annotations and controller
// owner (internal/gang_decode.h), and the owner objects' sizes
// (gang_codec.h).
#include "scheduler/codec/internal/gang_decode.h"

#include <simdjson.h>

#include <array>
#include <string>

#include "absl/strings/numbers.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/gang_codec.h"
#include "scheduler/codec/internal/topology_decode.h"

namespace gpusched::codec {
namespace {

// Pod labels and annotations, as the frameworks set them.
constexpr std::string_view kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
constexpr std::string_view kVolcanoGroupAnnotation = "scheduling.k8s.io/group-name";
constexpr std::string_view kVolcanoGroupAnnotationAlt = "scheduling.volcano.sh/group-name";
constexpr std::string_view kKueueGroupLabel = "kueue.x-k8s.io/pod-group-name";
constexpr std::string_view kKueueCountAnnotation = "kueue.x-k8s.io/pod-group-total-count";
constexpr std::string_view kLwsGroupKeyLabel = "leaderworkerset.sigs.k8s.io/group-key";
constexpr std::string_view kLwsSizeAnnotation = "leaderworkerset.sigs.k8s.io/size";
constexpr std::string_view kJobSetNameLabel = "jobset.sigs.k8s.io/jobset-name";

constexpr int32_t kMaxGangSize = 100000;  // as gpusched.io/gang-size

constexpr std::array<GangOwnerApi, 6> kApis = {{
    {"", "", "", "", ""},
    {"scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", "pg/"},
    {"scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", "volcano/"},
    {"jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", "jobset/"},
    {"kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", "pytorchjob/"},
    {"kubeflow.org", "v2beta1", "mpijobs", "MPIJob", "mpijob/"},
}};

// A string member of an optional object; "" if absent or not a string.
std::string_view StringIn(const std::optional<Object>& obj, std::string_view key) {
  if (!obj) return "";
  std::string_view v;
  auto m = Member(*obj, key);
  if (!m || m->get_string().get(v) != simdjson::SUCCESS) return "";
  return v;
}

std::optional<Object> ObjectIn(const Object& obj, std::string_view key) {
  Object o;
  auto m = Member(obj, key);
  if (!m || m->get_object().get(o) != simdjson::SUCCESS) return std::nullopt;
  return o;
}

// A count annotation `key` (absent: nullopt): 1..kMaxGangSize, else
// kGangSizeUnknown with why in `*reason`, naming the annotation.
int32_t Count(std::string_view key, std::optional<std::string_view> text, std::string* reason) {
  if (!text.has_value()) {
    *reason = StrCat("annotation ", key, " is missing (it gives the group's member count)");
    return kGangSizeUnknown;
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(ToAbsl(*text), &v) || v < 1 || v > kMaxGangSize) {
    *reason =
        StrCat("annotation ", key, ": '", *text, "' is not a member count (1..", kMaxGangSize, ")");
    return kGangSizeUnknown;
  }
  return static_cast<int32_t>(v);
}

// An annotation as a string; nullopt if absent or not a string.
std::optional<std::string_view> Annotation(const std::optional<Object>& ann, std::string_view key) {
  if (!ann) return std::nullopt;
  std::string_view v;
  auto m = Member(*ann, key);
  if (!m || m->get_string().get(v) != simdjson::SUCCESS) return std::nullopt;
  return v;
}

// The controller owner if it is a PyTorchJob or an MPIJob of the served
// versions; kind kNone otherwise.
GangOwner TrainingJobOwner(const Object& meta) {
  auto owners = Member(meta, "ownerReferences");
  simdjson::dom::array refs;
  if (!owners || owners->get_array().get(refs) != simdjson::SUCCESS) return {};
  for (Element ref : refs) {
    Object o;
    if (ref.get_object().get(o) != simdjson::SUCCESS) continue;
    bool controller = false;
    auto c = Member(o, "controller");
    if (!c || c->get_bool().get(controller) != simdjson::SUCCESS || !controller) continue;
    const std::optional<Object> ro = o;
    const std::string_view api = StringIn(ro, "apiVersion");
    const std::string_view kind = StringIn(ro, "kind");
    const std::string_view name = StringIn(ro, "name");
    if (name.empty()) continue;
    for (GangOwnerKind k : {GangOwnerKind::kPyTorchJob, GangOwnerKind::kMpiJob}) {
      const GangOwnerApi& a = GangOwnerApiOf(k);
      if (kind == a.kind && api == StrCat(a.group, "/", a.version)) {
        return {k, std::string(name)};
      }
    }
  }
  return {};
}

void SetOwned(PodRequest& pod, GangOwnerKind kind, std::string_view name) {
  pod.gang = StrCat(GangOwnerApiOf(kind).key_prefix, name);
  pod.gang_size = kGangSizeUnknown;
  pod.gang_owner = {kind, std::string(name)};
}

void SetCounted(PodRequest& pod, std::string_view prefix, std::string_view name,
                const std::optional<Object>& ann, std::string_view count_key) {
  pod.gang = StrCat(prefix, name);
  pod.gang_size = Count(count_key, Annotation(ann, count_key), &pod.gang_size_reason);
}

// Element as a non-negative count: absent/null = `dflt`; wrong type or
// negative = error naming `path`.
absl::StatusOr<int64_t> CountField(const Object& obj, std::string_view key, std::string_view path,
                                   int64_t dflt) {
  auto v = OptInt(obj, key, path);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return dflt;
  if (**v < 0) return absl::InvalidArgumentError(StrCat(path, ".", key, ": negative"));
  return **v;
}

absl::StatusOr<int64_t> JobSetSize(const Object& spec) {
  auto rj = Member(spec, "replicatedJobs");
  simdjson::dom::array jobs;
  if (!rj || rj->get_array().get(jobs) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("spec.replicatedJobs: missing or not an array");
  }
  int64_t total = 0;
  size_t i = 0;
  for (Element e : jobs) {
    const std::string path = StrCat("spec.replicatedJobs[", i++, "]");
    Object job;
    if (e.get_object().get(job) != simdjson::SUCCESS) return TypeError(path, "object");
    auto replicas = CountField(job, "replicas", path, 1);
    if (!replicas.ok()) return replicas.status();
    int64_t parallelism = 1;
    if (auto tmpl = ObjectIn(job, "template")) {
      if (auto tspec = ObjectIn(*tmpl, "spec")) {
        auto p = CountField(*tspec, "parallelism", StrCat(path, ".template.spec"), 1);
        if (!p.ok()) return p.status();
        parallelism = *p;
      }
    }
    total +=
        std::min<int64_t>(*replicas, kMaxGangSize) * std::min<int64_t>(parallelism, kMaxGangSize);
  }
  return total;
}

absl::StatusOr<int64_t> TrainingJobSize(const Object& spec, std::string_view replica_specs) {
  if (auto run = ObjectIn(spec, "runPolicy")) {
    if (auto sched = ObjectIn(*run, "schedulingPolicy")) {
      auto min = CountField(*sched, "minAvailable", "spec.runPolicy.schedulingPolicy", -1);
      if (!min.ok()) return min.status();
      if (*min >= 0) return *min;
    }
  }
  auto specs = ObjectIn(spec, replica_specs);
  if (!specs) {
    return absl::InvalidArgumentError(StrCat("spec.", replica_specs, ": missing or not an object"));
  }
  int64_t total = 0;
  for (auto [role, value] : *specs) {
    const std::string path = StrCat("spec.", replica_specs, ".", role);
    Object r;
    if (value.get_object().get(r) != simdjson::SUCCESS) return TypeError(path, "object");
    auto replicas = CountField(r, "replicas", path, 1);
    if (!replicas.ok()) return replicas.status();
    total += std::min<int64_t>(*replicas, kMaxGangSize);
  }
  return total;
}

}  // namespace

const GangOwnerApi& GangOwnerApiOf(GangOwnerKind kind) { return kApis[static_cast<size_t>(kind)]; }

void ApplyGangDeclarations(const Object& meta, PodRequest& pod) {
  if (!pod.gang.empty() || pod.gang_size > 0) return;  // gpusched.io/gang* win
  const std::optional<Object> labels = ObjectIn(meta, "labels");
  const std::optional<Object> ann = ObjectIn(meta, "annotations");
  if (auto v = StringIn(labels, kPodGroupLabel); !v.empty()) {
    return SetOwned(pod, GangOwnerKind::kPodGroup, v);
  }
  for (std::string_view key : {kVolcanoGroupAnnotation, kVolcanoGroupAnnotationAlt}) {
    if (auto v = StringIn(ann, key); !v.empty()) {
      return SetOwned(pod, GangOwnerKind::kVolcanoPodGroup, v);
    }
  }
  if (auto v = StringIn(labels, kKueueGroupLabel); !v.empty()) {
    return SetCounted(pod, "kueue/", v, ann, kKueueCountAnnotation);
  }
  if (auto v = StringIn(labels, kLwsGroupKeyLabel); !v.empty()) {
    return SetCounted(pod, "lws/", v, ann, kLwsSizeAnnotation);
  }
  if (auto v = StringIn(labels, kJobSetNameLabel); !v.empty()) {
    return SetOwned(pod, GangOwnerKind::kJobSet, v);
  }
  if (GangOwner owner = TrainingJobOwner(meta); owner.kind != GangOwnerKind::kNone) {
    return SetOwned(pod, owner.kind, owner.name);
  }
}

absl::StatusOr<GangOwnerSpec> DecodeGangOwner(GangOwnerKind kind, std::string_view name,
                                              std::string_view body) {
  if (kind == GangOwnerKind::kNone) return absl::InvalidArgumentError("no gang owner kind");
  simdjson::dom::parser parser;
  Element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(StrCat(GangOwnerApiOf(kind).kind, ": not JSON"));
  }
  Object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) return TypeError("", "object");
  auto spec = ObjectIn(obj, "spec");
  if (!spec) return absl::InvalidArgumentError("spec: missing or not an object");
  absl::StatusOr<int64_t> size;
  switch (kind) {
    case GangOwnerKind::kPodGroup:
    case GangOwnerKind::kVolcanoPodGroup:
      size = CountField(*spec, "minMember", "spec", 1);
      break;
    case GangOwnerKind::kJobSet:
      size = JobSetSize(*spec);
      break;
    case GangOwnerKind::kPyTorchJob:
      size = TrainingJobSize(*spec, "pytorchReplicaSpecs");
      break;
    case GangOwnerKind::kMpiJob:
      size = TrainingJobSize(*spec, "mpiReplicaSpecs");
      break;
    case GangOwnerKind::kNone:
      break;
  }
  if (!size.ok()) return size.status();
  if (*size > kMaxGangSize) {
    return absl::InvalidArgumentError(
        StrCat(GangOwnerApiOf(kind).kind, ": ", *size, " members; at most ", kMaxGangSize));
  }
  GangOwnerSpec out;
  out.size = static_cast<int32_t>(*size);
  if (kind == GangOwnerKind::kVolcanoPodGroup) out.topology = DecodeNetworkTopology(*spec, name);
  return out;
}

absl::StatusOr<int32_t> DecodeGangOwnerSize(GangOwnerKind kind, std::string_view body) {
  auto spec = DecodeGangOwner(kind, "", body);
  if (!spec.ok()) return spec.status();
  return spec->size;
}

}  // namespace gpusched::codec
