#include "scheduler/sim/fgd_protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "policy/fgd_scorer.h"
#include "scheduler/sim/sim_policy.h"

namespace gpusched::sim {
namespace {

using ShapeKey = std::tuple<int64_t, int32_t, int32_t, std::vector<std::string>>;

ShapeKey KeyOf(const PodRequest& p) {
  return {p.cpu_milli, p.gpu.count, p.gpu.count == 0 ? 0 : p.gpu.milli_per_gpu, p.gpu.models};
}

// Interns pod shapes (anything a policy may look at: CPU, memory, GPUs).
class ShapeTable {
 public:
  int Id(const PodRequest& p) {
    auto key =
        std::make_tuple(p.cpu_milli, p.memory_mib, p.gpu.count, p.gpu.milli_per_gpu, p.gpu.models);
    auto [it, inserted] = ids_.emplace(std::move(key), static_cast<int>(ids_.size()));
    return it->second;
  }
  int size() const { return static_cast<int>(ids_.size()); }

 private:
  std::map<std::tuple<int64_t, int64_t, int32_t, int32_t, std::vector<std::string>>, int> ids_;
};

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

std::vector<FragmentationShape> LearnTarget(const std::vector<PodRequest>& pods, double coverage) {
  std::map<ShapeKey, int64_t> counts;
  for (const PodRequest& p : pods) ++counts[KeyOf(p)];
  std::vector<std::pair<ShapeKey, int64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<FragmentationShape> out;
  int64_t acc = 0;
  const double total = static_cast<double>(pods.size());
  for (const auto& [key, n] : v) {
    FragmentationShape s;
    s.cpu_milli = std::get<0>(key);
    s.gpu_count = std::get<1>(key);
    s.gpu_milli = std::get<2>(key);
    s.models = std::get<3>(key);
    s.weight = static_cast<double>(n) / total;
    out.push_back(std::move(s));
    acc += n;
    if (static_cast<double>(acc) >= coverage * total) break;
  }
  return out;
}

std::vector<PodRequest> PrepareWorkload(const std::vector<PodRequest>& trace, int64_t total_gpus,
                                        double tune, std::mt19937_64& rng) {
  std::vector<PodRequest> pods = trace;
  std::stable_sort(pods.begin(), pods.end(),
                   [](const PodRequest& a, const PodRequest& b) { return a.name < b.name; });
  for (size_t i = pods.size(); i > 1; --i) std::swap(pods[i - 1], pods[Uniform(rng, i)]);
  if (tune <= 0 || trace.empty()) return pods;
  const int64_t target = static_cast<int64_t>(std::llround(tune * total_gpus * 1000));
  int64_t total = 0;
  for (const PodRequest& p : pods) total += p.gpu.total_milli();
  if (total < target) {
    for (int64_t k = 0;; ++k) {
      const PodRequest& src = trace[Uniform(rng, trace.size())];
      const int64_t share = src.gpu.count == 0 ? 0 : src.gpu.milli_per_gpu;
      if (total + share > target) break;
      PodRequest c = src;
      c.name = StrCat(src.name, "-clone-", k);
      c.uid = c.name;
      total += c.gpu.total_milli();
      pods.push_back(std::move(c));
    }
  } else {
    std::vector<uint8_t> removed(pods.size(), 0);
    std::vector<size_t> alive(pods.size());
    for (size_t i = 0; i < pods.size(); ++i) alive[i] = i;
    while (total > target && !alive.empty()) {
      const size_t k = Uniform(rng, alive.size());
      const size_t i = alive[k];
      alive[k] = alive.back();
      alive.pop_back();
      removed[i] = 1;
      total -= pods[i].gpu.total_milli();
    }
    std::vector<PodRequest> kept;
    for (size_t i = 0; i < pods.size(); ++i) {
      if (!removed[i]) kept.push_back(std::move(pods[i]));
    }
    pods = std::move(kept);
  }
  return pods;
}

double RoundHalfEven(double x, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::nearbyint(x * scale) / scale;
}

std::vector<CurvePoint> BinCurve(const std::vector<Event>& events, int64_t total_gpus,
                                 int max_pct) {
  struct Acc {
    double alloc = 0, frag = 0, ratio = 0;
    int n = 0;
  };
  std::vector<Acc> bins(max_pct + 2);
  const double g = static_cast<double>(total_gpus);
  for (const Event& e : events) {
    const double arrive = RoundHalfEven(static_cast<double>(e.arrived_milli) / g / 10, 0);
    if (arrive < 0 || arrive > max_pct + 1) continue;
    Acc& a = bins[static_cast<int>(arrive)];
    a.alloc += RoundHalfEven(static_cast<double>(e.allocated_milli) / g / 10, 2);
    a.frag += RoundHalfEven(e.frag_milli / g / 10, 2);
    const double idle = g * 1000 - static_cast<double>(e.allocated_milli);
    a.ratio += idle > 0 ? RoundHalfEven(e.frag_milli / idle * 100, 2) : 0;
    ++a.n;
  }
  std::vector<CurvePoint> out;
  for (int k = 0; k <= max_pct; ++k) {
    Acc a = bins[k];
    if (a.n == 0) {
      for (int j = std::max(0, k - 1); j <= k + 1; ++j) {
        a.alloc += bins[j].alloc;
        a.frag += bins[j].frag;
        a.ratio += bins[j].ratio;
        a.n += bins[j].n;
      }
    }
    if (a.n == 0) continue;
    out.push_back({k, RoundHalfEven(a.alloc / a.n, 2), RoundHalfEven(a.frag / a.n, 2),
                   RoundHalfEven(a.ratio / a.n, 2)});
  }
  return out;
}

namespace {

// The cluster's fragmentation against `target` (milli, FGD's measure) per
// node and in total, kept current as nodes change.
class FragTracker {
 public:
  FragTracker(const std::vector<FragmentationShape>& target, const SimCluster& cluster)
      : target_(target),
        cluster_(cluster),
        allowed_(cluster.snapshot().products().size()),
        node_frag_(cluster.size()) {
    for (size_t p = 0; p < allowed_.size(); ++p) {
      allowed_[p] = policy::ShapesAllowed(target, cluster.snapshot().products()[p]);
    }
    for (int i = 0; i < cluster.size(); ++i) total_ += node_frag_[i] = Of(i);
  }

  // Node `i` changed.
  void Update(int i) {
    total_ -= node_frag_[i];
    total_ += node_frag_[i] = Of(i);
  }
  double total() const { return total_; }

 private:
  double Of(int i) const {
    const NodeInfo& n = cluster_.node(i);
    return policy::NodeFragMilli(target_, allowed_[n.product_id], policy::MakeFragView(n));
  }

  const std::vector<FragmentationShape>& target_;
  const SimCluster& cluster_;
  std::vector<std::vector<uint8_t>> allowed_;
  std::vector<double> node_frag_;
  double total_ = 0;
};

// The run's tie priority of nodes: 0..n-1 shuffled by `rng`.
std::vector<int32_t> ShuffledRank(int n, std::mt19937_64& rng) {
  std::vector<int32_t> rank(n);
  for (int i = 0; i < n; ++i) rank[i] = i;
  for (size_t i = rank.size(); i > 1; --i) std::swap(rank[i - 1], rank[Uniform(rng, i)]);
  return rank;
}

// The headline figures, read off r->curve.
void ReadHeadlines(FgdResult* r) {
  for (const CurvePoint& c : r->curve) {
    if (c.arrived_pct == 100) r->unallocated_at_100 = RoundHalfEven(100 - c.allocated_pct, 2);
    if (c.arrived_pct == 130) r->allocated_at_130 = c.allocated_pct;
    if (c.arrived_pct == 90) {
      r->frag_total_at_90 = c.frag_total_pct;
      r->frag_idle_at_90 = c.frag_idle_pct;
    }
  }
}

}  // namespace

absl::StatusOr<FgdResult> RunFgd(const SimCluster& base, const std::vector<PodRequest>& trace,
                                 const SchedulerConfig& config, const FgdOptions& o) {
  return RunFgdWith(base, trace, config, o, nullptr);
}

absl::StatusOr<FgdResult> RunFgdWith(const SimCluster& base, const std::vector<PodRequest>& trace,
                                     const SchedulerConfig& config, const FgdOptions& o,
                                     FgdDecider* decider) {
  const auto t_start = std::chrono::steady_clock::now();
  SimCluster cluster = base.Clone();
  const std::vector<FragmentationShape> target = LearnTarget(trace);
  auto policy = MakeSimPolicy(o.policy, config, target);
  if (!policy.ok()) return policy.status();
  std::mt19937_64 rng(o.seed);
  std::vector<PodRequest> pods = PrepareWorkload(trace, cluster.total_gpus(), o.tune, rng);
  ShapeTable shapes;
  std::vector<int> shape_of(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) shape_of[i] = shapes.Id(pods[i]);

  Placer placer(*policy, &cluster, shapes.size(), &rng);
  const std::vector<int32_t> rank = ShuffledRank(cluster.size(), rng);
  placer.SetTiePriority(rank);
  FragTracker frag(target, cluster);

  FgdResult r;
  r.policy = o.policy;
  r.trace = o.trace;
  r.seed = o.seed;
  r.pods = static_cast<int64_t>(pods.size());
  std::vector<Event> events;
  events.reserve(pods.size());
  r.placements.reserve(pods.size());
  int64_t arrived = 0;
  uint64_t h = 1469598103934665603ULL;
  for (size_t k = 0; k < pods.size(); ++k) {
    const PodRequest& pod = pods[k];
    arrived += pod.gpu.total_milli();
    DeviceMask devices = 0;
    int n = -1;
    if (decider == nullptr) {
      n = placer.Schedule(pod, shape_of[k], &devices);
    } else {
      auto chosen = decider->Choose(pod, cluster, rank, &devices);
      if (!chosen.ok()) return chosen.status();
      n = *chosen;
      if (n >= 0) cluster.Place(n, pod, devices);
    }
    r.placements.push_back(n);
    h = Mix(h, static_cast<uint64_t>(n + 1));
    h = Mix(h, devices);
    if (n < 0) {
      ++r.failed;
    } else {
      frag.Update(n);
    }
    events.push_back({arrived, cluster.allocated_milli(), frag.total()});
    if (o.progress && (k + 1) % 2000 == 0) {
      std::fprintf(stderr, "\r[%s seed %llu] %zu/%zu pods", o.policy.c_str(),
                   static_cast<unsigned long long>(o.seed), k + 1, pods.size());
    }
  }
  if (o.progress) std::fprintf(stderr, "\n");
  r.curve = BinCurve(events, cluster.total_gpus());
  ReadHeadlines(&r);
  r.decision_hash = h;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return r;
}

}  // namespace gpusched::sim
