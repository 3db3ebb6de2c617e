#include "scheduler/codec/history_codec.h"

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gpusched/util/strings.h"

namespace gpusched::codec {
namespace {

using json = nlohmann::json;

bool Plain(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return false;
  }
  return true;
}

// "team-a train 8 5400.1f3a9c02 ..." for one workload.
std::string Line(const queue::PersistedWorkload& w) {
  std::string line = StrCat(w.ns, " ", w.workload, " ", w.gpus);
  char tag[9];
  for (const queue::PersistedRun& r : w.runs) {
    std::snprintf(tag, sizeof tag, "%08x", r.tag);
    StrAppend(&line, " ", r.seconds, ".", tag);
  }
  return line;
}

absl::StatusOr<queue::PersistedRun> ReadRun(std::string_view word) {
  const size_t dot = word.find('.');
  queue::PersistedRun r;
  if (dot == std::string_view::npos || word.size() - dot - 1 != 8 ||
      !absl::SimpleAtoi(ToAbsl(word.substr(0, dot)), &r.seconds) ||
      !absl::SimpleHexAtoi(ToAbsl(word.substr(dot + 1)), &r.tag)) {
    return absl::InvalidArgumentError(StrCat("run '", word, "' is not <seconds>.<8 hex digits>"));
  }
  if (r.seconds < 1 || r.seconds > queue::kMaxRuntimeSeconds) {
    return absl::InvalidArgumentError(StrCat("run '", word, "': seconds out of range"));
  }
  return r;
}

absl::StatusOr<queue::PersistedWorkload> ReadLine(std::string_view line) {
  std::vector<absl::string_view> words = absl::StrSplit(ToAbsl(line), ' ', absl::SkipEmpty());
  queue::PersistedWorkload w;
  if (words.size() < 4) {
    return absl::InvalidArgumentError("want '<namespace> <workload> <gpus> <runs>...'");
  }
  w.ns = std::string(FromAbsl(words[0]));
  w.workload = std::string(FromAbsl(words[1]));
  if (!absl::SimpleAtoi(words[2], &w.gpus) || w.gpus < 0 || w.gpus > 64) {
    return absl::InvalidArgumentError(StrCat("gpus '", FromAbsl(words[2]), "' is not 0..64"));
  }
  if (words.size() - 3 > queue::kPersistedRunsPerWorkload) {
    return absl::InvalidArgumentError(
        StrCat(words.size() - 3, " runs; at most ", queue::kPersistedRunsPerWorkload));
  }
  for (size_t i = 3; i < words.size(); ++i) {
    auto r = ReadRun(FromAbsl(words[i]));
    if (!r.ok()) return r.status();
    w.runs.push_back(*r);
  }
  return w;
}

}  // namespace

HistoryEncoding EncodeHistoryConfigMap(std::string_view ns, std::string_view name,
                                       std::string_view resource_version,
                                       const std::vector<queue::PersistedWorkload>& history,
                                       size_t max_bytes) {
  HistoryEncoding out;
  std::string text;
  for (const queue::PersistedWorkload& w : history) {
    if (!Plain(w.ns) || !Plain(w.workload) || w.runs.empty()) continue;
    if (out.workloads >= queue::kPersistedWorkloads) break;
    std::string line = Line(w);
    if (text.size() + line.size() + 1 > max_bytes) break;
    StrAppend(&text, line, "\n");
    ++out.workloads;
  }
  out.history_bytes = text.size();
  json meta = {{"name", std::string(name)}, {"namespace", std::string(ns)}};
  meta["labels"] = {{"app.kubernetes.io/name", "gpusched"},
                    {"app.kubernetes.io/component", "runtime-history"}};
  if (!resource_version.empty()) meta["resourceVersion"] = std::string(resource_version);
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", std::move(meta)},
             {"data", {{"version", kHistoryFormatVersion}, {"history", std::move(text)}}}};
  out.body = cm.dump();
  return out;
}

std::string ConfigMapResourceVersion(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return "";
  auto m = j.find("metadata");
  if (m == j.end() || !m->is_object()) return "";
  auto rv = m->find("resourceVersion");
  return rv != m->end() && rv->is_string() ? rv->get<std::string>() : "";
}

absl::StatusOr<HistoryConfigMap> DecodeHistoryConfigMap(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("ConfigMap: not a JSON object");
  }
  HistoryConfigMap out;
  out.resource_version = ConfigMapResourceVersion(body);
  auto data = j.find("data");
  if (data == j.end() || !data->is_object()) {
    return absl::InvalidArgumentError("data: missing or not an object");
  }
  auto version = data->find("version");
  if (version == data->end() || !version->is_string() ||
      version->get<std::string>() != kHistoryFormatVersion) {
    return absl::InvalidArgumentError(
        StrCat("data.version: ", version == data->end() ? "missing" : version->dump(),
               ", this gpusched reads version \"", kHistoryFormatVersion, "\""));
  }
  auto text = data->find("history");
  if (text == data->end() || !text->is_string()) {
    return absl::InvalidArgumentError("data.history: missing or not a string");
  }
  const std::string& s = text->get_ref<const std::string&>();
  if (!s.empty() && s.back() != '\n') {
    return absl::InvalidArgumentError("data.history: does not end with a newline (truncated?)");
  }
  size_t n = 0;
  for (absl::string_view line : absl::StrSplit(s, '\n', absl::SkipEmpty())) {
    if (++n > queue::kPersistedWorkloads) {
      return absl::InvalidArgumentError(
          StrCat("data.history: more than ", queue::kPersistedWorkloads, " lines"));
    }
    auto w = ReadLine(FromAbsl(line));
    if (!w.ok()) {
      return absl::InvalidArgumentError(
          StrCat("data.history line ", n, ": ", FromAbsl(w.status().message())));
    }
    out.history.push_back(*std::move(w));
  }
  return out;
}

}  // namespace gpusched::codec
