#include "scheduler/codec/config_codec.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpusched/model/topology.h"
#include "gpusched/model/topology_domains.h"
#include "gpusched/policy/registry.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/internal/duplicate_keys.h"
#include "scheduler/codec/internal/quota_fields.h"

namespace gpusched::codec {
namespace {

using json = nlohmann::json;

absl::Status FieldError(std::string_view path, std::string_view msg) {
  return absl::InvalidArgumentError(StrCat(path, ": ", msg));
}

std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : StrCat(path, ".", key);
}

absl::Status CheckKeys(const json& obj, std::string_view path,
                       std::initializer_list<std::string_view> allowed) {
  if (!obj.is_object()) return FieldError(path.empty() ? "config" : path, "must be an object");
  for (const auto& [key, value] : obj.items()) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || key == a;
    if (!ok) return FieldError(Join(path, key), "unknown field");
  }
  return absl::OkStatus();
}

absl::Status GetInt(const json& obj, std::string_view key, std::string_view path, int64_t min,
                    int64_t max, int64_t* out) {
  if (!obj.contains(key)) return absl::OkStatus();
  const json& v = obj.at(std::string(key));
  if (!v.is_number_integer()) return FieldError(Join(path, key), "must be an integer");
  int64_t x = v.get<int64_t>();
  if (x < min || x > max) {
    return FieldError(Join(path, key), StrCat("must be in [", min, ", ", max, "], got ", x));
  }
  *out = x;
  return absl::OkStatus();
}

template <typename T>
absl::Status GetIntAs(const json& obj, std::string_view key, std::string_view path, int64_t min,
                      int64_t max, T* out) {
  int64_t v = *out;
  GPUSCHED_RETURN_IF_ERROR(GetInt(obj, key, path, min, max, &v));
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

absl::Status GetBool(const json& obj, std::string_view key, std::string_view path, bool* out) {
  if (!obj.contains(key)) return absl::OkStatus();
  const json& v = obj.at(std::string(key));
  if (!v.is_boolean()) return FieldError(Join(path, key), "must be true or false");
  *out = v.get<bool>();
  return absl::OkStatus();
}

absl::Status GetString(const json& obj, std::string_view key, std::string_view path,
                       std::string* out) {
  if (!obj.contains(key)) return absl::OkStatus();
  const json& v = obj.at(std::string(key));
  if (!v.is_string()) return FieldError(Join(path, key), "must be a string");
  *out = v.get<std::string>();
  return absl::OkStatus();
}

absl::Status DecodeServer(const json& j, ServerConfig& s) {
  const std::string p = "server";
  GPUSCHED_RETURN_IF_ERROR(
      CheckKeys(j, p,
                {"listen", "healthListen", "maxBodyBytes", "maxConnections", "maxInflightBodyBytes",
                 "readTimeoutSeconds", "idleTimeoutSeconds", "threads"}));
  GPUSCHED_RETURN_IF_ERROR(GetString(j, "listen", p, &s.listen));
  if (s.listen.find(':') == std::string::npos)
    return FieldError("server.listen", "must be HOST:PORT");
  GPUSCHED_RETURN_IF_ERROR(GetString(j, "healthListen", p, &s.health_listen));
  if (!s.health_listen.empty() && s.health_listen.find(':') == std::string::npos)
    return FieldError("server.healthListen", "must be HOST:PORT");
  GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "maxConnections", p, 1, 1 << 20, &s.max_connections));
  GPUSCHED_RETURN_IF_ERROR(
      GetInt(j, "maxInflightBodyBytes", p, 1024, int64_t{1} << 40, &s.max_inflight_body_bytes));
  GPUSCHED_RETURN_IF_ERROR(GetInt(j, "maxBodyBytes", p, 1024, int64_t{1} << 32, &s.max_body_bytes));
  GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "readTimeoutSeconds", p, 1, 3600, &s.read_timeout_seconds));
  GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "idleTimeoutSeconds", p, 1, 86400, &s.idle_timeout_seconds));
  GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "threads", p, 1, 64, &s.threads));
  if (s.max_inflight_body_bytes < s.max_body_bytes) {
    return FieldError("server.maxInflightBodyBytes",
                      StrCat("must be >= server.maxBodyBytes (", s.max_body_bytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status DecodeFragmentationTarget(const json& t, std::vector<FragmentationShape>& out) {
  if (!t.is_array()) return FieldError("scoring.fragmentationTarget", "must be an array");
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string q = StrCat("scoring.fragmentationTarget[", i, "]");
    GPUSCHED_RETURN_IF_ERROR(
        CheckKeys(t[i], q, {"cpuMilli", "gpus", "gpuMilli", "models", "weight"}));
    FragmentationShape f;
    GPUSCHED_RETURN_IF_ERROR(GetInt(t[i], "cpuMilli", q, 0, int64_t{1} << 40, &f.cpu_milli));
    GPUSCHED_RETURN_IF_ERROR(GetIntAs(t[i], "gpus", q, 0, kMaxGpusPerNode, &f.gpu_count));
    GPUSCHED_RETURN_IF_ERROR(GetIntAs(t[i], "gpuMilli", q, 1, 1000, &f.gpu_milli));
    if (t[i].contains("models")) {
      for (const json& m : t[i].at("models")) {
        if (!m.is_string()) return FieldError(q + ".models", "must be strings");
        f.models.push_back(m.get<std::string>());
      }
    }
    if (!t[i].contains("weight") || !t[i].at("weight").is_number() ||
        t[i].at("weight").get<double>() < 0) {
      return FieldError(q + ".weight", "must be a non-negative number");
    }
    f.weight = t[i].at("weight").get<double>();
    out.push_back(std::move(f));
  }
  return absl::OkStatus();
}

// The parameters the section gives every scorer (each reads its own).
absl::Status DecodeScorerParams(const json& j, policy::ScorerParams& p) {
  GPUSCHED_RETURN_IF_ERROR(GetBool(j, "spread", "scoring", &p.spread));
  for (auto [key, out] : {std::pair<const char*, double*>{"fragmentationCpuGuard", &p.cpu_guard},
                          std::pair<const char*, double*>{"fragmentationCapacity", &p.capacity}}) {
    if (!j.contains(key)) continue;
    const json& v = j.at(key);
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 100) {
      return FieldError(StrCat("scoring.", key), "must be a number in [0, 100]");
    }
    *out = v.get<double>();
  }
  if (j.contains("fragmentationScale")) {
    const json& v = j.at("fragmentationScale");
    if (!v.is_number() || v.get<double>() <= 0) {
      return FieldError("scoring.fragmentationScale", "must be a positive number");
    }
    p.fragmentation_scale = v.get<double>();
  }
  if (j.contains("fragmentationTarget")) {
    GPUSCHED_RETURN_IF_ERROR(
        DecodeFragmentationTarget(j.at("fragmentationTarget"), p.fragmentation_target));
  }
  return absl::OkStatus();
}

// "scorers": [{"name": a registered scorer, "weight": 0..100 (default 1)}].
absl::Status DecodeScorerList(const json& list, std::vector<policy::ScorerSpec>& out) {
  if (!list.is_array()) return FieldError("scoring.scorers", "must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string q = StrCat("scoring.scorers[", i, "]");
    GPUSCHED_RETURN_IF_ERROR(CheckKeys(list[i], q, {"name", "weight"}));
    policy::ScorerSpec spec;
    GPUSCHED_RETURN_IF_ERROR(GetString(list[i], "name", q, &spec.name));
    const auto registered = policy::RegisteredScorers();
    if (std::none_of(registered.begin(), registered.end(),
                     [&](const policy::ScorerEntry& e) { return e.name == spec.name; })) {
      return FieldError(Join(q, "name"),
                        StrCat("must be a registered scorer (", policy::RegisteredScorerNames(),
                               "), got '", spec.name, "'"));
    }
    for (const policy::ScorerSpec& earlier : out) {
      if (earlier.name == spec.name) return FieldError(Join(q, "name"), "listed twice");
    }
    GPUSCHED_RETURN_IF_ERROR(GetIntAs(list[i], "weight", q, 0, 100, &spec.weight));
    out.push_back(std::move(spec));
  }
  return absl::OkStatus();
}

// Translates the file's section into the scorers it names: either the
// "scorers" list, or the fixed fields topologyWeight (GpuTopology),
// packingWeight (GpuPacking) and fragmentationWeight (Fgd, or FragLookahead
// with fragmentationPolicy "lookahead"). Scorers of weight 0 are left out.
absl::Status DecodeScoring(const json& j, ScoringConfig& s) {
  const std::string p = "scoring";
  GPUSCHED_RETURN_IF_ERROR(
      CheckKeys(j, p,
                {"scorers", "topologyWeight", "packingWeight", "spread", "fragmentationWeight",
                 "fragmentationScale", "fragmentationTarget", "fragmentationPolicy",
                 "fragmentationCpuGuard", "fragmentationCapacity", "domainWeight"}));
  GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "domainWeight", p, 0, 100, &s.domain_weight));
  policy::ScorerParams params;
  GPUSCHED_RETURN_IF_ERROR(DecodeScorerParams(j, params));
  std::vector<policy::ScorerSpec> named;
  if (j.contains("scorers")) {
    for (const char* fixed :
         {"topologyWeight", "packingWeight", "fragmentationWeight", "fragmentationPolicy"}) {
      if (j.contains(fixed)) {
        return FieldError(Join(p, fixed), "cannot be combined with scoring.scorers");
      }
    }
    GPUSCHED_RETURN_IF_ERROR(DecodeScorerList(j.at("scorers"), named));
  } else {
    std::string fragmentation_policy = "fgd";
    GPUSCHED_RETURN_IF_ERROR(GetString(j, "fragmentationPolicy", p, &fragmentation_policy));
    if (fragmentation_policy != "fgd" && fragmentation_policy != "lookahead") {
      return FieldError("scoring.fragmentationPolicy", "must be \"fgd\" or \"lookahead\"");
    }
    named = {{"GpuTopology", 3, {}},
             {"GpuPacking", 2, {}},
             {fragmentation_policy == "lookahead" ? "FragLookahead" : "Fgd", 0, {}}};
    GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "fragmentationWeight", p, 0, 100, &named[2].weight));
    GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "topologyWeight", p, 0, 100, &named[0].weight));
    GPUSCHED_RETURN_IF_ERROR(GetIntAs(j, "packingWeight", p, 0, 100, &named[1].weight));
  }
  s.scorers.clear();
  for (policy::ScorerSpec& spec : named) {
    if (spec.weight == 0) continue;
    spec.params = params;
    s.scorers.push_back(std::move(spec));
  }
  if (s.scorers.empty()) {
    return FieldError("scoring", j.contains("scorers")
                                     ? "scorers needs one scorer with a positive weight"
                                     : "topologyWeight, packingWeight and fragmentationWeight "
                                       "cannot all be 0");
  }
  return absl::OkStatus();
}

absl::Status DecodeTemplates(const json& j, std::vector<TopologyTemplate>& out) {
  if (!j.is_array()) return FieldError("topologyTemplates", "must be an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = StrCat("topologyTemplates[", i, "]");
    const json& t = j[i];
    GPUSCHED_RETURN_IF_ERROR(CheckKeys(t, p, {"name", "match", "gpus", "matrix", "uniform"}));
    TopologyTemplate tt;
    GPUSCHED_RETURN_IF_ERROR(GetString(t, "name", p, &tt.name));
    if (!t.contains("match") || !t["match"].is_array() || t["match"].empty()) {
      return FieldError(Join(p, "match"), "must be a non-empty array of product entries");
    }
    for (const json& m : t["match"]) {
      if (!m.is_string() || m.get<std::string>().empty()) {
        return FieldError(Join(p, "match"), "entries must be non-empty strings");
      }
      tt.match.push_back(m.get<std::string>());
    }
    GPUSCHED_RETURN_IF_ERROR(GetString(t, "uniform", p, &tt.uniform));
    GPUSCHED_RETURN_IF_ERROR(GetIntAs(t, "gpus", p, 0, kMaxGpusPerNode, &tt.gpus));
    const bool has_matrix = t.contains("matrix");
    if (has_matrix == !tt.uniform.empty()) {
      return FieldError(p, "set exactly one of matrix and uniform");
    }
    if (!tt.uniform.empty()) {
      auto l = ParseLinkCode(tt.uniform);
      if (!l.ok() || l->nvlinks == 0xff)
        return FieldError(Join(p, "uniform"), "must be a link code such as NV12 or SYS");
    } else {
      const json& m = t["matrix"];
      if (!m.is_array()) return FieldError(Join(p, "matrix"), "must be an array of rows");
      for (const json& row : m) {
        if (!row.is_array()) return FieldError(Join(p, "matrix"), "rows must be arrays of codes");
        tt.matrix.emplace_back();
        for (const json& c : row) {
          if (!c.is_string()) return FieldError(Join(p, "matrix"), "codes must be strings");
          tt.matrix.back().push_back(c.get<std::string>());
        }
      }
      auto topo = GpuTopology::FromCodes(tt.matrix);
      if (!topo.ok()) return FieldError(Join(p, "matrix"), FromAbsl(topo.status().message()));
      if (tt.gpus == 0) tt.gpus = static_cast<int>(tt.matrix.size());
      if (tt.gpus != static_cast<int>(tt.matrix.size())) {
        return FieldError(Join(p, "gpus"),
                          StrCat("is ", tt.gpus, " but matrix has ", tt.matrix.size(), " rows"));
      }
    }
    out.push_back(std::move(tt));
  }
  return absl::OkStatus();
}

absl::Status DecodeAmount(const json& j, std::string_view p, QuotaAmount& a,
                          std::initializer_list<std::string_view> extra) {
  std::vector<std::string_view> keys = {"guaranteed", "limit"};
  keys.insert(keys.end(), extra.begin(), extra.end());
  if (!j.is_object()) return FieldError(p, "must be an object");
  for (const auto& [key, value] : j.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return FieldError(Join(p, key), "unknown field");
    }
  }
  GPUSCHED_RETURN_IF_ERROR(GetInt(j, "guaranteed", p, 0, 1 << 24, &a.guaranteed));
  a.limit = a.guaranteed;
  GPUSCHED_RETURN_IF_ERROR(GetInt(j, "limit", p, 0, 1 << 24, &a.limit));
  if (a.limit < a.guaranteed) {
    return FieldError(Join(p, "limit"),
                      StrCat("must be >= guaranteed (", a.guaranteed, "), got ", a.limit));
  }
  return absl::OkStatus();
}

// quotas.namespaces.<ns>.attainedService: absent = kDefaultAttainedService;
// an object = on (demoteAfterGpuHours required, preemptionsPerHour 0 unless
// set) unless it says "enabled": false.
absl::Status DecodeAttained(const json& j, std::string_view p, AttainedServiceConfig& a) {
  GPUSCHED_RETURN_IF_ERROR(
      CheckKeys(j, p, {"enabled", "demoteAfterGpuHours", "preemptionsPerHour"}));
  a = AttainedServiceConfig{};
  a.enabled = true;
  GPUSCHED_RETURN_IF_ERROR(GetBool(j, "enabled", p, &a.enabled));
  if (!a.enabled) {
    if (j.size() > 1) {
      return FieldError(Join(p, "enabled"), "is false: no other attainedService field may be set");
    }
    return absl::OkStatus();
  }
  if (!j.contains("demoteAfterGpuHours"))
    return FieldError(Join(p, "demoteAfterGpuHours"), "required");
  const json& h = j["demoteAfterGpuHours"];
  if (!h.is_number() || h.get<double>() < 0 || h.get<double>() > 1e6) {
    return FieldError(Join(p, "demoteAfterGpuHours"),
                      "must be a number of GPU-hours in [0, 1000000]");
  }
  a.demote_after_gpu_seconds = static_cast<int64_t>(h.get<double>() * 3600.0 + 0.5);
  return GetIntAs(j, "preemptionsPerHour", p, 0, 3600, &a.preemptions_per_hour);
}

// quotas.namespaces.<ns>.weight: a positive number; a namespace that may
// hold no GPU (limit 0) has no share to weigh.
absl::Status DecodeWeight(const json& j, std::string_view p, NamespaceQuota& q) {
  if (!j.contains("weight")) return absl::OkStatus();
  const json& w = j["weight"];
  if (!w.is_number() || !(w.get<double>() > 0) || w.get<double>() > 1e6) {
    return FieldError(Join(p, "weight"),
                      StrCat("must be a number in (0, 1000000], got ", w.dump()));
  }
  if (q.gpus.limit == 0) {
    return FieldError(Join(p, "weight"),
                      "is set but the limit is 0: a namespace that may hold no GPU has no share");
  }
  q.weight = w.get<double>();
  return absl::OkStatus();
}

absl::Status DecodeNamespaceQuota(const json& j, std::string_view p, NamespaceQuota& q) {
  GPUSCHED_RETURN_IF_ERROR(DecodeAmount(
      j, p, q.gpus, {"cohort", "models", "queueingStrategy", "attainedService", "weight"}));
  GPUSCHED_RETURN_IF_ERROR(DecodeWeight(j, p, q));
  q.attained = kDefaultAttainedService;
  if (j.contains("attainedService")) {
    GPUSCHED_RETURN_IF_ERROR(
        DecodeAttained(j["attainedService"], Join(p, "attainedService"), q.attained));
  }
  GPUSCHED_RETURN_IF_ERROR(GetString(j, "cohort", p, &q.cohort));
  std::string queueing = "BestEffortFIFO";
  GPUSCHED_RETURN_IF_ERROR(GetString(j, "queueingStrategy", p, &queueing));
  if (queueing == "StrictFIFO") {
    q.queueing = QueueingStrategy::kStrictFifo;
  } else if (queueing == "Backfill") {
    q.queueing = QueueingStrategy::kBackfill;
  } else if (queueing != "BestEffortFIFO") {
    return FieldError(
        Join(p, "queueingStrategy"),
        StrCat("must be StrictFIFO, BestEffortFIFO or Backfill, got '", queueing, "'"));
  }
  if (j.contains("models")) {
    const json& m = j["models"];
    if (!m.is_object())
      return FieldError(Join(p, "models"), "must be an object of product entries");
    for (const auto& [model, amount] : m.items()) {
      if (model.empty()) return FieldError(Join(p, "models"), "model names must be non-empty");
      QuotaAmount a;
      const std::string mp = StrCat(p, ".models.", model);
      GPUSCHED_RETURN_IF_ERROR(DecodeAmount(amount, mp, a, {}));
      if (a.limit > q.gpus.limit) {
        return FieldError(Join(mp, "limit"), StrCat("must be <= the namespace's limit (",
                                                    q.gpus.limit, "), got ", a.limit));
      }
      q.models[model] = a;
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeQuotas(const json& j, QuotaConfig& q) {
  GPUSCHED_RETURN_IF_ERROR(CheckKeys(j, "quotas", {"default", "namespaces"}));
  q.enabled = true;
  if (j.contains("default")) {
    GPUSCHED_RETURN_IF_ERROR(DecodeNamespaceQuota(j["default"], "quotas.default", q.default_quota));
  }
  if (j.contains("namespaces")) {
    const json& ns = j["namespaces"];
    if (!ns.is_object()) return FieldError("quotas.namespaces", "must be an object");
    for (const auto& [name, v] : ns.items()) {
      NamespaceQuota nq;
      GPUSCHED_RETURN_IF_ERROR(DecodeNamespaceQuota(v, StrCat("quotas.namespaces.", name), nq));
      q.namespaces[name] = std::move(nq);
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeFairShareReclaim(const json& j, FairShareReclaimConfig& f) {
  constexpr std::string_view p = "reclaim.fairShare";
  GPUSCHED_RETURN_IF_ERROR(CheckKeys(j, p, {"enabled", "preemptionsPerHour"}));
  f = FairShareReclaimConfig{};
  f.enabled = true;
  GPUSCHED_RETURN_IF_ERROR(GetBool(j, "enabled", p, &f.enabled));
  return GetIntAs(j, "preemptionsPerHour", p, 1, 3600, &f.preemptions_per_hour);
}

absl::Status DecodeReclaim(const json& j, ReclaimConfig& r) {
  GPUSCHED_RETURN_IF_ERROR(
      CheckKeys(j, "reclaim", {"enabled", "policy", "evictOverLimit", "fairShare"}));
  if (j.contains("fairShare")) {
    GPUSCHED_RETURN_IF_ERROR(DecodeFairShareReclaim(j["fairShare"], r.fair_share));
  }
  GPUSCHED_RETURN_IF_ERROR(GetBool(j, "enabled", "reclaim", &r.enabled));
  GPUSCHED_RETURN_IF_ERROR(GetBool(j, "evictOverLimit", "reclaim", &r.evict_over_limit));
  std::string policy = r.only_lower_priority ? "lowerPriority" : "anyBorrower";
  GPUSCHED_RETURN_IF_ERROR(GetString(j, "policy", "reclaim", &policy));
  if (policy != "lowerPriority" && policy != "anyBorrower") {
    return FieldError("reclaim.policy",
                      StrCat("must be lowerPriority or anyBorrower, got '", policy, "'"));
  }
  r.only_lower_priority = policy == "lowerPriority";
  return absl::OkStatus();
}

// "config: not valid JSON at line L, column C: <reason>", the position being
// the 0-based byte offset `at` of `text`.
absl::Status NotValidJsonAt(std::string_view text, size_t at, std::string_view reason) {
  at = std::min(at, text.size());
  const std::string_view before = text.substr(0, at);
  const size_t line = 1 + std::count(before.begin(), before.end(), '\n');
  const size_t line_start =
      before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
  return absl::InvalidArgumentError(StrCat("config: not valid JSON at line ", line, ", column ",
                                           at - line_start + 1, ": ", reason));
}

// A syntax error. `byte` is nlohmann's 1-based index of the last character
// read.
absl::Status SyntaxError(std::string_view text, const json::parse_error& e) {
  std::string_view reason = e.what();
  // what(): "[json.exception.parse_error.101] parse error at line 3, column 5: <reason>"
  if (size_t col = reason.find(", column "); col != std::string_view::npos) {
    if (size_t colon = reason.find(": ", col); colon != std::string_view::npos) {
      reason.remove_prefix(colon + 2);
    }
  }
  return NotValidJsonAt(text, e.byte > 0 ? e.byte - 1 : 0, reason);
}

// A number too large for a double ("1e999"). nlohmann reports no position,
// only the number's text: the error points at its first occurrence.
absl::Status NumberOverflow(std::string_view text, const json::out_of_range& e) {
  std::string_view reason = e.what();
  // what(): "[json.exception.out_of_range.406] number overflow parsing '<number>'"
  if (size_t bracket = reason.find("] "); bracket != std::string_view::npos) {
    reason.remove_prefix(bracket + 2);
  }
  std::string_view number = reason;
  if (size_t open = number.find('\''); open != std::string_view::npos) {
    number.remove_prefix(open + 1);
    number = number.substr(0, number.find('\''));
  }
  const size_t at = number.empty() ? std::string_view::npos : text.find(number);
  if (at == std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat("config: not valid JSON: ", reason));
  }
  return NotValidJsonAt(text, at, reason);
}

// A qualified name part of a label key: 1..63 of [A-Za-z0-9._-], starting
// and ending alphanumeric.
bool LabelName(std::string_view s) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A label key: [prefix/]name, the prefix a DNS subdomain of at most 253.
bool LabelKey(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return LabelName(key);
  const std::string_view prefix = key.substr(0, slash);
  if (prefix.empty() || prefix.size() > 253) return false;
  for (char c : prefix) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.')) {
      return false;
    }
  }
  return LabelName(key.substr(slash + 1));
}

absl::Status DecodeTopologyLevels(const json& j, std::vector<std::string>& out) {
  const std::string p = "gang.topologyLevels";
  if (!j.is_array()) return FieldError(p, "must be a list of node-label keys");
  if (j.size() > 8) return FieldError(p, StrCat("at most 8 levels, got ", j.size()));
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = StrCat(p, "[", i, "]");
    if (!j[i].is_string()) return FieldError(at, "must be a string (a node-label key)");
    const std::string key = j[i].get<std::string>();
    if (!LabelKey(key)) return FieldError(at, StrCat("'", key, "' is not a valid label key"));
    if (key.starts_with("feature.node.kubernetes.io/") ||
        (key.starts_with("nvidia.com/") && key != "nvidia.com/gpu.clique")) {
      return FieldError(at, StrCat("'", key,
                                   "' describes hardware; gpusched does not keep such labels "
                                   "(nvidia.com/gpu.clique is the one nvidia.com/ level)"));
    }
    if (std::find(out.begin(), out.end(), key) != out.end()) {
      return FieldError(at, StrCat("'", key, "' is listed twice"));
    }
    if (!out.empty() && out.back() == kHostnameLevel) {
      return FieldError(at, StrCat(kHostnameLevel, " must be the last level (it is the node)"));
    }
    out.push_back(key);
  }
  return absl::OkStatus();
}

// DomainFit scores by the gang section's levels (policy/domain_fit.h): an
// explicit scoring.domainWeight without a level to score by is an error.
absl::Status DomainScoring(const json& j, SchedulerConfig& c) {
  c.scoring.topology_levels = c.gang.topology_levels;
  const bool levels = std::any_of(c.gang.topology_levels.begin(), c.gang.topology_levels.end(),
                                  [](const std::string& l) { return l != kHostnameLevel; });
  if (!levels && c.scoring.domain_weight > 0 && j.contains("scoring") &&
      j["scoring"].contains("domainWeight")) {
    return FieldError("scoring.domainWeight",
                      StrCat("scores topology domains and needs gang.topologyLevels with a level "
                             "above ",
                             kHostnameLevel, " (or set it to 0)"));
  }
  return absl::OkStatus();
}

absl::Status DecodeGang(const json& j, GangConfig& g) {
  GPUSCHED_RETURN_IF_ERROR(CheckKeys(j, "gang", {"reservationSeconds", "topologyLevels"}));
  GPUSCHED_RETURN_IF_ERROR(
      GetIntAs(j, "reservationSeconds", "gang", 1, 86400, &g.reservation_seconds));
  if (j.contains("topologyLevels")) {
    GPUSCHED_RETURN_IF_ERROR(DecodeTopologyLevels(j["topologyLevels"], g.topology_levels));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeNamespaceQuotaJson(const nlohmann::json& j, std::string_view path,
                                      NamespaceQuota& q) {
  if (!j.is_object()) return FieldError(path, "must be an object");
  return DecodeNamespaceQuota(j, path, q);
}

absl::StatusOr<SchedulerConfig> DecodeConfig(std::string_view text) {
  json j;
  DuplicateKeyFinder duplicates;
  try {
    j = json::parse(text.begin(), text.end(), std::ref(duplicates));
  } catch (const json::parse_error& e) {
    return SyntaxError(text, e);
  } catch (const json::out_of_range& e) {
    return NumberOverflow(text, e);
  }
  if (!duplicates.first().empty()) return FieldError(duplicates.first(), kDuplicateKeyMessage);
  GPUSCHED_RETURN_IF_ERROR(CheckKeys(j, "",
                                     {"$schema", "description", "server", "scoring",
                                      "topologyTemplates", "quotas", "reclaim", "gang"}));
  SchedulerConfig c;
  if (j.contains("server")) GPUSCHED_RETURN_IF_ERROR(DecodeServer(j["server"], c.server));
  if (j.contains("scoring")) GPUSCHED_RETURN_IF_ERROR(DecodeScoring(j["scoring"], c.scoring));
  if (j.contains("topologyTemplates")) {
    GPUSCHED_RETURN_IF_ERROR(DecodeTemplates(j["topologyTemplates"], c.topology_templates));
  }
  if (j.contains("quotas")) GPUSCHED_RETURN_IF_ERROR(DecodeQuotas(j["quotas"], c.quotas));
  if (j.contains("reclaim")) GPUSCHED_RETURN_IF_ERROR(DecodeReclaim(j["reclaim"], c.reclaim));
  if (j.contains("gang")) GPUSCHED_RETURN_IF_ERROR(DecodeGang(j["gang"], c.gang));
  GPUSCHED_RETURN_IF_ERROR(DomainScoring(j, c));
  return c;
}

absl::StatusOr<SchedulerConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("config ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto c = DecodeConfig(ss.str());
  if (!c.ok())
    return absl::InvalidArgumentError(StrCat("config ", path, ": ", c.status().message()));
  return c;
}

}  // namespace gpusched::codec
