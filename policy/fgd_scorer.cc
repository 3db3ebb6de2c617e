#include "policy/fgd_scorer.h"

#include <bit>
#include <cmath>

namespace gpusched::policy {

FragView MakeFragView(const NodeInfo& node) {
  FragView v;
  v.cpu_free = node.cpu_milli - node.cpu_used_milli;
  for (DeviceMask m = node.healthy; m != 0; m &= m - 1) {
    v.free_milli[v.ngpu++] = 1000 - node.used_milli[std::countr_zero(m)];
  }
  return v;
}

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

std::vector<uint8_t> ShapesAllowed(const std::vector<FragmentationShape>& target,
                                   std::string_view product) {
  std::vector<uint8_t> out(target.size(), 1);
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].models.empty()) continue;
    out[i] = 0;
    for (const std::string& e : target[i].models) {
      if (ProductMatches(e, product)) out[i] = 1;
    }
  }
  return out;
}

double NodeFragMilli(const std::vector<FragmentationShape>& target,
                     const std::vector<uint8_t>& allowed, const FragView& v) {
  int64_t idle = 0;
  for (int d = 0; d < v.ngpu; ++d) idle += v.free_milli[d];
  if (idle == 0) return 0;
  double frag = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    const FragmentationShape& s = target[i];
    int64_t amount = idle;
    if (s.gpu_count > 0 && allowed[i] && v.cpu_free >= s.cpu_milli) {
      int fits = 0;
      int64_t small = 0;
      for (int d = 0; d < v.ngpu; ++d) {
        if (v.free_milli[d] >= s.gpu_milli) {
          ++fits;
        } else {
          small += v.free_milli[d];
        }
      }
      if (fits >= s.gpu_count) amount = small;
    }
    frag += s.weight * static_cast<double>(amount);
  }
  return frag;
}

int64_t FgdScorer::Evaluate(const PodContext& ctx, const NodeInfo& node, int* device) const {
  const PodRequest& pod = *ctx.pod;
  const std::vector<uint8_t> allowed = ShapesAllowed(*target_, ctx.snapshot->product(node));
  FragView v = MakeFragView(node);
  const double before = NodeFragMilli(*target_, allowed, v);
  auto score_of = [&](const FragView& after) {
    const double delta = before - NodeFragMilli(*target_, allowed, after);
    return static_cast<int64_t>(100.0 / (1.0 + std::exp(-delta / scale_)));
  };
  v.cpu_free -= pod.cpu_milli;
  *device = -1;
  if (pod.gpu.shared()) {
    int64_t best = 0;
    for (int d = 0; d < v.ngpu; ++d) {
      if (v.free_milli[d] < pod.gpu.milli_per_gpu) continue;
      v.free_milli[d] -= pod.gpu.milli_per_gpu;
      const int64_t s = score_of(v);
      v.free_milli[d] += pod.gpu.milli_per_gpu;
      if (*device < 0 || s > best) {
        best = s;
        *device = d;
      }
    }
    return best;
  }
  int need = pod.gpu.count;
  for (int d = 0; d < v.ngpu && need > 0; ++d) {
    if (v.free_milli[d] == 1000) {
      v.free_milli[d] = 0;
      --need;
    }
  }
  return score_of(v);
}

int64_t FgdScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  int device;
  return Evaluate(ctx, node, &device);
}

int FgdScorer::SharedDevice(const PodContext& ctx, const NodeInfo& node) const {
  int device;
  Evaluate(ctx, node, &device);
  if (device < 0) return -1;
  // Map the healthy-device ordinal back to the device index.
  int k = 0;
  for (DeviceMask m = node.healthy; m != 0; m &= m - 1, ++k) {
    if (k == device) return std::countr_zero(m);
  }
  return -1;
}

}  // namespace gpusched::policy
