// The only list of built-in policies.
#include "gpusched/policy/registry.h"

#include "gpusched/util/strings.h"
#include "policy/baseline_scorers.h"
#include "policy/fgd_scorer.h"
#include "policy/frag_lookahead.h"
#include "policy/gpu_filters.h"
#include "policy/gpu_scorers.h"

namespace gpusched::policy {
namespace {

template <typename Scorer>
std::unique_ptr<ScorePolicy> Plain(const ScorerParams&) {
  return std::make_unique<Scorer>();
}

std::unique_ptr<ScorePolicy> Packing(const ScorerParams& p) {
  return std::make_unique<GpuPackingScorer>(p.spread);
}

std::shared_ptr<const std::vector<FragmentationShape>> Target(const ScorerParams& p) {
  return std::make_shared<const std::vector<FragmentationShape>>(
      p.fragmentation_target.empty() ? DefaultFragmentationTarget() : p.fragmentation_target);
}

std::unique_ptr<ScorePolicy> Fgd(const ScorerParams& p) {
  return std::make_unique<FgdScorer>(Target(p), p.fragmentation_scale);
}

std::unique_ptr<ScorePolicy> Lookahead(const ScorerParams& p) {
  return std::make_unique<FragLookaheadScorer>(
      Target(p), FragLookaheadParams{p.fragmentation_scale, p.cpu_guard, p.capacity});
}

constexpr ScorerEntry kScorers[] = {
    {GpuTopologyScorer::kName, &Plain<GpuTopologyScorer>},
    {GpuPackingScorer::kName, &Packing},
    {FgdScorer::kName, &Fgd},
    {FragLookaheadScorer::kName, &Lookahead},
    {BestFitScorer::kName, &Plain<BestFitScorer>},
    {DotProdScorer::kName, &Plain<DotProdScorer>},
    {GpuSharePackingScorer::kName, &Plain<GpuSharePackingScorer>},
    {GpuClusteringScorer::kName, &Plain<GpuClusteringScorer>},
    {LeastAllocatedScorer::kName, &Plain<LeastAllocatedScorer>},
    {MostAllocatedScorer::kName, &Plain<MostAllocatedScorer>},
};

}  // namespace

std::span<const ScorerEntry> RegisteredScorers() { return kScorers; }

std::string RegisteredScorerNames() {
  std::string out;
  for (const ScorerEntry& e : kScorers) StrAppend(&out, out.empty() ? "" : ", ", e.name);
  return out;
}

absl::StatusOr<std::unique_ptr<ScorePolicy>> MakeScorer(std::string_view name,
                                                        const ScorerParams& params) {
  for (const ScorerEntry& e : kScorers) {
    if (e.name == name) return e.make(params);
  }
  return absl::NotFoundError(
      StrCat("unknown scorer '", name, "' (registered: ", RegisteredScorerNames(), ")"));
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
