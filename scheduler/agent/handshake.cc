#include "scheduler/agent/handshake.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"
#include "gpusched/policy/placement.h"
#include "gpusched/util/strings.h"

namespace gpusched::agent {
namespace {

using codec::NodePodRecord;

DeviceMask Lowest(DeviceMask m, int k) {
  DeviceMask out = 0;
  for (; m != 0 && k > 0; m &= m - 1, --k) out |= m & (~m + 1);
  return out;
}

int ContainerAsk(const codec::ContainerDevices& c, ResourceKind kind) {
  return static_cast<int>(kind == ResourceKind::kWholeGpu ? c.gpus : c.shares);
}

DeviceMask AllocatedTo(const HandshakeInput& in, const std::string& uid) {
  const auto& map = in.kind == ResourceKind::kWholeGpu ? in.allocated->whole : in.allocated->shared;
  auto it = map.find(uid);
  return it == map.end() ? 0 : it->second;
}

// Pending on this node and not yet (fully) allocated for this resource.
bool Pending(const HandshakeInput& in, const NodePodRecord& p) {
  if (p.node_name != in.node || p.deleting) return false;
  if (!p.phase.empty() && p.phase != "Pending") return false;
  if (in.kind == ResourceKind::kGpuShare)
    return p.total_shares() > 0 && AllocatedTo(in, p.uid) == 0;
  return p.total_gpus() > PopCount(AllocatedTo(in, p.uid));
}

bool AsksFor(const HandshakeInput& in, const NodePodRecord& p) {
  for (const auto& c : p.containers) {
    if (ContainerAsk(c, in.kind) == in.size) return true;
  }
  return false;
}

// The pod's recorded devices not yet allocated to it; ok=false when the
// record is absent, malformed or names devices the node does not have.
struct Record {
  bool present = false, valid = false;
  DeviceMask rest = 0;
  std::string error;
};

Record RecordOf(const HandshakeInput& in, const NodePodRecord& p) {
  Record r;
  if (!p.gpu_ids) return r;
  r.present = true;
  auto m = codec::ParseDeviceIds(*p.gpu_ids, StrCat(p.Key(), " ", kAnnotationGpuIds));
  if (!m.ok()) {
    r.error = std::string(m.status().message());
    return r;
  }
  DeviceMask node_mask =
      in.device_count >= 64 ? ~DeviceMask{0} : (DeviceMask{1} << in.device_count) - 1;
  if ((*m & ~node_mask) != 0) {
    r.error = StrCat(p.Key(), " ", kAnnotationGpuIds, " '", *p.gpu_ids,
                     "' names devices this node (", in.device_count, " GPUs) does not have");
    return r;
  }
  r.valid = true;
  r.rest = *m & ~AllocatedTo(in, p.uid);
  return r;
}

int MilliOf(const NodePodRecord& p) {
  int milli = 0;
  if (p.gpu_milli && absl::SimpleAtoi(*p.gpu_milli, &milli) && milli >= 1 && milli <= 1000) {
    return milli;
  }
  return 1;
}

// gpusched's device rule (policy::ChoosePlacement) over `free`, plus
// `must`. Shares: best fit among devices already shared.
DeviceMask RuleChoice(const HandshakeInput& in, DeviceMask free, DeviceMask must, int milli) {
  NodeInfo node;
  node.gpu_count = in.device_count;
  node.topology =
      std::shared_ptr<const GpuTopology>(std::shared_ptr<const GpuTopology>(), in.topology);
  node.used_milli.assign(in.device_count, 0);
  GpuRequest req;
  if (in.kind == ResourceKind::kGpuShare) {
    for (const NodePodRecord& p : *in.pods) {
      DeviceMask d = in.allocated->shared.contains(p.uid) ? in.allocated->shared.at(p.uid) : 0;
      for (int i : MaskToIndices(d)) {
        if (i < in.device_count) node.used_milli[i] += static_cast<uint16_t>(MilliOf(p));
      }
    }
    // The kubelet has a free replica on every device in `free`: each fits;
    // the use recorded only orders them (best fit).
    req.milli_per_gpu = std::min(milli, 999);
    for (int i : MaskToIndices(free)) {
      node.used_milli[i] = std::min<uint16_t>(node.used_milli[i], 1000 - req.milli_per_gpu);
    }
    node.healthy = free;
    node.whole_free = free & ~in.allocated->SharedUsed();
    req.count = 1;
  } else {
    node.healthy = free | must;
    node.whole_free = free & ~must;
    req.count = in.size - PopCount(must);
    if (req.count <= 0) return Lowest(must, in.size);
  }
  auto placement = policy::ChoosePlacement(req, node);
  if (!placement) return 0;
  return placement->devices | must;
}

// Fallback: the rule over the free devices no other pending pod recorded;
// failing that, over every free device.
DeviceMask Fallback(const HandshakeInput& in, DeviceMask reserved, int milli, std::string* detail) {
  const DeviceMask must = in.must_include & in.available;
  DeviceMask d = RuleChoice(in, in.available & ~reserved & ~must, must, milli);
  if (d == 0) {
    d = RuleChoice(in, in.available & ~must, must, milli);
    if (d != 0) StrAppend(detail, "; devices other pending pods recorded had to be used");
  }
  if (d == 0) d = Lowest(in.available, in.kind == ResourceKind::kWholeGpu ? in.size : 1);
  return d;
}

// Several candidates with the same recorded devices and the same share are
// interchangeable: whichever is admitted, it gets what gpusched recorded for
// it (two shared pods placed on one device). Returns the first of them, or
// null when the candidates differ.
const NodePodRecord* Interchangeable(const HandshakeInput& in,
                                     const std::vector<const NodePodRecord*>& candidates) {
  if (candidates.size() < 2) return nullptr;
  Record first = RecordOf(in, *candidates[0]);
  if (!first.valid) return nullptr;
  for (const NodePodRecord* p : candidates) {
    Record r = RecordOf(in, *p);
    if (!r.valid || r.rest != first.rest || MilliOf(*p) != MilliOf(*candidates[0])) return nullptr;
  }
  return candidates[0];
}

}  // namespace

DeviceMask NodeAllocations::WholeUsed() const {
  DeviceMask m = 0;
  for (const auto& [uid, d] : whole) m |= d;
  return m;
}

DeviceMask NodeAllocations::SharedUsed() const {
  DeviceMask m = 0;
  for (const auto& [uid, d] : shared) m |= d;
  return m;
}

std::string_view ChoiceSourceName(ChoiceSource s) {
  switch (s) {
    case ChoiceSource::kRecord:
      return "record";
    case ChoiceSource::kNoCandidate:
      return "no-candidate";
    case ChoiceSource::kAmbiguous:
      return "ambiguous";
    case ChoiceSource::kNoRecord:
      return "no-record";
    case ChoiceSource::kRecordInvalid:
      return "record-invalid";
    case ChoiceSource::kRecordUnavailable:
      return "record-unavailable";
  }
  return "unknown";
}

DeviceChoiceResult ChooseDevices(const HandshakeInput& in) {
  DeviceChoiceResult out;
  std::vector<const NodePodRecord*> candidates;
  DeviceMask reserved = 0;  // recorded by pending pods: never another pod's fallback
  for (const NodePodRecord& p : *in.pods) {
    if (!Pending(in, p)) continue;
    Record r = RecordOf(in, p);
    if (r.valid) reserved |= r.rest;
    if (AsksFor(in, p)) candidates.push_back(&p);
  }
  const std::string what =
      StrCat(in.size, in.kind == ResourceKind::kWholeGpu ? " GPUs" : " GPU shares");
  if (const NodePodRecord* same = Interchangeable(in, candidates)) candidates = {same};
  if (candidates.size() != 1) {
    out.source = candidates.empty() ? ChoiceSource::kNoCandidate : ChoiceSource::kAmbiguous;
    out.detail = candidates.empty()
                     ? StrCat("no pending pod on ", in.node, " asks for ", what)
                     : StrCat(candidates.size(), " pending pods on ", in.node, " ask for ", what,
                              " (", candidates[0]->Key(), ", ", candidates[1]->Key(),
                              "): none of their records is used");
    out.devices = Fallback(in, reserved, 1, &out.detail);
    return out;
  }
  const NodePodRecord& pod = *candidates[0];
  out.uid = pod.uid;
  out.pod_key = pod.Key();
  Record r = RecordOf(in, pod);
  const int want = in.kind == ResourceKind::kWholeGpu ? in.size : 1;
  DeviceMask mine = r.valid ? Lowest(r.rest, want) : 0;
  if (r.valid && PopCount(mine) == want && (mine & ~in.available) == 0 &&
      (in.must_include & ~mine) == 0) {
    out.source = ChoiceSource::kRecord;
    out.devices = mine;
    out.detail = StrCat(pod.Key(), ": recorded devices ", FormatMask(mine));
    return out;
  }
  if (!r.present) {
    out.source = ChoiceSource::kNoRecord;
    out.detail = StrCat(pod.Key(), " has no ", kAnnotationGpuIds);
  } else if (!r.valid) {
    out.source = ChoiceSource::kRecordInvalid;
    out.detail = r.error;
  } else {
    out.source = ChoiceSource::kRecordUnavailable;
    out.detail = StrCat(pod.Key(), ": recorded devices ", FormatMask(r.rest),
                        " are not all free (free: ", FormatMask(in.available), ")");
  }
  out.devices = Fallback(in, reserved & ~r.rest, MilliOf(pod), &out.detail);
  return out;
}

DeviceChoiceResult IdentifyAllocation(const HandshakeInput& in, DeviceMask granted,
                                      const DeviceChoiceResult* last) {
  if (last != nullptr && !last->uid.empty() && last->devices == granted) {
    for (const NodePodRecord& p : *in.pods) {
      if (p.uid == last->uid && Pending(in, p)) return *last;
    }
  }
  std::vector<const NodePodRecord*> candidates;
  for (const NodePodRecord& p : *in.pods) {
    if (Pending(in, p) && AsksFor(in, p)) candidates.push_back(&p);
  }
  DeviceChoiceResult out;
  out.devices = granted;
  const NodePodRecord* match = nullptr;
  int matches = 0;
  for (const NodePodRecord* p : candidates) {
    Record r = RecordOf(in, *p);
    if (r.valid && (r.rest & granted) == granted) {
      match = p;
      ++matches;
    }
  }
  if (matches > 1) {
    if (const NodePodRecord* same = Interchangeable(in, candidates)) {
      match = same;
      matches = 1;
    }
  }
  if (matches == 1) {
    out.source = ChoiceSource::kRecord;
  } else if (candidates.size() == 1) {
    match = candidates[0];
    out.source = ChoiceSource::kRecordUnavailable;
  } else {
    out.source = candidates.empty() ? ChoiceSource::kNoCandidate : ChoiceSource::kAmbiguous;
    out.detail =
        StrCat("devices ", FormatMask(granted), " allocated to a pod the agent cannot tell (",
               candidates.size(), " candidates)");
    return out;
  }
  out.uid = match->uid;
  out.pod_key = match->Key();
  out.detail = StrCat(match->Key(), ": allocated ", FormatMask(granted),
                      out.source == ChoiceSource::kRecord ? " as recorded" : ", not as recorded");
  return out;
}

}  // namespace gpusched::agent
