// Kueue TAS placement model (see kueue_tas.h).
#include "scheduler/sim/kueue_tas.h"

#include <algorithm>
#include <numeric>

namespace gpusched::sim {
namespace {

using Assignment = std::vector<std::pair<int, int>>;  // (domain, pods)

struct Tree {
  std::vector<std::vector<int>> count;                  // [level][domain]: pods that fit
  std::vector<std::vector<std::vector<int>>> children;  // [level][domain]: domains below
};

Tree Build(const TopoCluster& c, const std::vector<int>& free, int per_pod) {
  const size_t levels = c.levels.size();
  Tree t;
  t.count.resize(levels);
  t.children.resize(levels);
  for (size_t l = 0; l < levels; ++l) {
    t.count[l].assign(c.domain_count[l], 0);
    t.children[l].assign(c.domain_count[l], {});
  }
  for (size_t n = 0; n < free.size(); ++n) {
    const int pods = std::max(0, free[n]) / per_pod;
    for (size_t l = 0; l < levels; ++l) {
      const int d = c.domain_of[l][n];
      t.count[l][d] += pods;
      if (l + 1 == levels) continue;
      std::vector<int>& kids = t.children[l][d];
      const int child = c.domain_of[l + 1][n];
      if (std::find(kids.begin(), kids.end(), child) == kids.end()) kids.push_back(child);
    }
  }
  return t;
}

// BestFit order: most pods first; LeastFreeCapacity: fewest first; ties by
// domain order.
std::vector<int> Sorted(std::vector<int> domains, const std::vector<int>& count, bool least_free) {
  std::stable_sort(domains.begin(), domains.end(), [&](int a, int b) {
    if (count[a] != count[b]) return least_free ? count[a] < count[b] : count[a] > count[b];
    return a < b;
  });
  return domains;
}

// Kueue's findBestFitDomain: from `from` on, the first domain with the
// smallest count that still holds `needed`.
int BestFit(const std::vector<int>& sorted, size_t from, int needed,
            const std::vector<int>& count) {
  int best = sorted[from];
  int best_count = -1;
  for (size_t i = from; i < sorted.size(); ++i) {
    const int c = count[sorted[i]];
    if (c >= needed && (best_count < 0 || c < best_count)) {
      best = sorted[i];
      best_count = c;
    }
  }
  return best;
}

// Domains taken in `sorted` order until `needed` pods are covered, the last
// by best fit when `best_fit` (Kueue's updateCountsToMinimum).
std::optional<Assignment> Greedy(const std::vector<int>& sorted, int needed,
                                 const std::vector<int>& count, bool best_fit) {
  Assignment out;
  int remaining = needed;
  for (size_t i = 0; i < sorted.size() && remaining > 0; ++i) {
    if (best_fit && count[sorted[i]] >= remaining) {
      out.push_back({BestFit(sorted, i, remaining, count), remaining});
      return out;
    }
    const int take = std::min(count[sorted[i]], remaining);
    if (take > 0) out.push_back({sorted[i], take});
    remaining -= take;
  }
  if (remaining > 0) return std::nullopt;
  return out;
}

std::vector<int> AllDomains(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Phase 2a (findLevelWithFitDomains): the level and its domains.
std::optional<std::pair<int, Assignment>> FindLevel(const TopoCluster& c, const Tree& t, int level,
                                                    int pods, bool required, bool implied) {
  const std::vector<int>& count = t.count[level];
  const std::vector<int> sorted = Sorted(AllDomains(c.domain_count[level]), count, implied);
  if (implied) {
    for (int d : sorted) {
      if (count[d] >= pods) return std::make_pair(level, Assignment{{d, pods}});
    }
    auto g = Greedy(sorted, pods, count, /*best_fit=*/false);
    if (!g.has_value()) return std::nullopt;
    return std::make_pair(level, *std::move(g));
  }
  if (count[sorted[0]] >= pods) {
    return std::make_pair(level, Assignment{{BestFit(sorted, 0, pods, count), pods}});
  }
  if (required) return std::nullopt;
  if (level > 0) return FindLevel(c, t, level - 1, pods, required, implied);
  auto g = Greedy(sorted, pods, count, /*best_fit=*/true);
  if (!g.has_value()) return std::nullopt;
  return std::make_pair(level, *std::move(g));
}

}  // namespace

std::optional<std::vector<std::pair<int, int>>> KueueTasPlace(const TopoCluster& c,
                                                              const std::vector<int>& free,
                                                              const TasRequest& r) {
  const int lowest = static_cast<int>(c.levels.size()) - 1;
  if (r.pods < 1 || r.per_pod < 1 || r.level > lowest) return std::nullopt;
  const bool implied = r.level < 0;
  const Tree t = Build(c, free, r.per_pod);
  auto fit = FindLevel(c, t, implied ? lowest : r.level, r.pods, r.required, implied);
  if (!fit.has_value()) return std::nullopt;
  auto [level, chosen] = *std::move(fit);
  // Phase 2b: down to the nodes, the fewest domains at every level.
  for (; level < lowest; ++level) {
    std::vector<int> kids;
    for (const auto& [d, pods] : chosen) {
      kids.insert(kids.end(), t.children[level][d].begin(), t.children[level][d].end());
    }
    const std::vector<int>& count = t.count[level + 1];
    auto next = Greedy(Sorted(std::move(kids), count, implied), r.pods, count, !implied);
    if (!next.has_value()) return std::nullopt;
    chosen = *std::move(next);
  }
  return chosen;
}

}  // namespace gpusched::sim
