// JSON for the queue's debug endpoints (GET /debug/queues, GET
// /debug/pods/<ns>/<name>). Debug output only, not a wire contract; GPU
// amounts are numbers of GPUs (fractions for shared devices). Thread-safe
// (pure functions).
#ifndef GPUSCHED_CODEC_QUEUE_CODEC_H_
#define GPUSCHED_CODEC_QUEUE_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/queue/queue_report.h"

namespace gpusched::codec {

std::string EncodeQueueReport(const queue::QueueReport& report);
std::string EncodePodReport(const queue::PodReport& report);

// Pod annotations that show a pending pod its place in its namespace's
// queue (written by the leader, read by `gpusched queue`, visible to anyone
// who may read the pod).
inline constexpr char kQueuePositionAnnotation[] = "gpusched.io/queue-position";
inline constexpr char kQueueReasonAnnotation[] = "gpusched.io/queue-reason";
// A JSON merge patch setting both annotations, and with `estimated_start`
// also gpusched.io/estimated-start (its text; "" removes it).
std::string EncodeQueueStatusPatch(const std::string& position, const std::string& reason,
                                   const std::optional<std::string>& estimated_start = {});
// Unix seconds as RFC 3339 in UTC ("2026-11-27T07:20:00Z").
std::string FormatRfc3339(int64_t unix_seconds);

// One pending pod as `gpusched queue` lists it.
struct QueueListRow {
  std::string ns;
  std::string name;
  std::string position;  // the annotation; "" if gpusched has not written it
  std::string reason;
  std::string priority_class;
  std::string gpus;             // nvidia.com/gpu of the pod (sum over containers)
  std::string created;          // metadata.creationTimestamp
  std::string node;             // spec.nodeName ("" while pending)
  std::string estimated_start;  // gpusched.io/estimated-start; "" if not written
};
// Rows of a PodList (GET /api/v1/pods). Errors name what is malformed.
absl::StatusOr<std::vector<QueueListRow>> DecodeQueueList(std::string_view body);

// A pod as GET /debug/pods/<ns>/<name> shows it (EncodePodReport), read
// back by `gpusched queue --explain`. Absent fields stay empty.
struct PodExplanation {
  std::string ns;
  std::string name;
  std::string state;  // "pending", "bound", "finished"
  std::string node;
  int64_t position = 0;
  std::string reason;
  std::string estimated_start;  // RFC 3339; "" when there is none
  std::string estimate_basis;
  std::optional<int64_t> runtime_seconds;
  std::string runtime_source;
  std::string runtime_detail;
  std::vector<std::string> runtime_rejected;
  std::vector<std::string> what_if;
  std::vector<queue::PreemptionPreview> preemption;
};
// Errors name the field that is malformed (a wrong type, not JSON at all).
absl::StatusOr<PodExplanation> DecodePodExplanation(std::string_view body);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_QUEUE_CODEC_H_
