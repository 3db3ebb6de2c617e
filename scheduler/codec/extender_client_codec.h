// The extender wire codec from kube-scheduler's side: encodes what
// kube-scheduler sends (ExtenderArgs in the nodeCacheCapable form with a
// full v1.Pod, ExtenderBindingArgs), decodes what the extender answers
// (ExtenderFilterResult, HostPriorityList, ExtenderBindingResult), and writes
// a Kubernetes List of Nodes that `gpusched serve --cluster` reads back.
// The reverse of extender_codec.h; every encoded value decodes with
// RequestDecoder to the same model value.
//
// Callers: the simulator's end-to-end mode, tests. All functions are pure
// and thread-safe.
#ifndef GPUSCHED_CODEC_EXTENDER_CLIENT_CODEC_H_
#define GPUSCHED_CODEC_EXTENDER_CLIENT_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/extender_args.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"

namespace gpusched::codec {

// A v1.Pod carrying `pod`'s identity, priority, CPU/memory/GPU requests and
// the gpusched.io annotations (gpu-model, gpu-milli, gpu-memory, topology,
// gang, gang-size). Pending, unbound.
std::string EncodePodObject(const PodRequest& pod);
// {"apiVersion":"v1","kind":"List","items":[Node..., Pod...]} (what
// `serve --cluster` reads); the pods as EncodePodObject writes them.
std::string EncodeClusterList(const std::vector<NodeSpec>& nodes,
                              const std::vector<PodRequest>& pods = {});

// ExtenderArgs, nodeCacheCapable form: Pod, Nodes null, NodeNames.
std::string EncodeExtenderArgs(const PodRequest& pod, const std::vector<std::string>& node_names);
// ExtenderBindingArgs.
std::string EncodeBindingArgs(const BindingArgs& args);

// ExtenderFilterResult as received (NodeNames form).
struct FilterReply {
  std::vector<std::string> node_names;
  std::vector<std::pair<std::string, std::string>> failed;        // FailedNodes
  std::vector<std::pair<std::string, std::string>> unresolvable;  // FailedAndUnresolvableNodes
  std::string error;
};
absl::StatusOr<FilterReply> DecodeFilterReply(std::string_view body);

// HostPriorityList: (Host, Score) in answer order.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> DecodePrioritizeReply(
    std::string_view body);

// ExtenderBindingResult: returns its Error ("" on success).
absl::StatusOr<std::string> DecodeBindingReply(std::string_view body);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_EXTENDER_CLIENT_CODEC_H_
