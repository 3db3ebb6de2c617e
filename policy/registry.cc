// The only list of built-in policies.
#include "gpusched/policy/framework.h"
#include "gpusched/util/strings.h"
#include "policy/baseline_scorers.h"
#include "policy/fgd_scorer.h"
#include "policy/frag_lookahead.h"
#include "policy/gpu_filters.h"
#include "policy/gpu_scorers.h"

namespace gpusched::policy {

std::vector<FragmentationShape> DefaultFragmentationTarget() {
  std::vector<FragmentationShape> t;
  auto add = [&](int64_t cpu, int32_t count, int32_t milli, double w) {
    t.push_back(FragmentationShape{cpu, count, milli, {}, w});
  };
  add(4000, 0, 0, 0.10);
  add(8000, 1, 250, 0.10);
  add(8000, 1, 500, 0.20);
  add(8000, 1, 1000, 0.40);
  add(16000, 2, 1000, 0.08);
  add(32000, 4, 1000, 0.07);
  add(64000, 8, 1000, 0.05);
  return t;
}

absl::StatusOr<std::unique_ptr<ScorePolicy>> MakeScorer(std::string_view name,
                                                        const ScoringConfig& scoring) {
  if (name == GpuTopologyScorer::kName) return std::make_unique<GpuTopologyScorer>();
  if (name == GpuPackingScorer::kName) return std::make_unique<GpuPackingScorer>(scoring.spread);
  if (name == BestFitScorer::kName) return std::make_unique<BestFitScorer>();
  if (name == DotProdScorer::kName) return std::make_unique<DotProdScorer>();
  if (name == GpuSharePackingScorer::kName) return std::make_unique<GpuSharePackingScorer>();
  if (name == GpuClusteringScorer::kName) return std::make_unique<GpuClusteringScorer>();
  if (name == LeastAllocatedScorer::kName) return std::make_unique<LeastAllocatedScorer>();
  if (name == MostAllocatedScorer::kName) return std::make_unique<MostAllocatedScorer>();
  if (name == FgdScorer::kName || name == FragLookaheadScorer::kName) {
    auto target = std::make_shared<const std::vector<FragmentationShape>>(
        scoring.fragmentation_target.empty() ? DefaultFragmentationTarget()
                                             : scoring.fragmentation_target);
    if (name == FragLookaheadScorer::kName || scoring.fragmentation_policy == "lookahead") {
      return std::make_unique<FragLookaheadScorer>(
          std::move(target),
          FragLookaheadParams{scoring.fragmentation_scale, scoring.fragmentation_cpu_guard,
                              scoring.fragmentation_capacity});
    }
    return std::make_unique<FgdScorer>(std::move(target), scoring.fragmentation_scale);
  }
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
