// What GET /debug/queues and GET /debug/pods/<ns>/<name> show: plain values
// filled by QueueManager and encoded to JSON by scheduler/codec/queue_codec.
// Header-only value types (the codec links the queue for them);
// thread-compatible.
#ifndef GPUSCHED_QUEUE_QUEUE_REPORT_H_
#define GPUSCHED_QUEUE_QUEUE_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpusched::queue {

struct QueuedPod {
  std::string ns;
  std::string name;
  std::string uid;
  int32_t priority = 0;
  std::string priority_class;
  int64_t creation_unix = 0;
  int64_t gpu_milli = 0;  // demand of this pod (a gang: per member)
  std::string gang;
  int32_t gang_size = 0;
  int32_t position = 0;  // 1-based; gang members share their gang's position
  double wait_seconds = 0;
  std::string reason;  // "" if it would be admitted now
  // Attained-service level in a namespace ordered by it (0: below the
  // threshold, 1: past it, queued behind level 0); -1: no such ordering.
  int32_t attained_level = -1;
  // From the last estimate refresh (QueueManager::RefreshEstimates): the
  // estimated start (unix seconds; -1: none, `estimate_basis` says why),
  // and the runtime estimate with its source (runtime_estimates.h).
  int64_t estimated_start_unix = -1;
  std::string estimate_basis;
  int64_t runtime_seconds = 0;
  std::string runtime_source;  // "" until the first refresh
};

// A per-GPU-model quota of a namespace (quotas.namespaces.<ns>.models) and
// the GPUs the namespace holds on nodes whose product matches it.
struct ModelQuotaUse {
  std::string model;
  int64_t guaranteed_milli = 0;
  int64_t limit_milli = 0;
  int64_t usage_milli = 0;
};

// What GET /debug/queues asks for: one namespace or all, and at most
// `limit` pods listed per namespace (the first in queue order).
struct ReportQuery {
  std::string ns;  // "" = every namespace
  int32_t limit = 50;
};

struct NamespaceQueue {
  std::string ns;
  std::string cohort;
  int64_t guaranteed_milli = 0;
  int64_t limit_milli = 0;
  int64_t usage_milli = 0;
  int64_t borrowed_milli = 0;
  int64_t lendable_milli = 0;         // idle GPUs it may borrow now
  int64_t cohort_lendable_milli = 0;  // the idle guarantee its cohort lends it
  int64_t fair_share_milli = 0;       // WeightedFairShares (fair_share.h)
  double weight = 1.0;
  std::vector<ModelQuotaUse> models;
  int64_t pending_pods = 0;      // in the whole queue
  int64_t pending_milli = 0;     // milli-GPUs those pods ask for
  std::vector<QueuedPod> queue;  // the first ReportQuery::limit of them
};

struct GangReservationReport {
  std::string ns;
  std::string gang;
  int32_t slots = 0;
  int32_t bound = 0;
  double expires_in_seconds = 0;
  std::vector<std::pair<std::string, std::string>> nodes;  // (node, device list)
};

struct QueueReport {
  bool quotas_enabled = false;
  std::string quota_source;      // QueueOptions::quota_source
  int64_t capacity_milli = 0;    // the cluster's GPUs (QuotaLedger::Capacity)
  int64_t guaranteed_milli = 0;  // every guarantee added up (QuotaLedger::GuaranteedTotal)
  std::vector<NamespaceQueue> namespaces;
  std::vector<GangReservationReport> reservations;
};

struct PreemptionPreview {
  std::string node;
  std::vector<std::string> victims;  // namespace/name, highest priority first
};

struct PodReport {
  std::string ns;
  std::string name;
  std::string uid;
  std::string state;  // "pending", "bound", "finished"
  std::string node;   // when bound
  int32_t position = 0;
  std::string reason;                         // why it waits ("" if admissible now)
  std::vector<PreemptionPreview> preemption;  // cheapest candidate nodes first
  // A pending pod's estimates (as QueuedPod's), how its runtime estimate
  // was made and the inputs refused on the way.
  int64_t estimated_start_unix = -1;
  std::string estimate_basis;
  int64_t runtime_seconds = 0;
  std::string runtime_source;
  std::string runtime_detail;
  std::vector<std::string> runtime_rejected;
  // What-if answers (what_if.h): would it start now if ...; each line a
  // question and its answer.
  std::vector<std::string> what_if;
  // A bound GPU pod's devices as masks (bit i: device i), filled beside
  // QueueManager::ExplainPod by AddPodDevices (pod_devices.h) when
  // `shows_devices`: those gpusched recorded (gpusched.io/gpu-ids) and those
  // the node agent confirmed from the kubelet (gpusched.io/gpu-ids-confirmed),
  // nullopt while the pod has no such annotation; and those gpusched's
  // accounting counts it as holding (its record, or free devices it was given
  // when the record is missing or cannot be honoured).
  bool shows_devices = false;
  std::optional<uint64_t> recorded_devices;
  std::optional<uint64_t> confirmed_devices;
  uint64_t counted_devices = 0;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_QUEUE_REPORT_H_
