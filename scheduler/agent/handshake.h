// The kubelet handshake: which devices to hand a container when the kubelet
// does not say which pod it is admitting (docs/architecture.md, "The node
// agent's handshake").
//
// The kubelet admits one pod at a time and, per container, asks the plugin
// for a preference among its free device IDs (GetPreferredAllocation), then
// allocates the set it chose (Allocate). A pod is a *candidate* for that
// admission when it is bound to this node, pending, not being deleted, asks
// for exactly that many devices in one container, and is not yet allocated
// (neither by an Allocate this agent answered nor in the kubelet's
// PodResources). The preference is the candidate's recorded set
// (gpusched.io/gpu-ids) only when that candidate is unique; otherwise the
// agent falls back to gpusched's own device rule over the free devices that
// no other pending pod has recorded. Allocate always answers the devices the
// kubelet allocated, so the container, the kubelet's accounting and (after
// reconciliation) the record agree.
//
// Pure functions over values; thread-safe.
#ifndef GPUSCHED_SCHEDULER_AGENT_HANDSHAKE_H_
#define GPUSCHED_SCHEDULER_AGENT_HANDSHAKE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/model/topology.h"
#include "scheduler/codec/agent_codec.h"

namespace gpusched::agent {

enum class ResourceKind { kWholeGpu, kGpuShare };

// Devices allocated on this node, per pod uid.
struct NodeAllocations {
  absl::flat_hash_map<std::string, DeviceMask> whole;   // nvidia.com/gpu
  absl::flat_hash_map<std::string, DeviceMask> shared;  // gpusched.io/gpu-shares
  DeviceMask WholeUsed() const;
  DeviceMask SharedUsed() const;
};

// How a choice was made; every value but kRecord is a mismatch to report.
enum class ChoiceSource {
  kRecord,             // the unique candidate's recorded set
  kNoCandidate,        // no pending pod of this size: not scheduled by gpusched
  kAmbiguous,          // several candidates: none of their records is used
  kNoRecord,           // the candidate has no gpusched.io/gpu-ids
  kRecordInvalid,      // its record is malformed or names devices the node lacks
  kRecordUnavailable,  // its recorded devices are not all free (or miss must-include)
};
std::string_view ChoiceSourceName(ChoiceSource s);

struct DeviceChoiceResult {
  ChoiceSource source = ChoiceSource::kNoCandidate;
  std::string uid;      // the pod the choice is for ("" if not identified)
  std::string pod_key;  // namespace/name
  DeviceMask devices = 0;
  std::string detail;  // one line for logs and Events
};

struct HandshakeInput {
  ResourceKind kind = ResourceKind::kWholeGpu;
  int size = 0;                 // devices (whole) or shares asked for
  DeviceMask available = 0;     // devices the kubelet offers (shares: with a free replica)
  DeviceMask must_include = 0;  // devices the kubelet requires in the answer
  std::string_view node;        // this node's name
  const std::vector<codec::NodePodRecord>* pods = nullptr;  // pods on this node
  const NodeAllocations* allocated = nullptr;
  const GpuTopology* topology = nullptr;  // this node's links (never null)
  int device_count = 0;                   // devices the node has
};

// The preference for one container (GetPreferredAllocation). Always returns
// `size` devices out of `available` when `available` holds that many.
DeviceChoiceResult ChooseDevices(const HandshakeInput& in);

// The pod an Allocate of `granted` is for: the pod the preference was made
// for when the kubelet followed it; else the unique candidate whose record is
// `granted`; else the unique candidate of that size (source tells which).
// uid is "" when no pod can be told.
DeviceChoiceResult IdentifyAllocation(const HandshakeInput& in, DeviceMask granted,
                                      const DeviceChoiceResult* last_preference);

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_HANDSHAKE_H_
