// PriorityClass values of deploy/priorityclasses.yaml (see the header).
#include "scheduler/sim/priority_classes.h"

#include "gpusched/util/strings.h"

namespace gpusched::sim {
namespace {

struct Known {
  const char* name;
  PriorityClassValue value;
};

// Keep in step with deploy/priorityclasses.yaml.
constexpr Known kClasses[] = {
    {"training-high", {100000, false}},
    {"training-low", {1000, false}},
    {"training-best-effort", {100, true}},
};

}  // namespace

absl::StatusOr<PriorityClassValue> LookupPriorityClass(const std::string& name) {
  if (name.empty()) return PriorityClassValue{};
  std::string known;
  for (const Known& k : kClasses) {
    if (name == k.name) return k.value;
    StrAppend(&known, known.empty() ? "" : ", ", k.name);
  }
  return absl::InvalidArgumentError(
      StrCat("unknown priorityClass '", name, "' (known: ", known, ")"));
}

}  // namespace gpusched::sim
