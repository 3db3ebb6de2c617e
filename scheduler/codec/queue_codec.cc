#include "scheduler/codec/queue_codec.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "scheduler/codec/kube_codec.h"

namespace gpusched::codec {
namespace {

using json = nlohmann::ordered_json;

double Gpus(int64_t milli) { return static_cast<double>(milli) / 1000.0; }

// The estimate fields of a pending pod (QueuedPod, PodReport).
void AddEstimate(json& out, int64_t start_unix, const std::string& basis, int64_t runtime,
                 const std::string& source) {
  out["estimatedStart"] = start_unix >= 0 ? json(FormatRfc3339(start_unix)) : json(nullptr);
  out["estimateBasis"] = basis;
  if (source.empty()) return;
  out["runtimeEstimateSeconds"] = runtime;
  out["runtimeEstimateSource"] = source;
}

}  // namespace

std::string FormatRfc3339(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

std::string EncodeQueueReport(const queue::QueueReport& report) {
  json out = json::object();
  out["quotasEnabled"] = report.quotas_enabled;
  if (!report.quota_source.empty()) out["quotaSource"] = report.quota_source;
  json namespaces = json::array();
  for (const queue::NamespaceQueue& n : report.namespaces) {
    json queue = json::array();
    for (const queue::QueuedPod& p : n.queue) {
      json q = {{"position", p.position},
                {"name", p.name},
                {"uid", p.uid},
                {"priority", p.priority},
                {"priorityClassName", p.priority_class},
                {"gpus", Gpus(p.gpu_milli)},
                {"waitSeconds", p.wait_seconds},
                {"admissible", p.reason.empty()},
                {"reason", p.reason}};
      if (!p.gang.empty()) {
        q["gang"] = p.gang;
        q["gangSize"] = p.gang_size;
      }
      if (p.attained_level >= 0) q["attainedServiceLevel"] = p.attained_level;
      AddEstimate(q, p.estimated_start_unix, p.estimate_basis, p.runtime_seconds, p.runtime_source);
      queue.push_back(std::move(q));
    }
    json models = json::array();
    for (const queue::ModelQuotaUse& m : n.models) {
      models.push_back({{"model", m.model},
                        {"guaranteedGpus", Gpus(m.guaranteed_milli)},
                        {"limitGpus", Gpus(m.limit_milli)},
                        {"usageGpus", Gpus(m.usage_milli)}});
    }
    namespaces.push_back({{"namespace", n.ns},
                          {"cohort", n.cohort},
                          {"guaranteedGpus", Gpus(n.guaranteed_milli)},
                          {"limitGpus", Gpus(n.limit_milli)},
                          {"usageGpus", Gpus(n.usage_milli)},
                          {"borrowedGpus", Gpus(n.borrowed_milli)},
                          {"lendableGpus", Gpus(n.lendable_milli)},
                          {"cohortLendableGpus", Gpus(n.cohort_lendable_milli)},
                          {"weight", n.weight},
                          {"fairShareGpus", Gpus(n.fair_share_milli)},
                          {"models", std::move(models)},
                          {"pendingPods", n.pending_pods},
                          {"pendingGpus", Gpus(n.pending_milli)},
                          {"listedPods", n.queue.size()},
                          {"queue", std::move(queue)}});
  }
  out["namespaces"] = std::move(namespaces);
  json reservations = json::array();
  for (const queue::GangReservationReport& r : report.reservations) {
    json nodes = json::array();
    for (const auto& [node, devices] : r.nodes)
      nodes.push_back({{"node", node}, {"gpus", devices}});
    reservations.push_back({{"namespace", r.ns},
                            {"gang", r.gang},
                            {"slots", r.slots},
                            {"bound", r.bound},
                            {"expiresInSeconds", r.expires_in_seconds},
                            {"nodes", std::move(nodes)}});
  }
  out["gangReservations"] = std::move(reservations);
  return out.dump(2) + "\n";
}

std::string EncodePodReport(const queue::PodReport& report) {
  json out = {{"namespace", report.ns},
              {"name", report.name},
              {"uid", report.uid},
              {"state", report.state}};
  if (!report.node.empty()) out["node"] = report.node;
  if (report.shows_devices) {
    auto ids = [](const std::optional<uint64_t>& m) {
      return m.has_value() ? json(FormatGpuIds(*m)) : json(nullptr);
    };
    out["recordedGpuIds"] = ids(report.recorded_devices);
    out["confirmedGpuIds"] = ids(report.confirmed_devices);
    out["countedGpuIds"] = FormatGpuIds(report.counted_devices);
  }
  if (report.state == "pending") {
    out["position"] = report.position;
    out["reason"] = report.reason;
    json preemption = json::array();
    for (const queue::PreemptionPreview& p : report.preemption) {
      preemption.push_back({{"node", p.node}, {"victims", p.victims}});
    }
    out["preemption"] = std::move(preemption);
    AddEstimate(out, report.estimated_start_unix, report.estimate_basis, report.runtime_seconds,
                report.runtime_source);
    if (!report.runtime_detail.empty()) out["runtimeEstimateDetail"] = report.runtime_detail;
    if (!report.runtime_rejected.empty()) out["runtimeEstimateRejected"] = report.runtime_rejected;
    out["whatIf"] = report.what_if;
  }
  return out.dump(2) + "\n";
}

}  // namespace gpusched::codec

namespace gpusched::codec {
namespace {

// obj[key] as a string ("" when absent or not a string); never throws.
std::string StringAt(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const nlohmann::json& ObjectAt(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (!obj.is_object()) return kEmpty;
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}

// nvidia.com/gpu of a pod: per container its limit, else its request.
std::string PodGpus(const nlohmann::json& spec) {
  int64_t sum = 0;
  auto containers = spec.is_object() ? spec.find("containers") : spec.end();
  if (!spec.is_object() || containers == spec.end() || !containers->is_array()) return "0";
  for (const auto& c : *containers) {
    const nlohmann::json& res = ObjectAt(c, "resources");
    std::string v = StringAt(ObjectAt(res, "limits"), "nvidia.com/gpu");
    if (v.empty()) v = StringAt(ObjectAt(res, "requests"), "nvidia.com/gpu");
    if (!v.empty() && v.size() < 6 && std::all_of(v.begin(), v.end(), ::isdigit)) {
      sum += std::stoll(v);
    }
  }
  return std::to_string(sum);
}

}  // namespace

std::string EncodeQueueStatusPatch(const std::string& position, const std::string& reason,
                                   const std::optional<std::string>& estimated_start) {
  json patch = {{"metadata",
                 {{"annotations",
                   {{kQueuePositionAnnotation, position}, {kQueueReasonAnnotation, reason}}}}}};
  if (estimated_start.has_value()) {
    patch["metadata"]["annotations"][kAnnotationEstimatedStart] =
        estimated_start->empty() ? json(nullptr) : json(*estimated_start);
  }
  return patch.dump();
}

absl::StatusOr<std::vector<QueueListRow>> DecodeQueueList(std::string_view body) {
  nlohmann::json list = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_object()) {
    return absl::InvalidArgumentError("pod list: not a JSON object");
  }
  auto items = list.find("items");
  if (items == list.end() || !(items->is_array() || items->is_null())) {
    return absl::InvalidArgumentError("pod list: items: expected an array");
  }
  std::vector<QueueListRow> rows;
  if (items->is_null()) return rows;
  for (const auto& pod : *items) {
    const nlohmann::json& meta = ObjectAt(pod, "metadata");
    const nlohmann::json& annotations = ObjectAt(meta, "annotations");
    const nlohmann::json& spec = ObjectAt(pod, "spec");
    QueueListRow r;
    r.ns = StringAt(meta, "namespace");
    r.name = StringAt(meta, "name");
    r.position = StringAt(annotations, kQueuePositionAnnotation);
    r.reason = StringAt(annotations, kQueueReasonAnnotation);
    r.priority_class = StringAt(spec, "priorityClassName");
    r.gpus = PodGpus(spec);
    r.created = StringAt(meta, "creationTimestamp");
    r.node = StringAt(spec, "nodeName");
    r.estimated_start = StringAt(annotations, kAnnotationEstimatedStart);
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace gpusched::codec
