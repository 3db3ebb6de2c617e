#include "scheduler/codec/job_codec.h"

#include <nlohmann/json.hpp>

#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/internal/dom.h"

namespace gpusched::codec {
namespace {

using json = nlohmann::json;

std::string Str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The member `key` of `parent` as an object: absent or null -> nullptr;
// another type -> an error naming `path`.
absl::StatusOr<const json*> OptObject(const json& parent, const char* key, const char* path) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return nullptr;
  if (!it->is_object()) return absl::InvalidArgumentError(StrCat(path, ": must be an object"));
  return &*it;
}

absl::Status ReadSpec(const json& obj, JobDeadline& j) {
  auto spec = OptObject(obj, "spec", "spec");
  if (!spec.ok()) return spec.status();
  if (*spec == nullptr) return absl::OkStatus();
  auto d = (*spec)->find("activeDeadlineSeconds");
  if (d == (*spec)->end() || d->is_null()) return absl::OkStatus();
  if (!d->is_number_integer() || d->get<int64_t>() <= 0) {
    return absl::InvalidArgumentError(
        StrCat("spec.activeDeadlineSeconds: must be a positive integer, got ", d->dump()));
  }
  j.deadline_s = d->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadStatus(const json& obj, JobDeadline& j) {
  auto status = OptObject(obj, "status", "status");
  if (!status.ok()) return status.status();
  if (*status == nullptr) return absl::OkStatus();
  auto t = (*status)->find("startTime");
  if (t == (*status)->end() || t->is_null()) return absl::OkStatus();
  if (!t->is_string()) {
    return absl::InvalidArgumentError("status.startTime: must be an RFC 3339 timestamp string");
  }
  auto unix = ParseTimestamp(t->get<std::string>(), "status.startTime");
  if (!unix.ok()) return unix.status();
  j.start_unix = *unix;
  return absl::OkStatus();
}

JobDeadline FromJson(const json& obj) {
  JobDeadline j;
  auto meta = OptObject(obj, "metadata", "metadata");
  if (!meta.ok() || *meta == nullptr) {
    j.error = meta.ok() ? "metadata: required" : std::string(FromAbsl(meta.status().message()));
    return j;
  }
  j.ns = Str(**meta, "namespace");
  j.name = Str(**meta, "name");
  j.uid = Str(**meta, "uid");
  if (j.name.empty() || j.ns.empty()) {
    j.error = j.name.empty() ? "metadata.name: required" : "metadata.namespace: required";
    return j;
  }
  for (auto read : {&ReadSpec, &ReadStatus}) {
    if (absl::Status s = read(obj, j); !s.ok()) {
      j.error = std::string(FromAbsl(s.message()));
      j.deadline_s = j.start_unix = 0;
      return j;
    }
  }
  return j;
}

absl::StatusOr<json> Parse(std::string_view text, const char* what) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(StrCat(what, ": not a JSON object"));
  }
  return j;
}

}  // namespace

absl::StatusOr<JobPage> DecodeJobList(std::string_view body) {
  auto j = Parse(body, "job list");
  if (!j.ok()) return j.status();
  JobPage page;
  if (auto m = j->find("metadata"); m != j->end() && m->is_object()) {
    page.resource_version = Str(*m, "resourceVersion");
    page.continue_token = Str(*m, "continue");
  }
  auto items = j->find("items");
  if (items == j->end() || items->is_null()) return page;
  if (!items->is_array()) return absl::InvalidArgumentError("job list: items must be an array");
  for (size_t i = 0; i < items->size(); ++i) {
    const json& item = (*items)[i];
    if (item.is_object()) {
      page.jobs.push_back(FromJson(item));
    } else {
      JobDeadline bad;
      bad.error = StrCat("items[", i, "]: must be an object");
      page.jobs.push_back(std::move(bad));
    }
  }
  return page;
}

absl::StatusOr<JobEvent> DecodeJobEvent(std::string_view line) {
  auto j = Parse(line, "job watch event");
  if (!j.ok()) return j.status();
  JobEvent ev;
  const std::string type = Str(*j, "type");
  auto obj = j->find("object");
  if (obj == j->end() || !obj->is_object()) {
    return absl::InvalidArgumentError("job watch event: object must be an object");
  }
  if (type == "ERROR") {
    ev.status = DecodeStatus(obj->dump());
    return ev;
  }
  GPUSCHED_ASSIGN_OR_RETURN(ev.type, WatchEventType(type, "job watch event"));
  if (auto m = obj->find("metadata"); m != obj->end() && m->is_object()) {
    ev.resource_version = Str(*m, "resourceVersion");
  }
  if (ev.type != WatchEvent::Type::kBookmark) ev.job = FromJson(*obj);
  return ev;
}

JobDeadline DecodeJob(std::string_view body) {
  auto j = Parse(body, "job");
  if (!j.ok()) {
    JobDeadline bad;
    bad.error = std::string(FromAbsl(j.status().message()));
    return bad;
  }
  return FromJson(*j);
}

}  // namespace gpusched::codec
