// The extender verbs' arguments and results as model values, free of JSON and
// HTTP. scheduler/codec decodes kube-scheduler's ExtenderArgs into these and
// encodes the results back to the exact wire keys; ExtenderService computes
// them. Value types; thread-compatible.
#ifndef GPUSCHED_CORE_EXTENDER_ARGS_H_
#define GPUSCHED_CORE_EXTENDER_ARGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/model/pod.h"

namespace gpusched {

// A node-name list resolved to node indices once, for an in-process caller
// that sends the same list cycle after cycle (the simulator's
// kube-scheduler): made only by ExtenderService::Resolve, never by a
// decoder, and used only while the node set is the one it was made for.
struct ResolvedNodeNames {
  std::shared_ptr<const void> node_set;  // ClusterSnapshot::node_set()
  std::vector<int32_t> indices;
};

// ExtenderArgs (filter and prioritize requests).
struct ExtenderArgs {
  PodRequest pod;
  // True when the request carried NodeNames (nodeCacheCapable: true); false
  // when it carried a full NodeList in Nodes.
  bool cache_mode = true;
  // Node names in request order. They view into the decoder's buffer and are
  // valid until that decoder decodes again. A name may repeat: the verbs
  // answer for its first occurrence only (ExtenderService finds repeats by
  // node index, cheaper than by string in the decoder).
  std::vector<std::string_view> node_names;
  // Non-cache mode: each node object's JSON text, to echo back in Nodes.
  std::vector<std::string> node_json;
  // In-process callers only: `node_names` resolved by
  // ExtenderService::Resolve (ignored once the node set has changed).
  std::shared_ptr<const ResolvedNodeNames> resolved;
};

// ExtenderFilterResult. Node indices refer to ExtenderArgs::node_names.
// Thousands of failed nodes share a handful of reasons, so each failure names
// its reason by index into `reasons`: no string per node is made or copied.
struct FilterOutcome {
  struct Failure {
    int32_t node;
    int32_t reason;  // index into `reasons`
  };
  std::vector<int32_t> passed;
  std::vector<Failure> failed;        // FailedNodes
  std::vector<Failure> unresolvable;  // FailedAndUnresolvableNodes
  std::vector<std::string> reasons;
  std::string error;  // Error

  // Adds `reason` to the table and returns its index.
  int32_t AddReason(std::string reason) {
    reasons.push_back(std::move(reason));
    return static_cast<int32_t>(reasons.size() - 1);
  }
  // One failure with a reason of its own (for callers off the hot path).
  void Fail(int32_t node, std::string reason) {
    failed.push_back({node, AddReason(std::move(reason))});
  }
  void FailUnresolvable(int32_t node, std::string reason) {
    unresolvable.push_back({node, AddReason(std::move(reason))});
  }
  const std::string& reason(const Failure& f) const { return reasons[f.reason]; }
};

// ExtenderBindingArgs.
struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

// ExtenderPreemptionArgs, normalised to UIDs per node (both wire forms).
struct PreemptionArgs {
  PodRequest pod;
  struct Candidate {
    std::string node;
    std::vector<std::string> victim_uids;  // in the order sent
    int64_t pdb_violations = 0;
  };
  std::vector<Candidate> candidates;
  bool cache_mode = true;
  // Non-cache mode: full victim pods as decoded (to learn unknown pods).
  std::vector<PodRequest> victim_pods;
};

// ExtenderPreemptionResult (always the NodeNameToMetaVictims form).
struct PreemptionOutcome {
  struct NodeVictims {
    std::string node;
    std::vector<std::string> victim_uids;
    int64_t pdb_violations = 0;
  };
  std::vector<NodeVictims> nodes;
  std::string error;  // encoded as HTTP 200 with an Error-less body + log
};

}  // namespace gpusched

#endif  // GPUSCHED_CORE_EXTENDER_ARGS_H_
