// The simulator's files: the replay protocol's jobs list (read) and the
// result files of the fgd and replay protocols (written). Decoding checks
// every field; an error names the entry and the field ("jobs[0].pods:
// expected integer"), and unknown fields are errors, so a typo never falls
// back to a default. Callers: scheduler/sim, tests. Pure; thread-safe.
#ifndef GPUSCHED_CODEC_SIM_CODEC_H_
#define GPUSCHED_CODEC_SIM_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/sim/job.h"
#include "scheduler/sim/results.h"

namespace gpusched::codec {

// [{"name","namespace","priorityClass","priority","gpusPerPod","pods","duration",
//   "submit","gang"}...]; every field is optional (defaults: name "job-<index>",
// namespace "default", gpusPerPod 1, pods 1, gang true).
absl::StatusOr<std::vector<sim::Job>> DecodeJobs(std::string_view json);

// One result object, pretty-printed (one space per level), keys in a fixed order.
std::string EncodeFgdResult(const sim::FgdResult& r);
std::string EncodeReplayResult(const sim::ReplayResult& r);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_SIM_CODEC_H_
