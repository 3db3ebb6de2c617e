// WeightedFairShares: how the GPUs above guarantees (the surplus) divide
// among the namespaces that want more than their guarantee, by weight
// (docs/queue.md, "Who may use an idle GPU"). Each namespace is entitled
// to min(guaranteed, wanted), where wanted = usage + pending demand; the
// rest of the capacity is water-filled by weight, each namespace capped at
// min(limit, wanted). Shown in /debug/queues; admission does not use it
// (idle GPUs go to whoever asks within its limit), so it says who is above
// or below its share when several want more.
// Pure function of plain values; thread-compatible.
#ifndef GPUSCHED_QUEUE_FAIR_SHARE_H_
#define GPUSCHED_QUEUE_FAIR_SHARE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpusched::queue {

struct FairShareClaim {
  std::string ns;
  int64_t guaranteed = 0, limit = 0, usage = 0, pending = 0;  // milli
  double weight = 1.0;                                        // > 0
};

// Namespace -> its fair share (milli) of `capacity_milli`.
std::map<std::string, int64_t> WeightedFairShares(const std::vector<FairShareClaim>& claims,
                                                  int64_t capacity_milli);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_FAIR_SHARE_H_
