// The built-in policies, the one list of them (policy/registry.cc): every
// scorer a ScorerSpec may name, in the config or in the simulator, and the
// filters every Framework runs. Callers: Framework, the config codec (to
// check names), the simulator, tests. Immutable; thread-safe.
#ifndef GPUSCHED_POLICY_REGISTRY_H_
#define GPUSCHED_POLICY_REGISTRY_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/policy/policy.h"
#include "gpusched/policy/scoring_spec.h"

namespace gpusched::policy {

struct ScorerEntry {
  std::string_view name;  // the scorer's Name()
  // Builds the scorer; it reads only its own ScorerParams (scoring_spec.h).
  std::unique_ptr<ScorePolicy> (*make)(const ScorerParams& params);
};

// Every registered scorer, in a fixed order.
std::span<const ScorerEntry> RegisteredScorers();
// Their names in that order, comma-separated (for messages).
std::string RegisteredScorerNames();

// Returns the scorer registered as `name`, built with `params`; NotFound
// (listing the registered names) for any other name.
absl::StatusOr<std::unique_ptr<ScorePolicy>> MakeScorer(std::string_view name,
                                                        const ScorerParams& params);

// The filters every Framework runs, in order: GpuModel, GpuMemory,
// GpuCount, GpuTopology.
std::vector<std::unique_ptr<FilterPolicy>> BuiltinFilters();

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_REGISTRY_H_
