// What-if answers for one pending pod: would it start now if something
// changed? Each is evaluated on one snapshot and a copy of the quota ledger
// through the same filters and device selector as the filter verb
// (policy::FitsWithDevices, QuotaLedger::Check and CheckModels):
//  - "if namespace X's N borrowed GPUs were reclaimed" (X's pods of lowest
//    priority, newest first, until N GPUs are freed; the namespaces that
//    borrow most, at most kWhatIfNamespaces);
//  - "with priority >= P" (P one above the earlier units that go first: it
//    would head its queue);
//  - "if model M were allowed" (each GPU product of the cluster it does not
//    accept now);
//  - "with K fewer GPUs" (the fewest that would fit);
//  - "after job J ends" (the node where it fits soonest as the pods there
//    end at their estimates, and the last of them to end).
// Callers: QueueManager::ExplainPod (without the queue's mutex). Pure.
#ifndef GPUSCHED_QUEUE_WHAT_IF_H_
#define GPUSCHED_QUEUE_WHAT_IF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/model/snapshot.h"
#include "gpusched/policy/framework.h"
#include "scheduler/queue/quota_ledger.h"

namespace gpusched::queue {

inline constexpr size_t kWhatIfNamespaces = 3;

struct WhatIfInputs {
  const PodRequest* pod = nullptr;
  const ClusterSnapshot* snapshot = nullptr;
  const policy::Framework* fw = nullptr;
  const QuotaLedger* ledger = nullptr;
  // Units of its namespace that go first, and their highest priority.
  int32_t earlier_units = 0;
  int32_t earlier_max_priority = 0;
  // Running pods' expected ends (unix seconds), from the last estimate.
  const absl::flat_hash_map<std::string, int64_t>* running_end = nullptr;
  int64_t now_s = 0;
};

// One line per question: the question and its answer.
std::vector<std::string> WhatIfs(const WhatIfInputs& in);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_WHAT_IF_H_
