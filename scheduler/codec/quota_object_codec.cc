#include "scheduler/codec/quota_object_codec.h"

#include <functional>
#include <nlohmann/json.hpp>

#include "gpusched/util/quantity.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/internal/duplicate_keys.h"
#include "scheduler/codec/internal/quota_fields.h"
#include "scheduler/codec/queue_codec.h"

namespace gpusched::codec {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using queue::QuotaObject;
using queue::QuotaObjectKind;

constexpr char kGpuResource[] = "nvidia.com/gpu";

std::string Str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// spec.min / spec.max ["nvidia.com/gpu"]: absent -> -1.
absl::StatusOr<int64_t> GpuAmount(const json& spec, const char* field) {
  auto list = spec.find(field);
  if (list == spec.end() || list->is_null()) return -1;
  const std::string path = StrCat("spec.", field);
  if (!list->is_object()) return absl::InvalidArgumentError(StrCat(path, ": must be an object"));
  auto q = list->find(kGpuResource);
  if (q == list->end()) return -1;
  std::string text;
  if (q->is_string()) {
    text = q->get<std::string>();
  } else if (q->is_number_integer()) {
    text = std::to_string(q->get<int64_t>());
  } else {
    return absl::InvalidArgumentError(StrCat(path, ".", kGpuResource, ": must be a quantity"));
  }
  auto v = ParseQuantityInteger(text);
  if (!v.ok() || *v < 0 || *v > queue::kUnlimitedGpus) {
    return absl::InvalidArgumentError(StrCat(path, ".", kGpuResource,
                                             ": must be a whole number of GPUs in [0, ",
                                             queue::kUnlimitedGpus, "], got '", text, "'"));
  }
  return *v;
}

// ElasticQuota: min -> guaranteed, max -> limit (unset: unlimited).
void DecodeElasticSpec(const json& spec, QuotaObject& o) {
  auto min = GpuAmount(spec, "min");
  auto max = GpuAmount(spec, "max");
  for (const auto* s : {&min, &max}) {
    if (!s->ok()) {
      o.error = std::string(s->status().message());
      return;
    }
  }
  if (*min < 0 && *max < 0) return;  // says nothing about GPUs
  NamespaceQuota q;
  q.gpus.guaranteed = std::max<int64_t>(0, *min);
  q.gpus.limit = *max < 0 ? queue::kUnlimitedGpus : *max;
  q.cohort = queue::kElasticQuotaCohort;
  if (q.gpus.limit < q.gpus.guaranteed) {
    o.error = StrCat("spec.max.", kGpuResource, ": must be >= min (", q.gpus.guaranteed, "), got ",
                     q.gpus.limit);
    return;
  }
  o.spec = std::move(q);
}

// `duplicate`: the path of a key repeated within `obj` ("" if none). Such an
// object is refused like an invalid spec (its last valid spec stays): which
// of the values was meant is unknown.
QuotaObject FromJson(QuotaObjectKind kind, const json& obj, const std::string& duplicate) {
  QuotaObject o;
  o.kind = kind;
  const json meta = obj.value("metadata", json::object());
  if (meta.is_object()) {
    o.ns = Str(meta, "namespace");
    o.name = Str(meta, "name");
    o.uid = Str(meta, "uid");
    o.created = Str(meta, "creationTimestamp");
    if (auto g = meta.find("generation"); g != meta.end() && g->is_number_integer()) {
      o.generation = g->get<int64_t>();
    }
  }
  if (!duplicate.empty()) {
    o.error = StrCat(duplicate, ": ", kDuplicateKeyMessage);
    return o;
  }
  auto spec = obj.find("spec");
  if (spec == obj.end() || !spec->is_object()) {
    if (kind == QuotaObjectKind::kGpuQuota) o.error = "spec: required, must be an object";
    return o;
  }
  if (kind == QuotaObjectKind::kElasticQuota) {
    DecodeElasticSpec(*spec, o);
    return o;
  }
  NamespaceQuota q;
  if (auto s = DecodeNamespaceQuotaJson(*spec, "spec", q); !s.ok()) {
    o.error = std::string(s.message());
    return o;
  }
  o.spec = std::move(q);
  return o;
}

absl::StatusOr<json> Parse(std::string_view text, const char* what,
                           DuplicateKeyFinder& duplicates) {
  json j = json::parse(text, std::ref(duplicates), false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(StrCat(what, ": not a JSON object"));
  }
  return j;
}

// A list or watch event whose own keys (not its objects') repeat is refused
// as a whole: which items, type or object was meant is unknown.
absl::Status CheckOwnKeys(const DuplicateKeyFinder& duplicates, const char* what) {
  if (duplicates.outside_objects().empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(what, ": ", duplicates.outside_objects(), ": ", kDuplicateKeyMessage));
}

std::string Quoted(std::string_view s) { return json(std::string(s)).dump(); }

}  // namespace

const QuotaObjectApi& QuotaObjectApiOf(QuotaObjectKind kind) {
  static const QuotaObjectApi kGpuQuota{"gpusched.io", "v1alpha1", "gpuquotas", "GPUQuota"};
  static const QuotaObjectApi kElastic{"scheduling.x-k8s.io", "v1alpha1", "elasticquotas",
                                       "ElasticQuota"};
  return kind == QuotaObjectKind::kGpuQuota ? kGpuQuota : kElastic;
}

absl::StatusOr<QuotaObject> DecodeQuotaObject(QuotaObjectKind kind, std::string_view body) {
  DuplicateKeyFinder duplicates;
  auto j = Parse(body, QuotaObjectApiOf(kind).kind.data(), duplicates);
  if (!j.ok()) return j.status();
  return FromJson(kind, *j, duplicates.first());
}

absl::StatusOr<QuotaObjectPage> DecodeQuotaObjectList(QuotaObjectKind kind, std::string_view body) {
  DuplicateKeyFinder duplicates("items");
  auto j = Parse(body, "list", duplicates);
  if (!j.ok()) return j.status();
  if (auto s = CheckOwnKeys(duplicates, "list"); !s.ok()) return s;
  QuotaObjectPage page;
  const json meta = j->value("metadata", json::object());
  if (meta.is_object()) {
    page.resource_version = Str(meta, "resourceVersion");
    page.continue_token = Str(meta, "continue");
  }
  auto items = j->find("items");
  if (items != j->end() && !items->is_null()) {
    if (!items->is_array()) return absl::InvalidArgumentError("list: items must be an array");
    for (size_t i = 0; i < items->size(); ++i) {
      const json& item = (*items)[i];
      if (item.is_object()) page.items.push_back(FromJson(kind, item, duplicates.InObject(i)));
    }
  }
  return page;
}

absl::StatusOr<QuotaObjectEvent> DecodeQuotaObjectEvent(QuotaObjectKind kind,
                                                        std::string_view line) {
  DuplicateKeyFinder duplicates("object");
  auto j = Parse(line, "watch event", duplicates);
  if (!j.ok()) return j.status();
  if (auto s = CheckOwnKeys(duplicates, "watch event"); !s.ok()) return s;
  QuotaObjectEvent ev;
  const std::string type = Str(*j, "type");
  const json obj = j->value("object", json::object());
  if (!obj.is_object()) return absl::InvalidArgumentError("watch event: object must be an object");
  if (type == "ERROR") {
    ev.type = WatchEvent::Type::kError;
    ev.status = DecodeStatus(obj.dump());
    return ev;
  }
  GPUSCHED_ASSIGN_OR_RETURN(ev.type, WatchEventType(type, "watch event"));
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
    ev.resource_version = Str(*m, "resourceVersion");
  }
  if (ev.type != WatchEvent::Type::kBookmark)
    ev.object = FromJson(kind, obj, duplicates.InObject(0));
  return ev;
}

std::string EncodeQuotaObjectStatusPatch(const queue::QuotaObjectStatus& s,
                                         const std::vector<std::string>& since) {
  ojson status = ojson::object();
  status["observedGeneration"] = s.observed_generation;
  const bool enforced = !s.used.empty();
  if (enforced) {
    status["guaranteed"] = s.guaranteed;
    status["limit"] = s.limit;
    status["cohort"] = s.cohort;
    status["used"] = s.used;
    status["borrowed"] = s.borrowed;
    status["lent"] = s.lent;
    ojson borrowers = ojson::array();
    for (const queue::QuotaBorrower& b : s.borrowers) {
      borrowers.push_back({{"namespace", b.ns}, {"gpus", b.gpus}});
    }
    status["borrowers"] = std::move(borrowers);
    status["pendingPods"] = s.pending_pods;
    status["pendingGPUs"] = s.pending_gpus;
    if (s.head.empty()) {
      status["head"] = nullptr;  // merge patch: remove
    } else {
      status["head"] = {{"pod", s.head},
                        {"reason", s.head_reason.empty()
                                       ? "admissible now: waiting for kube-scheduler to place it"
                                       : s.head_reason}};
      // Merge patch: null removes an estimate the head no longer has.
      status["head"]["estimatedStart"] = s.head_estimated_start >= 0
                                             ? ojson(FormatRfc3339(s.head_estimated_start))
                                             : ojson(nullptr);
    }
  } else {
    for (const char* key : {"guaranteed", "limit", "cohort", "used", "borrowed", "lent",
                            "borrowers", "pendingPods", "pendingGPUs", "head"}) {
      status[key] = nullptr;
    }
  }
  ojson conditions = ojson::array();
  for (size_t i = 0; i < s.conditions.size(); ++i) {
    const queue::QuotaCondition& c = s.conditions[i];
    conditions.push_back({{"type", c.type},
                          {"status", c.status ? "True" : "False"},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastTransitionTime", i < since.size() ? since[i] : ""}});
  }
  status["conditions"] = std::move(conditions);
  ojson patch = {{"status", std::move(status)}};
  return patch.dump();
}

std::string EncodeQuotaExport(const QuotaConfig& quotas, std::string_view object_name) {
  std::string out;
  const QuotaObjectApi& api = QuotaObjectApiOf(QuotaObjectKind::kGpuQuota);
  for (const auto& [ns, q] : quotas.namespaces) {
    StrAppend(&out, "---\napiVersion: ", api.group, "/", api.version, "\nkind: ", api.kind,
              "\nmetadata:\n  name: ", Quoted(object_name), "\n  namespace: ", Quoted(ns),
              "\nspec:\n  guaranteed: ", q.gpus.guaranteed, "\n  limit: ", q.gpus.limit, "\n");
    if (!q.cohort.empty()) StrAppend(&out, "  cohort: ", Quoted(q.cohort), "\n");
    if (q.weight != 1.0) StrAppend(&out, "  weight: ", q.weight, "\n");
    if (q.queueing == QueueingStrategy::kBackfill) {
      StrAppend(&out, "  queueingStrategy: Backfill\n");
    }
    if (q.queueing == QueueingStrategy::kStrictFifo) {
      StrAppend(&out, "  queueingStrategy: StrictFIFO\n");
    }
    if (!q.attained.enabled) {
      StrAppend(&out, "  attainedService:\n    enabled: false\n");
    } else if (q.attained != kDefaultAttainedService) {
      StrAppend(&out, "  attainedService:\n    demoteAfterGpuHours: ",
                static_cast<double>(q.attained.demote_after_gpu_seconds) / 3600.0,
                "\n    preemptionsPerHour: ", q.attained.preemptions_per_hour, "\n");
    }
    if (!q.models.empty()) {
      StrAppend(&out, "  models:\n");
      for (const auto& [model, a] : q.models) {
        StrAppend(&out, "    ", Quoted(model), ":\n      guaranteed: ", a.guaranteed,
                  "\n      limit: ", a.limit, "\n");
      }
    }
  }
  return out;
}

}  // namespace gpusched::codec
