// The only list of built-in policies.
#include "gpusched/util/strings.h"
#include "gpusched/policy/framework.h"
#include "policy/gpu_filters.h"
#include "policy/gpu_scorers.h"

namespace gpusched::policy {

absl::StatusOr<std::unique_ptr<ScorePolicy>> MakeScorer(std::string_view name,
                                                        const ScoringConfig& scoring) {
  if (name == GpuTopologyScorer::kName) return std::make_unique<GpuTopologyScorer>();
  if (name == GpuPackingScorer::kName) return std::make_unique<GpuPackingScorer>(scoring.spread);
  return absl::NotFoundError(StrCat("unknown scorer '", name, "'"));
}

std::vector<std::unique_ptr<FilterPolicy>> BuiltinFilters() {
  std::vector<std::unique_ptr<FilterPolicy>> f;
  f.push_back(std::make_unique<GpuModelFilter>());
  f.push_back(std::make_unique<GpuMemoryFilter>());
  f.push_back(std::make_unique<GpuCountFilter>());
  f.push_back(std::make_unique<GpuTopologyFilter>());
  return f;
}

}  // namespace gpusched::policy
