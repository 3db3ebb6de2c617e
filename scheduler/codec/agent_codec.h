// JSON for the node agent (scheduler/agent via scheduler/kube): the pods of
// one node as the agent needs them (identity, phase, GPU requests, gpusched's
// device annotations) and annotation patches that set or remove keys.
// Decoding is lenient about what the agent does not read and strict about
// what it does: a malformed item is reported by name and skipped, never
// guessed. Pure; thread-safe.
#ifndef GPUSCHED_SCHEDULER_CODEC_AGENT_CODEC_H_
#define GPUSCHED_SCHEDULER_CODEC_AGENT_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusched::codec {

// The node agent's resource for a share of one GPU (the share itself is
// gpusched.io/gpu-milli), and the annotation where it confirms a pod's
// devices from the kubelet's PodResources.
inline constexpr char kResourceGpuShares[] = "gpusched.io/gpu-shares";
inline constexpr char kAnnotationGpuIdsConfirmed[] = "gpusched.io/gpu-ids-confirmed";

// One container's device-plugin requests (limits, else requests; extended
// resources are whole numbers).
struct ContainerDevices {
  std::string name;
  int64_t gpus = 0;    // nvidia.com/gpu
  int64_t shares = 0;  // gpusched.io/gpu-shares
};

struct NodePodRecord {
  std::string ns, name, uid, node_name;
  std::string phase;  // status.phase ("" when absent)
  bool deleting = false;
  std::vector<ContainerDevices> containers;  // regular containers only
  // Raw annotation values; nullopt when absent.
  std::optional<std::string> gpu_ids;            // gpusched.io/gpu-ids
  std::optional<std::string> gpu_ids_confirmed;  // gpusched.io/gpu-ids-confirmed
  std::optional<std::string> gpu_milli;          // gpusched.io/gpu-milli

  int64_t total_gpus() const;
  int64_t total_shares() const;
  std::string Key() const { return ns + "/" + name; }
};

struct NodePodList {
  std::vector<NodePodRecord> pods;
  // One line per item that could not be read ("items[3].spec...: why").
  std::vector<std::string> errors;
};

// Decodes a v1.PodList body. Fails only when the body is not a PodList.
absl::StatusOr<NodePodList> DecodeNodePodList(std::string_view body);

// Parses a gpu-ids annotation value ("4,5"; "" is no devices). Errors name
// `path` and the bad entry (not a number 0..63, or repeated).
absl::StatusOr<uint64_t> ParseDeviceIds(std::string_view text, std::string_view path);

// A JSON merge patch of metadata.annotations: a value sets the key, nullopt
// removes it. A non-empty `uid` goes in metadata.uid, which the API server
// checks as a precondition (409 when the pod was recreated).
std::string EncodeAnnotationsPatch(
    std::string_view uid,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& annotations);

}  // namespace gpusched::codec

#endif  // GPUSCHED_SCHEDULER_CODEC_AGENT_CODEC_H_
