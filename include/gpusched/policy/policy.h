// The pure policy interface. A policy answers one question about one
// (pod, node) pair using only its arguments: may the pod go there (filter),
// and how good is it (score, 0..kMaxNodeScore). Policies do no I/O, keep no
// state between calls, read no clock and no global RNG.
//
// PodContext carries what is computed once per request (which GPU products
// the pod accepts), so per-node work stays O(1).
//
// Implementations are const and thread-safe; the HTTP layer, the simulator
// and the benchmarks all call them through Framework (framework.h).
#ifndef GPUSCHED_POLICY_POLICY_H_
#define GPUSCHED_POLICY_POLICY_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"
#include "gpusched/model/snapshot.h"

namespace gpusched::policy {

inline constexpr int64_t kMinNodeScore = 0;
inline constexpr int64_t kMaxNodeScore = 100;
// The extender protocol's scores are 0..10 (MaxExtenderPriority);
// kube-scheduler multiplies them by 10 and by the extender's weight.
inline constexpr int64_t kMaxExtenderScore = 10;

// Returns a node score 0..100 as the extender answers it: rounded half up
// to 0..10 (e.g. 44 -> 4, 45 -> 5). The one rounding serve's prioritize and
// the simulator's extender replay share.
inline constexpr int64_t ExtenderScore(int64_t node_score) {
  return (node_score + kMaxNodeScore / kMaxExtenderScore / 2) / (kMaxNodeScore / kMaxExtenderScore);
}

enum class Verdict : uint8_t {
  kFits,
  kUnschedulable,  // freeing GPUs (preemption) could make it fit
  kUnresolvable,   // no preemption can help on this node
};

struct FilterResult {
  Verdict verdict = Verdict::kFits;
  std::string reason;  // for kubectl describe; starts with "gpusched: "

  static FilterResult Fits() { return {}; }
  static FilterResult Unschedulable(std::string reason) {
    return {Verdict::kUnschedulable, std::move(reason)};
  }
  static FilterResult Unresolvable(std::string reason) {
    return {Verdict::kUnresolvable, std::move(reason)};
  }
  bool fits() const { return verdict == Verdict::kFits; }
};

// What a scorer derives from the whole snapshot once per request (e.g.
// DomainFit's free GPUs per topology domain, policy/domain_fit.h): built by
// the first Score call that needs it, under `once`, then read by every node.
// Framework::Prepare creates one only when a scorer asks for it.
struct RequestMemo {
  std::once_flag once;
  std::shared_ptr<const void> value;
};

// Per-request facts shared by all nodes. Built by Framework::Prepare.
struct PodContext {
  const PodRequest* pod = nullptr;
  const ClusterSnapshot* snapshot = nullptr;
  // By product id: 1 if the pod accepts that product. Empty = any product.
  std::vector<uint8_t> product_allowed;
  std::string models_text;  // "[A100 H100]" for messages
  // Null unless a scorer's UsesRequestMemo (one scorer per framework may).
  std::shared_ptr<RequestMemo> memo;

  bool ProductAllowed(uint16_t id) const {
    return product_allowed.empty() || (id < product_allowed.size() && product_allowed[id] != 0);
  }
  bool wants_gpus() const { return pod->gpu.count > 0; }
};

class FilterPolicy {
 public:
  virtual ~FilterPolicy() = default;
  virtual std::string_view Name() const = 0;
  // `node` may be a hypothetical copy (preemption planning): never look it
  // up again in the snapshot.
  virtual FilterResult Filter(const PodContext& ctx, const NodeInfo& node) const = 0;
};

class ScorePolicy {
 public:
  virtual ~ScorePolicy() = default;
  virtual std::string_view Name() const = 0;
  // Returns a value in [kMinNodeScore, kMaxNodeScore]; higher is better.
  // Called only for nodes that passed every filter.
  virtual int64_t Score(const PodContext& ctx, const NodeInfo& node) const = 0;
  // True if Score reads only the node's topology, product, GPU memory and
  // which devices are healthy/free/shared (not CPU, memory or pods), so two
  // nodes equal in those get equal scores (lets FilterMemo cache scores).
  virtual bool DependsOnlyOnGpuState() const { return false; }
  // True if Score reads what DependsOnlyOnGpuState allows plus the node's
  // free CPU (allocatable minus requested): FilterMemo then caches scores
  // per GPU state and free CPU.
  virtual bool DependsOnlyOnGpuStateAndFreeCpu() const { return DependsOnlyOnGpuState(); }
  // True if Score keeps per-request data in PodContext::memo.
  virtual bool UsesRequestMemo() const { return false; }
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_POLICY_H_
