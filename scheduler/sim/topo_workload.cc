// The topology comparison's workload (see topo_workload.h).
#include "scheduler/sim/topo_workload.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "gpusched/util/strings.h"

namespace gpusched::sim {
namespace {

// The fewest equal members of at most `per_node` GPUs (16 -> 2 x 8).
int32_t Members(int64_t gpus, int32_t per_node) {
  int32_t k = static_cast<int32_t>((gpus + per_node - 1) / per_node);
  while (gpus % k != 0) ++k;
  return k;
}

// The level a gang of `gpus` asks for: the lowest level above the node
// whose domain holds it, else the top level (then never required).
int GangLevel(const TopoCluster& c, int64_t gpus, bool* fits) {
  const int node_level = static_cast<int>(c.levels.size()) - 1;
  for (int l = node_level - 1; l >= 0; --l) {
    if (gpus <= c.DomainGpus(l)) {
      *fits = true;
      return l;
    }
  }
  *fits = false;
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<TopoJob>> MakeTopoWorkload(const std::vector<Job>& philly,
                                                      const TopoCluster& cluster,
                                                      const TopoWorkloadOptions& o) {
  if (o.jobs < 1 || o.load <= 0 || o.gang_share < 0 || o.gang_share > 1 || o.required_share < 0 ||
      o.required_share > 1) {
    return absl::InvalidArgumentError(
        "topology workload: jobs >= 1, load > 0, gang and required shares in 0..1");
  }
  const int32_t per_node = cluster.gpus_per_node;
  std::vector<const Job*> small, big;
  std::vector<const Job*> by_submit;
  for (const Job& j : philly) {
    if (j.total_gpus() <= 0) continue;
    by_submit.push_back(&j);
    if (j.total_gpus() > cluster.Capacity()) continue;
    (j.total_gpus() <= per_node ? small : big).push_back(&j);
  }
  if (small.empty() || big.empty() || by_submit.size() < 2) {
    return absl::InvalidArgumentError(
        "topology workload: the trace needs jobs that fit a node and jobs larger than a node");
  }
  std::stable_sort(by_submit.begin(), by_submit.end(),
                   [](const Job* a, const Job* b) { return a->submit < b->submit; });
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  const size_t span = std::min(by_submit.size() - 1, static_cast<size_t>(o.jobs));
  const size_t start = std::uniform_int_distribution<size_t>(0, by_submit.size() - 1 - span)(rng);
  std::vector<TopoJob> out;
  double t = 0, work = 0;
  for (int i = 0; i < o.jobs; ++i) {
    const size_t a = start + (static_cast<size_t>(i) % span);
    t += std::max(0.0, by_submit[a + 1]->submit - by_submit[a]->submit);
    const bool gang = unit(rng) < o.gang_share;
    const auto& pool = gang ? big : small;
    const Job& src = *pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    TopoJob j;
    j.id = StrCat("t", absl::Dec(i, absl::kZeroPad5));
    j.submit = t;
    j.duration = std::clamp(src.duration, o.min_duration, o.max_duration);
    j.gang = gang;
    j.pods = gang ? Members(src.total_gpus(), per_node) : 1;
    j.gpus_per_pod = static_cast<int32_t>(src.total_gpus() / j.pods);
    if (gang) {
      bool fits = false;
      j.level = cluster.levels[GangLevel(cluster, j.gpus(), &fits)];
      j.required = fits && unit(rng) < o.required_share;
    }
    work += j.duration * static_cast<double>(j.gpus());
    out.push_back(std::move(j));
  }
  // Scale the arrival span to the offered load.
  const double span_s = std::max(1.0, out.back().submit);
  const double scale = work / (o.load * static_cast<double>(cluster.Capacity()) * span_s);
  for (TopoJob& j : out) j.submit *= scale;
  return out;
}

std::vector<TopoJob> GangsOnly(const std::vector<TopoJob>& jobs) {
  std::vector<TopoJob> out;
  for (const TopoJob& j : jobs) {
    if (j.gang) out.push_back(j);
  }
  return out;
}

}  // namespace gpusched::sim
