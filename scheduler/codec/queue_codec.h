// JSON for the queue's debug endpoints (GET /debug/queues, GET
// /debug/pods/<ns>/<name>). Debug output only, not a wire contract; GPU
// amounts are numbers of GPUs (fractions for shared devices). Thread-safe
// (pure functions).
#ifndef GPUSCHED_CODEC_QUEUE_CODEC_H_
#define GPUSCHED_CODEC_QUEUE_CODEC_H_

#include <string>

#include "scheduler/queue/queue_report.h"

namespace gpusched::codec {

std::string EncodeQueueReport(const queue::QueueReport& report);
std::string EncodePodReport(const queue::PodReport& report);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_QUEUE_CODEC_H_
