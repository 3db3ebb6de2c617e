#include "scheduler/queue/fair_share.h"

#include <algorithm>

namespace gpusched::queue {

std::map<std::string, int64_t> WeightedFairShares(const std::vector<FairShareClaim>& claims,
                                                  int64_t capacity_milli) {
  std::map<std::string, int64_t> share;
  std::map<std::string, int64_t> want;  // above the entitlement, capped by the limit
  std::map<std::string, double> weight;
  int64_t surplus = capacity_milli;
  for (const FairShareClaim& c : claims) {
    const int64_t wanted = c.usage + c.pending;
    const int64_t entitled = std::min(c.guaranteed, wanted);
    share[c.ns] = entitled;
    surplus -= entitled;
    const int64_t more = std::min(c.limit, wanted) - entitled;
    if (more > 0) {
      want[c.ns] = more;
      weight[c.ns] = c.weight > 0 ? c.weight : 1.0;
    }
  }
  // Water-filling: split what is left by weight; a namespace that wants
  // less than its split takes what it wants and the rest is split again.
  while (surplus > 0 && !want.empty()) {
    double total = 0;
    for (const auto& [ns, w] : weight) total += w;
    bool capped = false;
    for (auto it = want.begin(); it != want.end();) {
      const double split = static_cast<double>(surplus) * weight[it->first] / total;
      if (static_cast<double>(it->second) <= split) {
        share[it->first] += it->second;
        surplus -= it->second;
        weight.erase(it->first);
        it = want.erase(it);
        capped = true;
      } else {
        ++it;
      }
    }
    if (capped) continue;
    int64_t given = 0;
    for (const auto& [ns, more] : want) {
      const auto part = static_cast<int64_t>(static_cast<double>(surplus) * weight[ns] / total);
      share[ns] += part;
      given += part;
    }
    surplus -= given;
    break;
  }
  return share;
}

}  // namespace gpusched::queue
