// QuotaCoverage: how a quota configuration covers a cluster's GPUs, for the
// operator (gpusched validate, the server's log, GPUQuota status). Two
// facts the work-conserving model (quota_ledger.h) makes worth saying:
//  - GPUs no quota can ever use: with a default limit of 0 (unlisted
//    namespaces hold nothing), GPUs beyond the sum of the listed limits idle
//    whatever is queued;
//  - over-promise: guarantees that add up to more than the cluster has are
//    accepted (nodes come and go) but cannot all be honoured at once.
// Pure functions of plain values; thread-compatible.
#ifndef GPUSCHED_QUEUE_QUOTA_COVERAGE_H_
#define GPUSCHED_QUEUE_QUOTA_COVERAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/core/config.h"

namespace gpusched::queue {

struct QuotaCoverage {
  int64_t capacity_milli = 0;
  int64_t guaranteed_milli = 0;  // sum over the listed namespaces
  // The most all namespaces together may hold (capacity if unlisted
  // namespaces may hold GPUs).
  int64_t usable_milli = 0;
  int64_t unusable_milli = 0;      // capacity - usable, >= 0
  int64_t overpromised_milli = 0;  // guaranteed - capacity, >= 0
  bool operator==(const QuotaCoverage&) const = default;
};

// `capacity_milli`: the cluster's GPUs (QuotaLedger::Capacity).
QuotaCoverage CoverageOf(const QuotaConfig& quotas, int64_t capacity_milli);

// One line per fact above ("" facts give none), for validate and the log.
std::vector<std::string> CoverageWarnings(const QuotaCoverage& c);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_QUOTA_COVERAGE_H_
