// The pod side of framework gang declarations: which labels, annotations
// and controller owners put a pod in a gang, and the size when the pod
// carries it. Private to scheduler/codec (pod_decode.cc calls it).
#ifndef GPUSCHED_CODEC_INTERNAL_GANG_DECODE_H_
#define GPUSCHED_CODEC_INTERNAL_GANG_DECODE_H_

#include "gpusched/model/pod.h"
#include "scheduler/codec/internal/dom.h"

namespace gpusched::codec {

// Sets pod.gang, pod.gang_size and pod.gang_owner from the first framework
// declaration in `meta` (v1.Pod metadata), in this order: scheduler-plugins
// pod-group label, Volcano group-name annotation, Kueue pod-group label,
// LeaderWorkerSet group key, JobSet name label, PyTorchJob/MPIJob controller.
// Does nothing if gpusched's own annotations already set a gang or a size
// (they win). Never fails: a malformed or missing count annotation is not
// part of the pod's GPU request, it leaves the gang's size unknown
// (kGangSizeUnknown) with why in pod.gang_size_reason, naming it.
void ApplyGangDeclarations(const Object& meta, PodRequest& pod);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_INTERNAL_GANG_DECODE_H_
