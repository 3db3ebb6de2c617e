// DecodePodExplanation: the /debug/pods/<ns>/<name> page read back into
// plain values (queue_codec.h). Every field is optional; a field that is
// present with the wrong type is an error naming it.
#include <nlohmann/json.hpp>

#include "gpusched/util/strings.h"
#include "scheduler/codec/queue_codec.h"

namespace gpusched::codec {
namespace {

using json = nlohmann::json;

absl::Status WrongType(const char* field, const char* expected) {
  return absl::InvalidArgumentError(StrCat("debug pod page: ", field, ": expected ", expected));
}

absl::Status ReadString(const json& page, const char* field, std::string* out) {
  auto it = page.find(field);
  if (it == page.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return WrongType(field, "a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadStrings(const json& page, const char* field, std::vector<std::string>* out) {
  auto it = page.find(field);
  if (it == page.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return WrongType(field, "an array of strings");
  for (const json& v : *it) {
    if (!v.is_string()) return WrongType(field, "an array of strings");
    out->push_back(v.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadInt(const json& page, const char* field, std::optional<int64_t>* out) {
  auto it = page.find(field);
  if (it == page.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return WrongType(field, "an integer");
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadPreemption(const json& page, std::vector<queue::PreemptionPreview>* out) {
  auto it = page.find("preemption");
  if (it == page.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return WrongType("preemption", "an array");
  for (const json& entry : *it) {
    if (!entry.is_object()) return WrongType("preemption", "an array of objects");
    queue::PreemptionPreview p;
    if (auto s = ReadString(entry, "node", &p.node); !s.ok())
      return WrongType("preemption[].node", "a string");
    if (auto s = ReadStrings(entry, "victims", &p.victims); !s.ok()) {
      return WrongType("preemption[].victims", "an array of strings");
    }
    out->push_back(std::move(p));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PodExplanation> DecodePodExplanation(std::string_view body) {
  const json page = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (page.is_discarded() || !page.is_object()) {
    return absl::InvalidArgumentError("debug pod page: not a JSON object");
  }
  PodExplanation out;
  std::optional<int64_t> position;
  for (absl::Status s :
       {ReadString(page, "namespace", &out.ns), ReadString(page, "name", &out.name),
        ReadString(page, "state", &out.state), ReadString(page, "node", &out.node),
        ReadInt(page, "position", &position), ReadString(page, "reason", &out.reason),
        ReadString(page, "estimatedStart", &out.estimated_start),
        ReadString(page, "estimateBasis", &out.estimate_basis),
        ReadInt(page, "runtimeEstimateSeconds", &out.runtime_seconds),
        ReadString(page, "runtimeEstimateSource", &out.runtime_source),
        ReadString(page, "runtimeEstimateDetail", &out.runtime_detail),
        ReadStrings(page, "runtimeEstimateRejected", &out.runtime_rejected),
        ReadStrings(page, "whatIf", &out.what_if), ReadPreemption(page, &out.preemption)}) {
    if (!s.ok()) return s;
  }
  out.position = position.value_or(0);
  return out;
}

}  // namespace gpusched::codec
