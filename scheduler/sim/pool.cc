#include "scheduler/sim/pool.h"

namespace gpusched::sim {

Pool MakePool(int64_t gpus, int gpus_per_node) {
  Pool p;
  p.g = gpus_per_node;
  p.free.assign(gpus / gpus_per_node, gpus_per_node);
  p.capacity = p.total_free = gpus;
  return p;
}

bool Consolidate(const Pool& p, int need, Alloc* out) {
  out->clear();
  if (need <= 0 || p.total_free < need) return false;
  const int n = static_cast<int>(p.free.size());
  if (need <= p.g) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (p.free[i] >= need && (best < 0 || p.free[i] < p.free[best])) best = i;
    }
    if (best < 0) return false;
    out->push_back({best, need});
    return true;
  }
  int k = need / p.g;
  const int r = need % p.g;
  std::vector<uint8_t> used(n, 0);
  for (int i = 0; i < n && k > 0; ++i) {
    if (p.free[i] == p.g) {
      out->push_back({i, p.g});
      used[i] = 1;
      --k;
    }
  }
  if (k > 0) {
    out->clear();
    return false;
  }
  if (r > 0) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (!used[i] && (best < 0 || p.free[i] > p.free[best])) best = i;
    }
    if (best < 0 || p.free[best] < r) {
      out->clear();
      return false;
    }
    out->push_back({best, r});
  }
  return true;
}

void Take(Pool& p, const Alloc& a) {
  for (auto [n, g] : a) p.free[n] -= g, p.total_free -= g;
}

void Give(Pool& p, const Alloc& a) {
  for (auto [n, g] : a) p.free[n] += g, p.total_free += g;
}

double Penalty(int gpus) { return gpus == 1 ? 7 : gpus <= 8 ? 30 : 60; }

}  // namespace gpusched::sim
