#include "policy/frag_lookahead.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "gpusched/policy/placement.h"
#include "policy/model_pressure.h"

namespace gpusched::policy {

FragLookaheadScorer::FragLookaheadScorer(
    std::shared_ptr<const std::vector<FragmentationShape>> target, FragLookaheadParams params)
    : target_(std::move(target)), params_(params) {
  double cpu = 0, gpu = 0;
  for (const FragmentationShape& s : *target_) {
    if (s.gpu_count <= 0) continue;
    cpu += s.weight * static_cast<double>(s.cpu_milli);
    gpu += s.weight * static_cast<double>(s.gpu_count) * s.gpu_milli;
  }
  cpu_per_gpu_ = gpu > 0 ? cpu / gpu : 0;
  constrained_ = HasConstrainedShapes(*target_);
}

std::shared_ptr<const FragLookaheadScorer::Pressure> FragLookaheadScorer::PressureFor(
    const ClusterSnapshot& snapshot) const {
  std::lock_guard<std::mutex> lock(mu_);
  // The node set's identity may be reused by a later set of the same size:
  // the pressure is then that of an equal-sized set (an estimate either way).
  if (pressure_ == nullptr || pressure_->node_set != snapshot.node_set_identity() ||
      pressure_->nodes != snapshot.nodes().size() ||
      pressure_->products != snapshot.products().size()) {
    auto p = std::make_shared<Pressure>();
    p->node_set = snapshot.node_set_identity();
    p->nodes = snapshot.nodes().size();
    p->products = snapshot.products().size();
    p->capacity = CapacityByProduct(snapshot);
    p->rho = ModelPressure(*target_, snapshot.products(), p->capacity);
    pressure_ = std::move(p);
  }
  return pressure_;
}

double FragLookaheadScorer::PressureCost(const PodContext& ctx, const NodeInfo& node) const {
  if (!constrained_ || ctx.pod->gpu.count <= 0 || ctx.snapshot == nullptr) return 0;
  const std::shared_ptr<const Pressure> p = PressureFor(*ctx.snapshot);
  return kModelPressureWeight * PressurePenalty(p->rho, p->capacity, ctx.product_allowed,
                                                node.product_id, ctx.pod->gpu.total_milli());
}

double FragLookaheadScorer::SlackCost(const PodRequest& pod, const FragTerms& before) const {
  if (pod.gpu.count > 0 || cpu_per_gpu_ <= 0) return 0;
  return params_.cpu_guard * kCpuSlackWeight *
         std::min(before.idle, static_cast<double>(pod.cpu_milli) / cpu_per_gpu_);
}

FragTerms FragLookaheadScorer::Terms(const std::vector<uint8_t>& allowed, const FragView& v) const {
  FragTerms t;
  t.frag = NodeFragMilli(*target_, allowed, v);
  int64_t idle = 0;
  for (int d = 0; d < v.ngpu; ++d) idle += v.free_milli[d];
  t.idle = static_cast<double>(idle);
  if (params_.cpu_guard != 0 && cpu_per_gpu_ > 0) {
    t.stranded =
        std::max(0.0, static_cast<double>(idle) - static_cast<double>(v.cpu_free) / cpu_per_gpu_);
  }

  if (params_.capacity != 0) {
    for (size_t i = 0; i < target_->size(); ++i) {
      const FragmentationShape& s = (*target_)[i];
      if (s.gpu_count <= 0 || !allowed[i] || s.gpu_milli <= 0) continue;
      int64_t units = 0;
      for (int d = 0; d < v.ngpu; ++d) units += v.free_milli[d] / s.gpu_milli;
      int64_t copies = units / s.gpu_count;
      if (s.cpu_milli > 0)
        copies = std::min(copies, std::max<int64_t>(0, v.cpu_free) / s.cpu_milli);
      t.capacity += s.weight * static_cast<double>(copies) * s.gpu_count * s.gpu_milli;
    }
  }
  return t;
}

bool FragLookaheadScorer::Value(const PodContext& ctx, const NodeInfo& node, double* value) const {
  const PodRequest& pod = *ctx.pod;
  const std::vector<uint8_t> allowed = ShapesAllowed(*target_, ctx.snapshot->product(node));
  FragView v = MakeFragView(node);
  const FragTerms before = Terms(allowed, v);
  v.cpu_free -= pod.cpu_milli;
  if (pod.gpu.count > 0) {
    auto p = ChoosePlacement(pod.gpu, node);
    if (!p.has_value()) return false;
    // Healthy-device ordinal of each chosen device.
    int k = 0;
    for (DeviceMask m = node.healthy; m != 0; m &= m - 1, ++k) {
      if (p->devices & (DeviceMask{1} << std::countr_zero(m))) {
        v.free_milli[k] -= pod.gpu.shared() ? pod.gpu.milli_per_gpu : v.free_milli[k];
      }
    }
  }
  const FragTerms after = Terms(allowed, v);
  *value = (before.frag - after.frag) - params_.cpu_guard * (after.stranded - before.stranded) -
           params_.capacity * (before.capacity - after.capacity) - PressureCost(ctx, node) -
           SlackCost(pod, before);
  return true;
}

int64_t FragLookaheadScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  double v;
  if (!Value(ctx, node, &v)) return kMinNodeScore;
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(-v / params_.scale)));
}

}  // namespace gpusched::policy
