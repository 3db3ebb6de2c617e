// A gang's topology request as users write it (docs/queue.md,
// "Topology-aware gangs"): gpusched's and Kueue's pod annotations, and a
// Volcano PodGroup's spec.networkTopology. Private to scheduler/codec
// (pod_decode.cc and gang_decode.cc call it).
#ifndef GPUSCHED_CODEC_INTERNAL_TOPOLOGY_DECODE_H_
#define GPUSCHED_CODEC_INTERNAL_TOPOLOGY_DECODE_H_

#include "gpusched/model/pod.h"
#include "scheduler/codec/internal/dom.h"

namespace gpusched::codec {

// The request of a pod's annotations `ann`. Never fails: an empty level, a
// value that is not one, or two annotations that ask different things
// (required and preferred, required and unconstrained, gpusched's and
// Kueue's disagreeing) give a request with `error` set, naming them. The
// same request written twice (gpusched's and Kueue's) is one request.
TopologyRequest DecodeTopologyAnnotations(const Object& ann);

// A Volcano PodGroup's spec.networkTopology (`spec` is the PodGroup's
// spec): mode hard = required, soft = preferred (absent: hard, as Volcano
// defaults it); highestTierAllowed is the tier (absent: 1, Volcano's
// default). Absent networkTopology: no request. Errors name the field.
TopologyRequest DecodeNetworkTopology(const Object& spec, std::string_view group_name);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_INTERNAL_TOPOLOGY_DECODE_H_
