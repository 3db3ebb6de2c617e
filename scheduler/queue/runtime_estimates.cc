#include "scheduler/queue/runtime_estimates.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/status/status.h"
#include "gpusched/util/strings.h"

namespace gpusched::queue {

using ::gpusched::StrCat;

std::string_view SourceName(EstimateSource source) {
  switch (source) {
    case EstimateSource::kDeadline:
      return "activeDeadlineSeconds";
    case EstimateSource::kJobDeadline:
      return "job-activeDeadlineSeconds";
    case EstimateSource::kAnnotation:
      return "annotation";
    case EstimateSource::kWorkloadHistory:
      return "workload-history";
    case EstimateSource::kNamespaceHistory:
      return "namespace-history";
    case EstimateSource::kNone:
      break;
  }
  return "none";
}

namespace {

// Seconds per unit letter, 0 if not one.
double UnitSeconds(char c) {
  switch (c) {
    case 'h':
      return 3600;
    case 'm':
      return 60;
    case 's':
      return 1;
    default:
      return 0;
  }
}

// Reads one "<number><unit>" term at text[*i]; adds its seconds to *total.
absl::Status ReadTerm(std::string_view text, size_t* i, double* total) {
  const size_t start = *i;
  double value = 0, scale = 0;
  int digits = 0;
  for (; *i < text.size(); ++*i) {
    const char c = text[*i];
    if (c == '.' && scale == 0) {
      scale = 1;
      continue;
    }
    if (c < '0' || c > '9') break;
    if (++digits > 12) return absl::InvalidArgumentError("number too long");
    if (scale == 0) {
      value = value * 10 + (c - '0');
    } else {
      scale /= 10;
      value += (c - '0') * scale;
    }
  }
  if (digits == 0) {
    return absl::InvalidArgumentError(
        StrCat("expected a number at '", text.substr(start), "' (e.g. 2h30m, 90m, 3600s)"));
  }
  if (*i >= text.size() || UnitSeconds(text[*i]) == 0) {
    return absl::InvalidArgumentError(
        StrCat("a number needs a unit h, m or s at '", text.substr(start), "'"));
  }
  *total += value * UnitSeconds(text[(*i)++]);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ParseRuntime(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  if (text[0] == '-') return absl::InvalidArgumentError(StrCat("'", text, "' is negative"));
  double total = 0;
  size_t i = text[0] == '+' ? 1 : 0;
  while (i < text.size()) {
    absl::Status st = ReadTerm(text, &i, &total);
    if (!st.ok()) return absl::InvalidArgumentError(StrCat("'", text, "': ", st.message()));
    if (total > static_cast<double>(kMaxRuntimeSeconds)) {
      return absl::InvalidArgumentError(
          StrCat("'", text, "' is longer than ", kMaxRuntimeSeconds / 3600, "h"));
    }
  }
  const auto seconds = static_cast<int64_t>(std::llround(total));
  if (seconds < 1) return absl::InvalidArgumentError(StrCat("'", text, "' is under 1s"));
  return seconds;
}

std::string FormatRuntime(int64_t seconds) {
  if (seconds <= 0) return "0s";
  std::string out;
  if (seconds >= 3600) StrAppend(&out, seconds / 3600, "h");
  if (seconds % 3600 >= 60) StrAppend(&out, seconds % 3600 / 60, "m");
  if (seconds % 60 != 0 || out.empty()) StrAppend(&out, seconds % 60, "s");
  return out;
}

uint32_t RunTag(std::string_view uid) {
  uint32_t h = 2166136261u;
  for (char c : uid) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h;
}

void RuntimeHistory::Add(const std::string& key, const Run& id, Slot slot) {
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (keys_.size() >= options_.max_keys) {
      auto oldest = std::min_element(keys_.begin(), keys_.end(), [](const auto& a, const auto& b) {
        return a.second.last_seq < b.second.last_seq;
      });
      keys_.erase(oldest);
    }
    it = keys_.emplace(key, Key{}).first;
    it->second.id = id;
  }
  Key& k = it->second;
  if (k.ring.size() < options_.per_key) {
    k.ring.push_back(slot);
  } else {
    k.ring[k.next] = slot;
    k.next = (k.next + 1) % k.ring.size();
  }
  k.last_seq = ++seq_;
  std::vector<int64_t> sorted;
  sorted.reserve(k.ring.size());
  for (const Slot& s : k.ring) sorted.push_back(s.seconds);
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest runtime at or above the share asked.
  auto rank = [&](double q) {
    const auto r = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::clamp<size_t>(r, 1, sorted.size()) - 1];
  };
  k.q = {rank(0.5), rank(0.9), static_cast<int32_t>(sorted.size())};
}

void RuntimeHistory::Record(const std::string& ns, const std::string& workload, int32_t gpus,
                            int64_t seconds, uint32_t tag) {
  if (seconds < 1 || seconds > kMaxRuntimeSeconds || options_.per_key == 0) return;
  const Slot slot{static_cast<uint32_t>(seconds), tag};
  if (!workload.empty()) Add(StrCat("w/", ns, "/", workload), {ns, workload, gpus, 0}, slot);
  Add(StrCat("g/", ns, "/", gpus), {ns, "", gpus, 0}, slot);
}

std::optional<RuntimeHistory::Quantiles> RuntimeHistory::ForWorkload(
    const std::string& ns, const std::string& workload) const {
  auto it = keys_.find(StrCat("w/", ns, "/", workload));
  if (it == keys_.end()) return std::nullopt;
  return it->second.q;
}

std::optional<RuntimeHistory::Quantiles> RuntimeHistory::ForShape(const std::string& ns,
                                                                  int32_t gpus) const {
  auto it = keys_.find(StrCat("g/", ns, "/", gpus));
  if (it == keys_.end()) return std::nullopt;
  return it->second.q;
}

std::vector<RuntimeHistory::Run> RuntimeHistory::Runs() const {
  std::vector<Run> out;
  for (const auto& [key, k] : keys_) {
    for (size_t i = 0; i < k.ring.size(); ++i) {
      Run r = k.id;
      r.seconds = k.ring[(k.next + i) % k.ring.size()].seconds;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<PersistedWorkload> RuntimeHistory::Workloads() const {
  std::vector<const Key*> keys;
  for (const auto& [name, k] : keys_) {
    if (!k.id.workload.empty()) keys.push_back(&k);
  }
  std::sort(keys.begin(), keys.end(),
            [](const Key* a, const Key* b) { return a->last_seq > b->last_seq; });
  if (keys.size() > kPersistedWorkloads) keys.resize(kPersistedWorkloads);
  std::vector<PersistedWorkload> out;
  out.reserve(keys.size());
  for (const Key* k : keys) {
    PersistedWorkload w{k->id.ns, k->id.workload, k->id.gpus, {}};
    const size_t n = std::min(k->ring.size(), kPersistedRunsPerWorkload);
    for (size_t i = k->ring.size() - n; i < k->ring.size(); ++i) {
      const Slot& s = k->ring[(k->next + i) % k->ring.size()];
      w.runs.push_back({s.seconds, s.tag});
    }
    out.push_back(std::move(w));
  }
  return out;
}

namespace {

// Source 1: spec.activeDeadlineSeconds, if usable.
std::optional<int64_t> FromDeadline(const PodRequest& pod, std::vector<std::string>* rejected) {
  const int64_t d = pod.active_deadline_s;
  if (d == 0) return std::nullopt;
  if (d < 0) {
    rejected->push_back(StrCat("spec.activeDeadlineSeconds ", d, " is not a positive integer"));
  } else if (d > kMaxRuntimeSeconds) {
    rejected->push_back(StrCat("spec.activeDeadlineSeconds ", d, " is longer than ",
                               kMaxRuntimeSeconds / 3600, "h"));
  } else {
    return d;
  }
  return std::nullopt;
}

// Source 2: what is left at `now_s` of the controlling Job's deadline.
std::optional<int64_t> FromJobDeadline(const PodRequest& pod, int64_t now_s,
                                       std::vector<std::string>* rejected) {
  const int64_t d = pod.job_deadline_s;
  if (d == 0) return std::nullopt;
  if (d < 0 || d > kMaxRuntimeSeconds) {
    rejected->push_back(StrCat("Job spec.activeDeadlineSeconds ", d, " is ",
                               d < 0 ? "not a positive integer" : "longer than ",
                               d < 0 ? "" : StrCat(kMaxRuntimeSeconds / 3600, "h")));
    return std::nullopt;
  }
  if (pod.job_start_unix <= 0) return d;  // not started: the clock starts with it
  return std::max(kMinJobRemainingSeconds, pod.job_start_unix + d - now_s);
}

std::string JobDeadlineDetail(const PodRequest& pod, int64_t left) {
  if (pod.job_start_unix <= 0) {
    return StrCat("Job spec.activeDeadlineSeconds ", pod.job_deadline_s,
                  " (the Job has not started: counted from now)");
  }
  return StrCat("Job spec.activeDeadlineSeconds ", pod.job_deadline_s,
                " from its status.startTime ", pod.job_start_unix, ": ", FormatRuntime(left),
                " left", left == kMinJobRemainingSeconds ? " (at least)" : "");
}

}  // namespace

namespace {

// Quantiles of the pod's workload (`workload`) or of its namespace and GPU
// count, or none.
using QuantilesOf = std::function<std::optional<RuntimeHistory::Quantiles>(bool workload)>;

RuntimeEstimate Estimate(const PodRequest& pod, int64_t now_s, const QuantilesOf& quantiles_of) {
  RuntimeEstimate e;
  if (auto d = FromDeadline(pod, &e.rejected)) {
    e.seconds = *d;
    e.source = EstimateSource::kDeadline;
    e.detail = StrCat("spec.activeDeadlineSeconds ", *d);
    return e;
  }
  if (auto d = FromJobDeadline(pod, now_s, &e.rejected)) {
    e.seconds = *d;
    e.source = EstimateSource::kJobDeadline;
    e.detail = JobDeadlineDetail(pod, *d);
    return e;
  }
  if (!pod.expected_runtime.empty()) {
    auto r = ParseRuntime(pod.expected_runtime);
    if (r.ok()) {
      e.seconds = *r;
      e.source = EstimateSource::kAnnotation;
      e.detail = StrCat(kAnnotationExpectedRuntime, " ", pod.expected_runtime);
      return e;
    }
    e.rejected.push_back(StrCat(kAnnotationExpectedRuntime, ": ", r.status().message()));
  }
  const std::string& workload = pod.WorkloadKey();
  const int32_t gpus = pod.gpu.count;
  auto q = quantiles_of(/*workload=*/true);
  e.source = EstimateSource::kWorkloadHistory;
  std::string of = StrCat("workload ", pod.ns, "/", workload);
  if (!q) {
    q = quantiles_of(/*workload=*/false);
    e.source = EstimateSource::kNamespaceHistory;
    of = StrCat("namespace ", pod.ns, " with ", gpus, " GPUs");
  }
  if (!q) {
    e.source = EstimateSource::kNone;
    e.detail = StrCat("no estimate: no usable activeDeadlineSeconds (pod or Job) or ",
                      kAnnotationExpectedRuntime, ", and no completed runs of workload ", pod.ns,
                      "/", workload, " or of namespace ", pod.ns, " with ", gpus, " GPUs");
    return e;
  }
  e.seconds = q->p50;
  e.p90 = q->p90;
  e.runs = q->runs;
  e.detail =
      StrCat("p50 of ", q->runs, " completed runs of ", of, " (p90 ", FormatRuntime(q->p90), ")");
  return e;
}

}  // namespace

RuntimeEstimate EstimateRuntime(const PodRequest& pod, const RuntimeHistory& history,
                                int64_t now_s) {
  return Estimate(pod, now_s, [&](bool workload) {
    return workload ? history.ForWorkload(pod.ns, pod.WorkloadKey())
                    : history.ForShape(pod.ns, pod.gpu.count);
  });
}

RuntimeFacts FactsOf(const RuntimeEstimate& e) { return {e.seconds, e.p90, e.runs, e.source}; }

RuntimeEstimate DescribeRuntime(const PodRequest& pod, const RuntimeFacts& facts, int64_t now_s) {
  // The pod's own inputs decide the same way again; history answers only
  // for the key the facts came from.
  return Estimate(pod, now_s, [&](bool workload) -> std::optional<RuntimeHistory::Quantiles> {
    const EstimateSource from =
        workload ? EstimateSource::kWorkloadHistory : EstimateSource::kNamespaceHistory;
    if (facts.source != from) return std::nullopt;
    return RuntimeHistory::Quantiles{facts.seconds, facts.p90, facts.runs};
  });
}

}  // namespace gpusched::queue
