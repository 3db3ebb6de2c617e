// batch/v1 Jobs on the wire, only what runtime estimates need of them: the
// identity, spec.activeDeadlineSeconds and status.startTime (list pages and
// watch events of /apis/batch/v1/jobs, for scheduler/kube/job_deadlines.h).
//
// A Job whose fields cannot be read is not a decode error of the list or
// the event: it decodes with `error` naming the field ("spec.
// activeDeadlineSeconds: must be a positive integer, got -5"), and the
// caller skips it (its pods' estimates fall back to the next source). Only
// a body that is not a list / watch event at all fails.
// Thread-safe (pure functions).
#ifndef GPUSCHED_CODEC_JOB_CODEC_H_
#define GPUSCHED_CODEC_JOB_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/codec/kube_codec.h"

namespace gpusched::codec {

struct JobDeadline {
  std::string ns, name, uid;
  int64_t deadline_s = 0;  // spec.activeDeadlineSeconds; 0: none
  int64_t start_unix = 0;  // status.startTime; 0: not started (or suspended)
  std::string error;       // set: the Job could not be read, naming the field
  bool operator==(const JobDeadline&) const = default;
};

struct JobPage {
  std::string resource_version;
  std::string continue_token;
  std::vector<JobDeadline> jobs;  // including those with `error` set
};
absl::StatusOr<JobPage> DecodeJobList(std::string_view body);

struct JobEvent {
  WatchEvent::Type type = WatchEvent::Type::kError;
  std::string resource_version;
  JobDeadline job;    // for added, modified, deleted
  KubeStatus status;  // for kError
};
absl::StatusOr<JobEvent> DecodeJobEvent(std::string_view line);

// One Job object (tests).
JobDeadline DecodeJob(std::string_view body);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_JOB_CODEC_H_
