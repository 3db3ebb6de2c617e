// placeholder, replaced below
#ifndef GPUSCHED_SIM_REPLAY_H_
#define GPUSCHED_SIM_REPLAY_H_
#include "absl/status/status.h"
namespace gpusched::sim {
struct DriverOptions;
struct ReplayResult {};
absl::Status RunReplayDriver(const DriverOptions& o);
}  // namespace gpusched::sim
#endif
