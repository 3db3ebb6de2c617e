// Runtime estimates: how long a pod is expected to run once it starts, and
// where that number came from. Sources, first usable wins:
//   1. spec.activeDeadlineSeconds (the kubelet ends the pod by then);
//   2. its controlling Job's spec.activeDeadlineSeconds, counted from the
//      Job's status.startTime (the Job controller ends the Job's pods by
//      then): what is left of it at `now_s`, at least kMinJobRemainingSeconds;
//      a Job not started yet counts from now;
//   3. the annotation gpusched.io/expected-runtime, a duration ("2h30m",
//      "90m", "3600s", "1.5h");
//   4. history (RuntimeHistory): the median runtime of completed pods of the
//      same workload (PodRequest::WorkloadKey), else of the same namespace
//      and GPU count.
// An input that cannot be used (a malformed duration, a deadline that is not
// positive or is longer than kMaxRuntimeSeconds) is listed in
// RuntimeEstimate::rejected with the reason and the next source is tried;
// with none left the estimate says so (kNone). Nothing here refuses a pod.
//
// RuntimeHistory keeps, per key, the last `per_key` runtimes (a ring, so it
// follows a workload whose runs get longer) and their p50/p90, and at most
// `max_keys` keys (the least recently recorded key is dropped first): its
// size is bounded whatever the cluster runs. Each runtime carries the tag
// of its pod's uid (RunTag), so the history written to the API
// (Workloads, kube/history_store.h) and read back after a restart merges
// with the finished pods the API still has without counting a run twice
// (RunObserver::Load).
//
// Callers: the start estimator (start_estimator.h) and the debug pages, via
// QueueManager. Pure values; RuntimeHistory is thread-compatible (its owner
// locks).
#ifndef GPUSCHED_QUEUE_RUNTIME_ESTIMATES_H_
#define GPUSCHED_QUEUE_RUNTIME_ESTIMATES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "gpusched/model/pod.h"

namespace gpusched::queue {

// Longer than this (30 days) is not a runtime but a mistake.
inline constexpr int64_t kMaxRuntimeSeconds = int64_t{30} * 24 * 3600;
// A Job past its deadline is about to be ended by its controller: its pods
// are taken to run this much longer.
inline constexpr int64_t kMinJobRemainingSeconds = 60;

enum class EstimateSource : uint8_t {
  kNone,
  kDeadline,          // spec.activeDeadlineSeconds
  kJobDeadline,       // the controlling Job's spec.activeDeadlineSeconds
  kAnnotation,        // gpusched.io/expected-runtime
  kWorkloadHistory,   // completed pods of the same workload
  kNamespaceHistory,  // completed pods of the namespace with the same GPU count
};

// "activeDeadlineSeconds", "job-activeDeadlineSeconds", "annotation",
// "workload-history", "namespace-history", "none".
std::string_view SourceName(EstimateSource source);

struct RuntimeEstimate {
  int64_t seconds = 0;  // 0 with kNone
  EstimateSource source = EstimateSource::kNone;
  // How it was made: "activeDeadlineSeconds 7200", "p50 of 12 runs of
  // workload train (p90 5400s)", "no estimate: no deadline, no
  // gpusched.io/expected-runtime, no completed runs of workload w or of
  // namespace n with 2 GPUs".
  std::string detail;
  std::vector<std::string> rejected;  // inputs not used, each with why
  // From history only: the p90 and how many runs the p50 is taken from.
  int64_t p90 = 0;
  int32_t runs = 0;
  bool known() const { return source != EstimateSource::kNone; }
};

// What a RuntimeEstimate rests on, without its text: 24 bytes, kept per
// waiting pod by the estimate board; DescribeRuntime renders the rest for
// one pod when a debug page asks.
struct RuntimeFacts {
  int64_t seconds = 0;
  int64_t p90 = 0;
  int32_t runs = 0;
  EstimateSource source = EstimateSource::kNone;
  bool known() const { return source != EstimateSource::kNone; }
};
RuntimeFacts FactsOf(const RuntimeEstimate& e);

// The history as written across restarts: per workload (namespace, name,
// the GPU count of its runs), its last runs, oldest first, each with the
// tag of its pod's uid.
inline constexpr size_t kPersistedRunsPerWorkload = 64;
inline constexpr size_t kPersistedWorkloads = 4096;
struct PersistedRun {
  int64_t seconds = 0;
  uint32_t tag = 0;
  bool operator==(const PersistedRun&) const = default;
};
struct PersistedWorkload {
  std::string ns, workload;
  int32_t gpus = 0;
  std::vector<PersistedRun> runs;
  bool operator==(const PersistedWorkload&) const = default;
};
// A run's identity across restarts: a 32-bit hash (FNV-1a) of its pod's
// uid.
uint32_t RunTag(std::string_view uid);

// A duration in Go's notation restricted to h, m and s ("2h30m", "90m",
// "3600s", "1.5h"), rounded to whole seconds; 1 s .. kMaxRuntimeSeconds.
// The error says what is wrong with `text`.
absl::StatusOr<int64_t> ParseRuntime(std::string_view text);

// "2h30m", "45m", "30s": seconds as ParseRuntime reads them.
std::string FormatRuntime(int64_t seconds);

class RuntimeHistory {
 public:
  struct Options {
    size_t per_key = 64;     // runtimes kept per key
    size_t max_keys = 4096;  // keys kept (workloads plus namespace/GPU-count pairs)
  };
  struct Quantiles {
    int64_t p50 = 0;
    int64_t p90 = 0;
    int32_t runs = 0;  // runtimes they are taken from (at most per_key)
  };
  RuntimeHistory() : RuntimeHistory(Options{}) {}
  explicit RuntimeHistory(Options options) : options_(options) {}

  // One completed run of `seconds` (ignored unless 1..kMaxRuntimeSeconds)
  // by the pod whose uid has RunTag `tag`.
  void Record(const std::string& ns, const std::string& workload, int32_t gpus, int64_t seconds,
              uint32_t tag = 0);
  std::optional<Quantiles> ForWorkload(const std::string& ns, const std::string& workload) const;
  std::optional<Quantiles> ForShape(const std::string& ns, int32_t gpus) const;
  size_t keys() const { return keys_.size(); }
  // Every kept runtime as (ns, workload or "", gpus, seconds), oldest first
  // per key (a copy to seed another history, tests).
  struct Run {
    std::string ns;
    std::string workload;  // "" for a namespace/GPU-count key
    int32_t gpus = 0;
    int64_t seconds = 0;
  };
  std::vector<Run> Runs() const;
  // The workload keys, the most recently recorded first (at most
  // kPersistedWorkloads), each with its runs oldest first.
  std::vector<PersistedWorkload> Workloads() const;
  // Grows with every run recorded.
  uint64_t version() const { return seq_; }

 private:
  struct Slot {
    uint32_t seconds = 0;  // at most kMaxRuntimeSeconds
    uint32_t tag = 0;
  };
  struct Key {
    std::vector<Slot> ring;  // at most per_key
    size_t next = 0;         // where the next runtime goes once full
    uint64_t last_seq = 0;   // when it was last recorded
    Quantiles q;
    Run id;
  };
  void Add(const std::string& key, const Run& id, Slot slot);
  const Options options_;
  uint64_t seq_ = 0;
  absl::flat_hash_map<std::string, Key> keys_;
};

// The estimate for `pod` at `now_s` (unix seconds; only a Job's deadline
// depends on it) from its own inputs, then `history`.
RuntimeEstimate EstimateRuntime(const PodRequest& pod, const RuntimeHistory& history,
                                int64_t now_s);
// The estimate `facts` were taken from at `now_s`, whole again (detail,
// rejected inputs): DescribeRuntime(pod, FactsOf(EstimateRuntime(pod, h, t)), t)
// equals EstimateRuntime(pod, h, t) for every pod, history and time.
RuntimeEstimate DescribeRuntime(const PodRequest& pod, const RuntimeFacts& facts, int64_t now_s);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_RUNTIME_ESTIMATES_H_
