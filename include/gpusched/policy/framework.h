// Framework: the filter -> score pipeline every caller shares (the HTTP
// extender, bind, preemption planning, the simulator, the benchmarks).
// Filters run in a fixed order; all run, and an unresolvable verdict wins
// over an unschedulable one so FailedAndUnresolvableNodes is exact. Scores
// are the weighted mean of the configured scorers, 0..100.
//
// Built once per ScoringSpec (registry.h lists every policy); immutable
// after; thread-safe.
#ifndef GPUSCHED_POLICY_FRAMEWORK_H_
#define GPUSCHED_POLICY_FRAMEWORK_H_

#include <array>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "gpusched/policy/policy.h"
#include "gpusched/policy/scoring_spec.h"

namespace gpusched::policy {

struct WeightedScorer {
  std::unique_ptr<ScorePolicy> scorer;
  int weight = 1;
};

class Framework {
 public:
  // Builds the pipeline for `scoring`: the built-in filters, and each
  // registered scorer it names with a positive weight (weight 0 leaves one
  // out), then DomainFit (policy/domain_fit.h) when `scoring` has topology
  // levels and a positive domain_weight. InvalidArgument for a negative
  // weight (or a domain_weight above 100), NotFound for an unknown name.
  static absl::StatusOr<std::unique_ptr<Framework>> Create(const ScoringSpec& scoring);
  // Builds a pipeline with the built-in filters and the given scorers
  // (tests; a random-node policy with none).
  static std::unique_ptr<Framework> WithScorers(std::vector<WeightedScorer> scorers);

  // Returns the per-request context. `pod` and `snapshot` must outlive it.
  PodContext Prepare(const PodRequest& pod, const ClusterSnapshot& snapshot) const;
  FilterResult Filter(const PodContext& ctx, const NodeInfo& node) const;
  // Returns the weighted mean of the scorers, 0..100, for any pod (GPU or
  // not). REQUIRES: Filter(ctx, node).fits().
  int64_t Score(const PodContext& ctx, const NodeInfo& node) const;
  // The sum of weight * score (before Score divides it by total_weight())
  // over the scorers whose DependsOnlyOnGpuStateAndFreeCpu() is `cacheable`
  // (FilterMemo caches that part per node state).
  int64_t WeightedSum(const PodContext& ctx, const NodeInfo& node, bool cacheable) const;
  int64_t total_weight() const { return total_weight_; }

  const std::vector<std::unique_ptr<FilterPolicy>>& filters() const { return filters_; }
  const std::vector<WeightedScorer>& scorers() const { return scorers_; }

 private:
  Framework() = default;
  std::vector<std::unique_ptr<FilterPolicy>> filters_;
  std::vector<WeightedScorer> scorers_;
  int64_t total_weight_ = 0;
  bool uses_memo_ = false;  // a scorer UsesRequestMemo: Prepare makes one
};

// FilterMemo: Framework::Filter for one request, computed once per node
// state. Nodes with the same topology, product, GPU memory, healthy and free
// devices (and no partly shared device) get the same verdict for the same
// pod, so a 5,000-node request formats a handful of reasons, not thousands.
// Valid for one PodContext; not thread-safe.
class FilterMemo {
 public:
  FilterMemo(const Framework& framework, const PodContext& ctx)
      : framework_(framework), ctx_(ctx) {}
  const FilterResult& Filter(const NodeInfo& node);
  // Same, reading only the packed fields unless the result is not cached.
  const FilterResult& Filter(const NodeHot& node) { return *FilterEntry(node).result; }
  // Filter's answer and the id of its cache entry: nodes with equal ids got
  // the same result object; id -1 means not cached (a partly shared device).
  // `result` is valid until the next call.
  struct Entry {
    const FilterResult* result;
    int32_t id;
  };
  Entry FilterEntry(const NodeHot& node);
  // Returns Framework::Score: the scorers that allow it
  // (ScorePolicy::DependsOnlyOnGpuState, or DependsOnlyOnGpuStateAndFreeCpu)
  // cached per node state, the others computed for each node. REQUIRES:
  // node fits.
  int64_t Score(const NodeHot& node);

 private:
  struct Key {
    const GpuTopology* topology;
    uint16_t product_id;
    int64_t memory;
    DeviceMask healthy;
    DeviceMask whole_free;
    uint64_t state_hash;  // NodeHot::StateHash of the fields above
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.state_hash);
    }
  };
  // The id of `key`'s result, computed on `node` the first time.
  int32_t Lookup(const Key& key, const NodeInfo& node);
  const Framework& framework_;
  const PodContext& ctx_;
  absl::flat_hash_map<Key, int32_t> memo_;  // -> index into results_
  std::vector<FilterResult> results_;
  // Scores are cached by GPU state, plus free CPU when a scorer reads it.
  struct ScoreKey {
    Key gpu;
    int64_t cpu_free;
    bool operator==(const ScoreKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const ScoreKey& k) {
      return H::combine(std::move(h), k.gpu.state_hash, k.cpu_free);
    }
  };
  enum class ScoreCache { kUnknown, kNone, kGpuState, kGpuStateAndFreeCpu };
  absl::flat_hash_map<ScoreKey, int64_t> scores_;
  // A direct-mapped cache in front of each map, by state hash: the maps'
  // probes mispredict from node to node, while a hit here is one compare.
  // An entry with id -1 is empty.
  static constexpr size_t kFrontSlots = 64;
  static size_t FrontSlot(uint64_t state_hash) {
    return static_cast<size_t>((state_hash * 0x9E3779B97F4A7C15ull) >> 58);
  }
  struct FrontFilter {
    Key key;
    int32_t id = -1;
  };
  struct FrontScore {
    ScoreKey key;
    int64_t sum = 0;
    int32_t id = -1;
  };
  std::array<FrontFilter, kFrontSlots> front_filter_{};
  std::array<FrontScore, kFrontSlots> front_score_{};
  FilterResult scratch_;
  ScoreCache score_cache_ = ScoreCache::kUnknown;  // decided on the first Score
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_FRAMEWORK_H_
