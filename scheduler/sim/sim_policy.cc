#include "scheduler/sim/sim_policy.h"

#include <algorithm>
#include <bit>

#include "gpusched/policy/placement.h"
#include "gpusched/util/strings.h"
#include "policy/fgd_scorer.h"

namespace gpusched::sim {

const std::vector<std::string>& PolicyNames() {
  static const auto* names = new std::vector<std::string>{
      "random", "dotprod", "clustering", "packing", "bestfit", "fgd", "k8s-default", "gpusched"};
  return *names;
}

absl::StatusOr<SimPolicy> MakeSimPolicy(std::string_view name, const SchedulerConfig& config,
                                        const std::vector<FragmentationShape>& target) {
  SimPolicy p;
  p.name = std::string(name);
  // The gpusched pipeline is the config's; its fragmentation scorers use the
  // trace's target unless the config names one.
  policy::ScoringSpec scoring = config.scoring;
  for (policy::ScorerSpec& s : scoring.scorers) {
    if (s.params.fragmentation_target.empty()) s.params.fragmentation_target = target;
  }
  // A baseline: one registered scorer, default parameters.
  auto single = [](std::string_view scorer) {
    policy::ScoringSpec spec;
    spec.scorers = {{std::string(scorer), 1, {}}};
    return spec;
  };
  static constexpr std::pair<std::string_view, std::string_view> kBaselines[] = {
      {"bestfit", "BestFit"},
      {"dotprod", "DotProd"},
      {"packing", "GpuSharePacking"},
      {"clustering", "GpuClustering"},
      {"k8s-default", "LeastAllocated"},
  };
  for (const auto& [policy_name, scorer] : kBaselines) {
    if (name == policy_name) scoring = single(scorer);
  }
  if (name == "random") {
    scoring.scorers.clear();
    p.random_node = true;
    p.devices = DeviceRule::kRandom;
  } else if (name == "fgd") {
    // The paper's score (scale 1000) against the trace's target; shared pods
    // take the device FGD scores best.
    policy::ScorerParams fgd;
    fgd.fragmentation_target = target;
    scoring.scorers = {{policy::FgdScorer::kName, 1, fgd}};
    p.fgd = std::make_shared<const policy::FgdScorer>(
        std::make_shared<const std::vector<FragmentationShape>>(
            target.empty() ? policy::DefaultFragmentationTarget() : target),
        fgd.fragmentation_scale);
    p.devices = DeviceRule::kFgd;
  } else if (name == "gpusched-extender") {
    // Exactly what serve answers: Framework::Score rounded to 0..10, as
    // kube-scheduler combines it (CPU-only pods never reach the extender
    // with managedResources: nvidia.com/gpu; see fgd_protocol).
    p.extender_scoring = true;
  } else if (name != "gpusched" && std::none_of(std::begin(kBaselines), std::end(kBaselines),
                                                [&](const auto& b) { return b.first == name; })) {
    return absl::InvalidArgumentError(StrCat("unknown policy '", name, "'"));
  }
  auto fw = policy::Framework::Create(scoring);
  if (!fw.ok()) return fw.status();
  p.framework = std::move(*fw);
  return p;
}

Placer::Placer(const SimPolicy& policy, SimCluster* cluster, int shapes, std::mt19937_64* rng)
    : policy_(policy), cluster_(cluster), rng_(rng), cache_(shapes) {
  rank_.resize(cluster->size());
  for (int i = 0; i < cluster->size(); ++i) rank_[i] = i;
}

int16_t Placer::Evaluate(const policy::PodContext& ctx, int i) {
  const NodeInfo& node = cluster_->node(i);
  if (!cluster_->ResourcesFit(i, *ctx.pod)) return -1;
  if (!policy_.framework->Filter(ctx, node).fits()) return -1;
  if (policy_.random_node) return 0;
  if (policy_.extender_scoring) {
    // serve's prioritize answers 0..10 (Framework::Score rounded, as
    // ExtenderService::Prioritize does); kube-scheduler scales it by
    // weight x 10 (MaxNodeScore / MaxExtenderPriority).
    // CPU-only pods never reach the extender (managedResources: nvidia.com/gpu).
    const int64_t extender =
        ctx.wants_gpus() ? policy::ExtenderScore(policy_.framework->Score(ctx, node)) : 0;
    int64_t s =
        extender * (policy::kMaxNodeScore / policy::kMaxExtenderScore) * policy_.extender_weight;
    if (policy_.in_tree != nullptr) s += policy_.in_tree->Score(ctx, node);
    return static_cast<int16_t>(s);
  }
  // Every policy scores every pod (CPU-only ones too), as the authors'
  // plugins do and as Framework::Score does for serve.
  return static_cast<int16_t>(policy_.framework->Score(ctx, node));
}

int Placer::Choose(const PodRequest& pod, int shape, DeviceMask* devices) {
  const policy::PodContext ctx = policy_.framework->Prepare(pod, cluster_->snapshot());
  std::vector<Entry>& cache = cache_[shape];
  if (cache.empty()) cache.resize(cluster_->size());
  int best = -1;
  int16_t best_score = -1;
  feasible_.clear();
  for (int i = 0; i < cluster_->size(); ++i) {
    Entry& e = cache[i];
    if (e.version != cluster_->version(i)) {
      e.score = Evaluate(ctx, i);
      e.version = cluster_->version(i);
    }
    if (e.score < 0) continue;
    if (policy_.random_node) {
      feasible_.push_back(i);
    } else if (e.score > best_score || (e.score == best_score && rank_[i] < rank_[best])) {
      best = i;
      best_score = e.score;
    }
  }
  if (policy_.random_node) {
    if (feasible_.empty()) return -1;
    best = feasible_[Uniform(*rng_, feasible_.size())];
  }
  if (best < 0) return -1;
  const NodeInfo& node = cluster_->node(best);
  *devices = 0;
  if (pod.gpu.count == 0) return best;
  if (pod.gpu.shared() && policy_.devices == DeviceRule::kRandom) {
    const DeviceMask ok = policy::DevicesWithFreeMilli(node, pod.gpu.milli_per_gpu);
    std::vector<int> ids = MaskToIndices(ok);
    if (ids.empty()) return -1;
    *devices = DeviceMask{1} << ids[Uniform(*rng_, ids.size())];
    return best;
  }
  if (pod.gpu.shared() && policy_.devices == DeviceRule::kFgd && policy_.fgd != nullptr) {
    const int d = policy_.fgd->SharedDevice(ctx, node);
    if (d < 0) return -1;
    *devices = DeviceMask{1} << d;
    return best;
  }
  auto p = policy::ChoosePlacement(pod.gpu, node);
  if (!p.has_value()) return -1;
  *devices = p->devices;
  return best;
}

int Placer::Schedule(const PodRequest& pod, int shape, DeviceMask* devices) {
  const int n = Choose(pod, shape, devices);
  if (n >= 0) cluster_->Place(n, pod, *devices);
  return n;
}

}  // namespace gpusched::sim
