#include "scheduler/codec/sim_codec.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/internal/dom.h"

namespace gpusched::codec {
namespace {

constexpr std::string_view kJobFields[] = {"name",     "namespace",  "priorityClass",
                                           "priority", "gpusPerPod", "pods",
                                           "duration", "submit",     "gang"};

absl::Status CheckJobFields(const Object& o, std::string_view path) {
  for (auto field : o) {
    const std::string_view key = field.key;
    if (std::find(std::begin(kJobFields), std::end(kJobFields), key) == std::end(kJobFields)) {
      return absl::InvalidArgumentError(StrCat(path, ".", key, ": unknown field"));
    }
  }
  return absl::OkStatus();
}

// Reads an optional string member into `out` (left as is when absent).
absl::Status ReadString(const Object& o, std::string_view key, std::string_view path,
                        std::string* out) {
  GPUSCHED_ASSIGN_OR_RETURN(std::optional<std::string_view> v, OptString(o, key, path));
  if (v) *out = std::string(*v);
  return absl::OkStatus();
}

// Reads an optional integer member in [min, max] into `out`.
absl::Status ReadInt32(const Object& o, std::string_view key, std::string_view path, int32_t min,
                       int32_t* out) {
  GPUSCHED_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptInt(o, key, path));
  if (!v) return absl::OkStatus();
  if (*v < min || *v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": must be in [", min, ", ",
                                             std::numeric_limits<int32_t>::max(), "], got ", *v));
  }
  *out = static_cast<int32_t>(*v);
  return absl::OkStatus();
}

// Reads an optional non-negative number (integer or not) into `out`.
absl::Status ReadSeconds(const Object& o, std::string_view key, std::string_view path,
                         double* out) {
  std::optional<Element> e = Member(o, key);
  if (!e) return absl::OkStatus();
  double v = 0;
  if (e->get_double().get(v) != simdjson::SUCCESS) {
    return TypeError(StrCat(path, ".", key), "number");
  }
  if (!(v >= 0)) return absl::InvalidArgumentError(StrCat(path, ".", key, ": must be >= 0"));
  *out = v;
  return absl::OkStatus();
}

absl::Status ReadBool(const Object& o, std::string_view key, std::string_view path, bool* out) {
  GPUSCHED_ASSIGN_OR_RETURN(std::optional<bool> v, OptBool(o, key, path));
  if (v) *out = *v;
  return absl::OkStatus();
}

absl::StatusOr<sim::Job> DecodeJob(const Element& e, size_t index) {
  const std::string path = StrCat("jobs[", index, "]");
  Object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return TypeError(path, "object");
  GPUSCHED_RETURN_IF_ERROR(CheckJobFields(o, path));
  sim::Job job;
  job.id = StrCat("job-", index);
  job.ns = "default";
  GPUSCHED_RETURN_IF_ERROR(ReadString(o, "name", path, &job.id));
  GPUSCHED_RETURN_IF_ERROR(ReadString(o, "namespace", path, &job.ns));
  GPUSCHED_RETURN_IF_ERROR(ReadString(o, "priorityClass", path, &job.priority_class));
  GPUSCHED_RETURN_IF_ERROR(
      ReadInt32(o, "priority", path, std::numeric_limits<int32_t>::min(), &job.priority));
  GPUSCHED_RETURN_IF_ERROR(ReadInt32(o, "gpusPerPod", path, 0, &job.gpus_per_pod));
  GPUSCHED_RETURN_IF_ERROR(ReadInt32(o, "pods", path, 1, &job.pods));
  GPUSCHED_RETURN_IF_ERROR(ReadSeconds(o, "duration", path, &job.duration));
  GPUSCHED_RETURN_IF_ERROR(ReadSeconds(o, "submit", path, &job.submit));
  GPUSCHED_RETURN_IF_ERROR(ReadBool(o, "gang", path, &job.gang));
  return job;
}

}  // namespace

absl::StatusOr<std::vector<sim::Job>> DecodeJobs(std::string_view json) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  Element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("jobs: not valid JSON");
  }
  simdjson::dom::array entries;
  if (root.get_array().get(entries) != simdjson::SUCCESS) {
    return TypeError("jobs", "an array of objects");
  }
  std::vector<sim::Job> out;
  size_t index = 0;
  for (Element e : entries) {
    GPUSCHED_ASSIGN_OR_RETURN(sim::Job job, DecodeJob(e, index++));
    out.push_back(std::move(job));
  }
  return out;
}

std::string EncodeFgdResult(const sim::FgdResult& r) {
  nlohmann::ordered_json j;
  j["policy"] = r.policy;
  j["seed"] = r.seed;
  j["trace"] = r.trace;
  j["unallocated_gpu_pct_at_100"] = r.unallocated_at_100;
  j["allocated_gpu_pct_at_130"] = r.allocated_at_130;
  j["frag_total_pct_at_90"] = r.frag_total_at_90;
  j["frag_idle_pct_at_90"] = r.frag_idle_at_90;
  j["pods"] = r.pods;
  j["failed_pods"] = r.failed;
  j["decision_hash"] = std::to_string(r.decision_hash);
  j["seconds"] = r.seconds;
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  for (const sim::CurvePoint& c : r.curve) {
    curve.push_back({{"arrived_pct", c.arrived_pct},
                     {"allocated_pct", c.allocated_pct},
                     {"frag_total_pct", c.frag_total_pct},
                     {"frag_idle_pct", c.frag_idle_pct}});
  }
  j["curve"] = std::move(curve);
  return j.dump(1);
}

std::string EncodeReplayResult(const sim::ReplayResult& r) {
  nlohmann::ordered_json j;
  j["policy"] = r.policy;
  j["load"] = r.load;
  j["jobs"] = r.jobs;
  j["avg_jct_s"] = r.avg_jct;
  j["p50_jct_s"] = r.p50_jct;
  j["p95_jct_s"] = r.p95_jct;
  j["p99_jct_s"] = r.p99_jct;
  j["avg_queueing_s"] = r.avg_queue;
  j["makespan_s"] = r.makespan;
  j["gpu_utilisation"] = r.utilisation;
  j["preemptions"] = r.preemptions;
  j["reclaim_evictions"] = r.reclaim_evictions;
  j["lost_gpu_seconds"] = r.lost_gpu_seconds;
  j["quota_violations"] = r.quota_violations;
  j["fairness_max_min_slowdown"] = r.fairness;
  if (r.share_metrics) {  // every one-pool policy (sim/share_metrics.h); null: not defined
    j["guarantee_episodes"] = r.guarantee_episodes;
    j["avg_time_to_guarantee_s"] = r.avg_time_to_guarantee;
    j["p95_time_to_guarantee_s"] = r.p95_time_to_guarantee;
    j["max_time_to_guarantee_s"] = r.max_time_to_guarantee;
    j["gpu_util_while_waiting"] =
        r.util_while_waiting >= 0 ? nlohmann::ordered_json(r.util_while_waiting) : nullptr;
    j["surplus_fairness_jain"] =
        r.surplus_jain >= 0 ? nlohmann::ordered_json(r.surplus_jain) : nullptr;
  }
  j["gang_jobs"] = r.gang_jobs;
  j["max_gang_wait_s"] = r.max_gang_wait;
  if (r.has_estimates) {
    const sim::EstimateAccuracy& e = r.estimates;
    j["estimates"] = {{"samples", e.samples},
                      {"median_abs_error_s", e.median_abs_error_s},
                      {"within_25pct", e.within_25pct},
                      {"naive_median_abs_error_s", e.naive_median_abs_error_s},
                      {"naive_within_25pct", e.naive_within_25pct},
                      {"backfill_overruns", e.backfill_overruns},
                      {"backfill_heads_passed", e.backfill_heads_passed},
                      {"backfill_head_slips", e.backfill_head_slips}};
  }
  nlohmann::ordered_json ns = nlohmann::ordered_json::object();
  for (const auto& [name, s] : r.per_ns) {
    ns[name] = {{"jobs", s.jobs},
                {"quota_gpus", s.quota_gpus},
                {"avg_jct_s", s.avg_jct},
                {"avg_queueing_s", s.avg_queue},
                {"avg_slowdown", s.avg_slowdown},
                {"max_borrowed_gpus", s.max_borrowed}};
  }
  j["namespaces"] = std::move(ns);
  return j.dump(1);
}

}  // namespace gpusched::codec
