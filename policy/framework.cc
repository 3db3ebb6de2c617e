#include "gpusched/policy/framework.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "gpusched/policy/registry.h"
#include "gpusched/util/strings.h"
#include "policy/domain_fit.h"

namespace gpusched::policy {

std::unique_ptr<Framework> Framework::WithScorers(std::vector<WeightedScorer> scorers) {
  std::unique_ptr<Framework> f(new Framework());
  f->filters_ = BuiltinFilters();
  f->scorers_ = std::move(scorers);
  for (const WeightedScorer& s : f->scorers_) {
    f->total_weight_ += std::max(0, s.weight);
    f->uses_memo_ = f->uses_memo_ || (s.weight > 0 && s.scorer->UsesRequestMemo());
  }
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
  if (scoring.domain_weight < 0 || scoring.domain_weight > 100) {
    return absl::InvalidArgumentError(
        StrCat("weight of ", DomainFitScorer::kName, " must be in 0..100"));
  }
  // DomainFit only with levels: without, the framework is exactly the above.
  if (scoring.domain_weight > 0 && !DomainFitLevels(scoring.topology_levels).empty()) {
    scorers.push_back(
        {std::make_unique<DomainFitScorer>(scoring.topology_levels), scoring.domain_weight});
  }
  return WithScorers(std::move(scorers));
}

PodContext Framework::Prepare(const PodRequest& pod, const ClusterSnapshot& snapshot) const {
  PodContext ctx;
  ctx.pod = &pod;
  ctx.snapshot = &snapshot;
  if (uses_memo_) ctx.memo = std::make_shared<RequestMemo>();
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
  return results_[Lookup(key, node)];
}

int32_t FilterMemo::Lookup(const Key& key, const NodeInfo& node) {
  FrontFilter& front = front_filter_[FrontSlot(key.state_hash)];
  if (front.id >= 0 && front.key == key) return front.id;
  auto [it, inserted] = memo_.try_emplace(key, static_cast<int32_t>(results_.size()));
  if (inserted) results_.push_back(framework_.Filter(ctx_, node));
  front = {key, it->second};
  return it->second;
}

FilterMemo::Entry FilterMemo::FilterEntry(const NodeHot& node) {
  if (node.partial_share) {
    scratch_ = framework_.Filter(ctx_, *node.info);
    return {&scratch_, -1};
  }
  Key key{node.topology, node.product_id, node.gpu_memory_mib,
          node.healthy,  node.whole_free, node.state_hash};
  const int32_t id = Lookup(key, *node.info);
  return {&results_[id], id};
}

int64_t FilterMemo::Score(const NodeHot& node) {
  if (score_cache_ == ScoreCache::kUnknown) {
    // The scorers that allow it are cached together (their weighted sum);
    // the others (e.g. DomainFit, which reads the node's domain) are added
    // fresh for every node. The sum is the same as Framework::Score's.
    bool any = false, gpu_only = true;
    for (const WeightedScorer& s : framework_.scorers()) {
      if (s.weight <= 0 || !s.scorer->DependsOnlyOnGpuStateAndFreeCpu()) continue;
      any = true;
      gpu_only = gpu_only && s.scorer->DependsOnlyOnGpuState();
    }
    score_cache_ = !any       ? ScoreCache::kNone
                   : gpu_only ? ScoreCache::kGpuState
                              : ScoreCache::kGpuStateAndFreeCpu;
  }
  if (node.partial_share || score_cache_ == ScoreCache::kNone) {
    return framework_.Score(ctx_, *node.info);
  }
  if (framework_.total_weight() == 0) return kMinNodeScore;
  ScoreKey key{{node.topology, node.product_id, node.gpu_memory_mib, node.healthy, node.whole_free,
                node.state_hash},
               score_cache_ == ScoreCache::kGpuStateAndFreeCpu ? node.cpu_free_milli : 0};
  FrontScore& front =
      front_score_[FrontSlot(node.state_hash ^ static_cast<uint64_t>(key.cpu_free))];
  if (front.id < 0 || !(front.key == key)) {
    auto it = scores_.find(key);
    if (it == scores_.end()) {
      it = scores_.emplace(key, framework_.WeightedSum(ctx_, *node.info, true)).first;
    }
    front = {key, it->second, 0};
  }
  return (front.sum + framework_.WeightedSum(ctx_, *node.info, false)) / framework_.total_weight();
}

int64_t Framework::WeightedSum(const PodContext& ctx, const NodeInfo& node, bool cacheable) const {
  int64_t sum = 0;
  for (const WeightedScorer& s : scorers_) {
    if (s.weight <= 0 || s.scorer->DependsOnlyOnGpuStateAndFreeCpu() != cacheable) continue;
    sum += s.weight * std::clamp(s.scorer->Score(ctx, node), kMinNodeScore, kMaxNodeScore);
  }
  return sum;
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
