// SchedulerConfig: config/scheduler-policy.json as plain C++ values. Decoded
// and validated only by scheduler/codec/config_codec; every other layer reads
// these structs. Defaults here are the documented defaults. Value type;
// thread-compatible (shared as std::shared_ptr<const SchedulerConfig>).
#ifndef GPUSCHED_CORE_CONFIG_H_
#define GPUSCHED_CORE_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/policy/scoring_spec.h"

namespace gpusched {

struct ServerConfig {
  std::string listen = "127.0.0.1:8888";
  // Plain-HTTP /healthz and /readyz only; "" = no health port.
  std::string health_listen;
  int64_t max_body_bytes = 32 << 20;
  // Memory caps (see scheduler/http/server.h for how they are sized).
  int max_connections = 128;
  int64_t max_inflight_body_bytes = 32 << 20;
  int read_timeout_seconds = 30;
  int idle_timeout_seconds = 90;
  int threads = 2;
};

// Which device topology to assume for nodes without the
// gpusched.io/gpu-topology annotation.
struct TopologyTemplate {
  std::string name;
  std::vector<std::string> match;  // product entries, matched like gpu-model
  int gpus = 0;                    // matrix templates apply only to this count
  std::vector<std::vector<std::string>> matrix;
  std::string uniform;  // e.g. "NV12": every pair alike, any count
};

// The "scoring" section, as the policies' own spec (policy/scoring_spec.h):
// the config codec translates the file's weights and parameters into the
// scorers they name.
using ScoringConfig = policy::ScoringSpec;
using FragmentationShape = policy::FragmentationShape;

// An amount no cluster reaches: a limit that is not set.
inline constexpr int64_t kUnlimitedGpus = int64_t{1} << 24;

// One quota: GPUs a namespace (or a GPU model within it) may hold.
struct QuotaAmount {
  int64_t guaranteed = 0;
  int64_t limit = 0;  // >= guaranteed; defaults to guaranteed
  bool operator==(const QuotaAmount&) const = default;
};

// How a namespace's queue holds later pods back (Kueue's queueingStrategy
// values). kBestEffortFifo (the default): an earlier pod that cannot start
// now holds nobody back; priority order, attained-service order and gang
// reservations stay. kStrictFifo: a pod waits while an earlier pod of its
// namespace could use its quota or its nodes (docs/queue.md). kBackfill:
// StrictFIFO, except that a later unit whose runtime estimate (plus a
// margin) ends before the estimated start of every earlier unit starts now
// (docs/queue.md, "Backfill").
enum class QueueingStrategy { kStrictFifo, kBestEffortFifo, kBackfill };

// Opt-in ordering of a namespace's queue by attained service, in the style
// of Tiresias' discretised two-queue LAS (docs/queue.md): within a priority
// level, pods of workloads (a gang, a Job) that have run fewer GPU-seconds
// than `demote_after_gpu_seconds` go before those that have run more, and a
// waiting pod of a workload below the threshold may have gpusched evict a
// running workload of the same namespace and priority that is above it, at
// most `preemptions_per_hour` workloads an hour. Needs no job durations.
struct AttainedServiceConfig {
  bool enabled = false;
  int64_t demote_after_gpu_seconds = 0;
  int32_t preemptions_per_hour = 0;  // 0: reorder only, never evict
  bool operator==(const AttainedServiceConfig&) const = default;
};

// What a quota entry (policy file or GPUQuota spec) without an
// `attainedService` field gets: on, demote after 8 GPU-hours, at most 12
// preemptions an hour (docs/queue.md, "Queue order users get without
// tuning"; measured in results/philly-grid). `"attainedService":
// {"enabled": false}` turns it off.
inline constexpr AttainedServiceConfig kDefaultAttainedService = {
    .enabled = true, .demote_after_gpu_seconds = 8 * 3600, .preemptions_per_hour = 12};

struct NamespaceQuota {
  QuotaAmount gpus;
  // Its idle guarantee is lent to this cohort's members first: they may
  // reclaim it from borrowers outside the cohort. "" = no cohort.
  std::string cohort;
  std::map<std::string, QuotaAmount> models;  // product entry -> amount
  QueueingStrategy queueing = QueueingStrategy::kBestEffortFifo;
  AttainedServiceConfig attained;
  // Its share of the GPUs above guarantees when several namespaces want
  // more than their guarantee (weighted fair share, fair_share.h; > 0).
  double weight = 1.0;
  bool operator==(const NamespaceQuota&) const = default;
};

struct QuotaConfig {
  bool enabled = false;  // false when the file has no "quotas" section
  // Without a "default" entry: nothing guaranteed, no limit (the namespace
  // uses idle GPUs, borrowed and so reclaimable).
  NamespaceQuota default_quota = {.gpus = {.guaranteed = 0, .limit = kUnlimitedGpus},
                                  .attained = kDefaultAttainedService};
  std::map<std::string, NamespaceQuota> namespaces;
};

// Fair-share reclaim (opt-in, docs/queue.md "Fair-share reclaim"): a
// namespace whose queue head waits for quota while it holds less than its
// weighted fair share reclaims from namespaces above theirs, never taking
// a victim namespace below max(guarantee, fair share), at most
// preemptions_per_hour evictions per reclaiming namespace.
struct FairShareReclaimConfig {
  bool enabled = false;
  int32_t preemptions_per_hour = 12;
};

struct ReclaimConfig {
  bool enabled = true;
  // true: evict only borrowers of lower priority; false: any borrower.
  bool only_lower_priority = true;
  // Evict pods above a lowered limit (off: lowering never evicts).
  bool evict_over_limit = false;
  FairShareReclaimConfig fair_share;
};

struct GangConfig {
  int reservation_seconds = 120;
  // Topology levels for gangs (docs/queue.md, "Topology-aware gangs"):
  // node-label keys from the largest domain to the smallest, e.g.
  // nvidia.com/gpu.clique, then a block and a rack label. The node itself
  // (kubernetes.io/hostname) is always the implicit lowest level; it may be
  // listed, last. Empty: no topology, gangs' topology requests are ignored.
  std::vector<std::string> topology_levels;
};

struct SchedulerConfig {
  ServerConfig server;
  ScoringConfig scoring;
  std::vector<TopologyTemplate> topology_templates;
  QuotaConfig quotas;
  ReclaimConfig reclaim;
  GangConfig gang;
};

}  // namespace gpusched

#endif  // GPUSCHED_CORE_CONFIG_H_
