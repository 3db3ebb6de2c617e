// The objects that declare a gang's size when its pods do not carry it
// (scheduler-plugins and Volcano PodGroups, JobSets, PyTorchJobs, MPIJobs):
// where the API serves each kind, and the size an object body declares.
// The pod side (which labels, annotations and owners name a gang) is
// decoded with the pod (internal/gang_decode.h). docs/queue.md, "Gangs from
// framework labels", is the user-facing table.
//
// Pure functions; thread-safe.
#ifndef GPUSCHED_CODEC_GANG_CODEC_H_
#define GPUSCHED_CODEC_GANG_CODEC_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpusched/model/pod.h"

namespace gpusched::codec {

// Where the API serves one owner kind (namespaced objects).
struct GangOwnerApi {
  std::string_view group;
  std::string_view version;
  std::string_view plural;
  std::string_view kind;        // for messages: "PodGroup"
  std::string_view key_prefix;  // PodRequest::gang is key_prefix + name
};

// REQUIRES: kind != GangOwnerKind::kNone.
const GangOwnerApi& GangOwnerApiOf(GangOwnerKind kind);

// The number of members that must start together, as the object declares
// it: a PodGroup's spec.minMember; a JobSet's sum of replicas x
// parallelism over its replicated jobs; a PyTorchJob's or MPIJob's
// spec.runPolicy.schedulingPolicy.minAvailable, else the sum of its
// replica specs' replicas. An error names the field.
absl::StatusOr<int32_t> DecodeGangOwnerSize(GangOwnerKind kind, std::string_view body);

// The size as above, and the gang's topology request the object declares
// (a Volcano PodGroup's spec.networkTopology; docs/queue.md,
// "Topology-aware gangs"). An invalid networkTopology does not fail the
// decode: the request carries the error. `name` names the object in it.
struct GangOwnerSpec {
  int32_t size = 0;
  TopologyRequest topology;
};
absl::StatusOr<GangOwnerSpec> DecodeGangOwner(GangOwnerKind kind, std::string_view name,
                                              std::string_view body);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_GANG_CODEC_H_
