#include "scheduler/sim/extender_mode.h"
#include "scheduler/sim/fgd_protocol.h"
#include "scheduler/sim/replay.h"
#include "scheduler/sim/report.h"
namespace gpusched::sim {
absl::StatusOr<FgdResult> RunFgdViaExtender(const SimCluster&, const std::vector<PodRequest>&,
                                            const SchedulerConfig&, const FgdOptions&,
                                            const ExtenderTransport&) {
  return absl::UnimplementedError("extender");
}
}  // namespace gpusched::sim
