// Quotas as Kubernetes objects: GPUQuota (gpusched.io/v1alpha1, namespaced,
// spec = a quotas.namespaces entry of the policy file) and, for users of the
// capacity-scheduling plugin, ElasticQuota (scheduling.x-k8s.io/v1alpha1,
// spec.min / spec.max of nvidia.com/gpu read as guaranteed / limit).
//
// This header holds the plain values (decoded by scheduler/codec/
// quota_object_codec, watched by scheduler/kube/quota_objects) and the two
// pure rules every layer shares:
//
//  - ResolveQuotaObjects: which object sets a namespace's quota. One GPUQuota
//    per namespace, the oldest (creationTimestamp, then name); later ones are
//    duplicates and ignored. An ElasticQuota counts only in a namespace with
//    no GPUQuota. An object whose spec does not validate keeps the last
//    valid spec it had (the policy file's "old config stays" rule); one that
//    never had a valid spec sets nothing.
//  - QuotaObjectStatuses: the status the leader writes on each GPUQuota,
//    from the resolution and the queue's report (usage, borrowing, lending,
//    pending pods and GPUs, the head of the queue and why it waits).
//
// Value types and pure functions; thread-compatible.
#ifndef GPUSCHED_QUEUE_QUOTA_OBJECTS_H_
#define GPUSCHED_QUEUE_QUOTA_OBJECTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/core/config.h"
#include "scheduler/queue/queue_report.h"

namespace gpusched::queue {

enum class QuotaObjectKind { kGpuQuota, kElasticQuota };

// The cohort every ElasticQuota namespace joins: the capacity-scheduling
// plugin lets each of them borrow the unused min of all the others.
inline constexpr char kElasticQuotaCohort[] = "elasticquota";
// An amount no cluster reaches: a limit that is not set (core/config.h).
using ::gpusched::kUnlimitedGpus;

struct QuotaObject {
  QuotaObjectKind kind = QuotaObjectKind::kGpuQuota;
  std::string ns, name, uid;
  std::string created;  // metadata.creationTimestamp (RFC 3339, sorts as text)
  int64_t generation = 0;
  // The spec as written now, if it validates; otherwise `error` names the
  // field ("spec.limit: must be >= guaranteed (8), got 4").
  std::optional<NamespaceQuota> spec;
  std::string error;
  // The last spec of this object (same uid) that validated: what applies
  // while `spec` is invalid. Kept by the watcher (KeepLastValid).
  std::optional<NamespaceQuota> applied;
};

// `next` is a new version of `prev` (same uid): carries the last valid spec.
void KeepLastValid(const QuotaObject* prev, QuotaObject& next);

enum class QuotaObjectState {
  kActive,      // its quota applies
  kDuplicate,   // another GPUQuota of its namespace applies
  kInvalid,     // its spec never validated: nothing applies from it
  kShadowed,    // an ElasticQuota in a namespace that has a GPUQuota
  kNoGpuQuota,  // an ElasticQuota whose min and max do not name nvidia.com/gpu
};

struct QuotaObjectVerdict {
  QuotaObjectKind kind = QuotaObjectKind::kGpuQuota;
  std::string ns, name, uid;
  int64_t generation = 0;
  QuotaObjectState state = QuotaObjectState::kActive;
  std::string message;  // why, for the status and the log
  std::string error;    // the current spec's validation error ("" if valid)
  bool operator==(const QuotaObjectVerdict&) const = default;
};

struct ResolvedQuotas {
  std::map<std::string, NamespaceQuota> namespaces;
  std::vector<QuotaObjectVerdict> verdicts;  // one per object, input order sorted by key
  bool operator==(const ResolvedQuotas&) const = default;
};

ResolvedQuotas ResolveQuotaObjects(std::vector<QuotaObject> objects);

// What a GPUQuota's status says (amounts as GPU counts: "16", "2.5").
struct QuotaBorrower {
  std::string ns;
  std::string gpus;
  bool operator==(const QuotaBorrower&) const = default;
};

struct QuotaCondition {
  std::string type;     // "Active", "Valid"
  bool status = false;  // True / False
  std::string reason;
  std::string message;
  bool operator==(const QuotaCondition&) const = default;
};

struct QuotaObjectStatus {
  std::string ns, name;
  int64_t observed_generation = 0;
  std::string guaranteed, limit, cohort;  // what is enforced
  std::string used, borrowed, lent;
  std::vector<QuotaBorrower> borrowers;  // cohort members over their guarantee
  int64_t pending_pods = 0;
  std::string pending_gpus;
  std::string head;         // "ns/pod" (or the gang) first in the queue
  std::string head_reason;  // why it waits ("" if admissible now)
  // Its estimated start (QueuedPod::estimated_start_unix, rounded down to
  // the minute so a status is not rewritten for seconds); -1: none.
  int64_t head_estimated_start = -1;
  std::vector<QuotaCondition> conditions;
  bool operator==(const QuotaObjectStatus&) const = default;
};

// The status of every GPUQuota in `resolved` (ElasticQuotas are not
// written: their own controller owns their status). `report` is
// QueueManager::Report over every namespace with at least one pod listed.
std::vector<QuotaObjectStatus> QuotaObjectStatuses(const ResolvedQuotas& resolved,
                                                   const QueueReport& report);

// The GPUs of a namespace's idle guarantee that borrowers of its cohort use:
// the cohort's borrowing apportioned over its lenders by idle guarantee.
// namespace -> milli-GPUs lent.
std::map<std::string, int64_t> LentByNamespace(const QueueReport& report);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_QUOTA_OBJECTS_H_
