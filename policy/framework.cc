#include "gpusched/policy/framework.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "gpusched/policy/registry.h"
#include "gpusched/util/strings.h"

namespace gpusched::policy {

std::unique_ptr<Framework> Framework::WithScorers(std::vector<WeightedScorer> scorers) {
  std::unique_ptr<Framework> f(new Framework());
  f->filters_ = BuiltinFilters();
  f->scorers_ = std::move(scorers);
  for (const WeightedScorer& s : f->scorers_) f->total_weight_ += std::max(0, s.weight);
  return f;
}

absl::StatusOr<std::unique_ptr<Framework>> Framework::Create(const ScoringSpec& scoring) {
  std::vector<WeightedScorer> scorers;
  for (const ScorerSpec& spec : scoring.scorers) {
    if (spec.weight < 0) {
      return absl::InvalidArgumentError(StrCat("weight of ", spec.name, " is negative"));
    }
    if (spec.weight == 0) continue;
    auto s = MakeScorer(spec.name, spec.params);
    if (!s.ok()) return s.status();
    scorers.push_back({std::move(*s), spec.weight});
  }
  return WithScorers(std::move(scorers));
}

PodContext Framework::Prepare(const PodRequest& pod, const ClusterSnapshot& snapshot) const {
  PodContext ctx;
  ctx.pod = &pod;
  ctx.snapshot = &snapshot;
  if (!pod.gpu.models.empty()) {
    const auto& products = snapshot.products();
    ctx.product_allowed.assign(products.size(), 0);
    for (size_t i = 0; i < products.size(); ++i) {
      for (const std::string& entry : pod.gpu.models) {
        if (ProductMatches(entry, products[i])) ctx.product_allowed[i] = 1;
      }
    }
    ctx.models_text = StrCat("[", absl::StrJoin(pod.gpu.models, " "), "]");
  }
  return ctx;
}

FilterResult Framework::Filter(const PodContext& ctx, const NodeInfo& node) const {
  if (!ctx.wants_gpus()) return FilterResult::Fits();
  FilterResult worst;
  for (const auto& f : filters_) {
    FilterResult r = f->Filter(ctx, node);
    if (r.verdict == Verdict::kUnresolvable) return r;
    if (r.verdict == Verdict::kUnschedulable && worst.fits()) worst = std::move(r);
  }
  return worst;
}

const FilterResult& FilterMemo::Filter(const NodeInfo& node) {
  if (node.partial_share) {
    scratch_ = framework_.Filter(ctx_, node);
    return scratch_;
  }
  Key key{node.topology.get(),
          node.product_id,
          node.gpu_memory_mib,
          node.healthy,
          node.whole_free,
          NodeHot::StateHash(node.topology.get(), node.product_id, node.gpu_memory_mib,
                             node.healthy, node.whole_free)};
  auto [it, inserted] = memo_.try_emplace(key, static_cast<int32_t>(results_.size()));
  if (inserted) results_.push_back(framework_.Filter(ctx_, node));
  return results_[it->second];
}

FilterMemo::Entry FilterMemo::FilterEntry(const NodeHot& node) {
  if (node.partial_share) {
    scratch_ = framework_.Filter(ctx_, *node.info);
    return {&scratch_, -1};
  }
  Key key{node.topology, node.product_id, node.gpu_memory_mib,
          node.healthy,  node.whole_free, node.state_hash};
  auto [it, inserted] = memo_.try_emplace(key, static_cast<int32_t>(results_.size()));
  if (inserted) results_.push_back(framework_.Filter(ctx_, *node.info));
  return {&results_[it->second], it->second};
}

int64_t FilterMemo::Score(const NodeHot& node) {
  if (score_cache_ == ScoreCache::kUnknown) {
    bool gpu_only = true, gpu_and_cpu = true;
    for (const WeightedScorer& s : framework_.scorers()) {
      gpu_only = gpu_only && s.scorer->DependsOnlyOnGpuState();
      gpu_and_cpu = gpu_and_cpu && s.scorer->DependsOnlyOnGpuStateAndFreeCpu();
    }
    score_cache_ = gpu_only      ? ScoreCache::kGpuState
                   : gpu_and_cpu ? ScoreCache::kGpuStateAndFreeCpu
                                 : ScoreCache::kNone;
  }
  if (node.partial_share || score_cache_ == ScoreCache::kNone) {
    return framework_.Score(ctx_, *node.info);
  }
  ScoreKey key{{node.topology, node.product_id, node.gpu_memory_mib, node.healthy, node.whole_free,
                node.state_hash},
               score_cache_ == ScoreCache::kGpuStateAndFreeCpu ? node.cpu_free_milli : 0};
  auto it = scores_.find(key);
  if (it == scores_.end()) it = scores_.emplace(key, framework_.Score(ctx_, *node.info)).first;
  return it->second;
}

int64_t Framework::Score(const PodContext& ctx, const NodeInfo& node) const {
  // Pods without GPUs are scored too (when kube-scheduler consults gpusched
  // for them): the GPU scorers answer a constant, while fragmentation-aware
  // scorers keep such pods off the CPU that idle GPUs need.
  if (total_weight_ == 0) return kMinNodeScore;
  int64_t sum = 0;
  for (const WeightedScorer& s : scorers_) {
    if (s.weight <= 0) continue;
    sum += s.weight * std::clamp(s.scorer->Score(ctx, node), kMinNodeScore, kMaxNodeScore);
  }
  return sum / total_weight_;
}

}  // namespace gpusched::policy
