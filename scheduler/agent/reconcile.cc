#include "scheduler/agent/reconcile.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/kube_codec.h"

namespace gpusched::agent {
namespace {

void Resolve(const std::vector<std::string>& ids, const DeviceTable& table, DeviceMask* mask,
             std::vector<std::string>* unknown) {
  for (const std::string& id : ids) {
    auto index = table.ResolveDeviceId(id);
    if (index) {
      *mask |= DeviceMask{1} << *index;
    } else {
      unknown->push_back(id);
    }
  }
}

}  // namespace

std::vector<KubeletAssignment> ResolveKubeletPods(const std::vector<KubeletPod>& kubelet,
                                                  const DeviceTable& table,
                                                  const std::vector<codec::NodePodRecord>& pods) {
  absl::flat_hash_map<std::string, const codec::NodePodRecord*> by_key;
  for (const auto& p : pods) by_key[p.Key()] = &p;
  std::vector<KubeletAssignment> out;
  for (const KubeletPod& k : kubelet) {
    if (k.gpu_ids.empty() && k.share_ids.empty()) continue;
    KubeletAssignment a;
    a.ns = k.ns;
    a.name = k.name;
    auto it = by_key.find(StrCat(k.ns, "/", k.name));
    if (it != by_key.end()) a.uid = it->second->uid;
    Resolve(k.gpu_ids, table, &a.whole, &a.unknown_ids);
    Resolve(k.share_ids, table, &a.shared, &a.unknown_ids);
    out.push_back(std::move(a));
  }
  return out;
}

NodeAllocations AllocationsFrom(const std::vector<KubeletAssignment>& assigned) {
  NodeAllocations out;
  for (const KubeletAssignment& a : assigned) {
    const std::string key = a.uid.empty() ? StrCat(a.ns, "/", a.name) : a.uid;
    if (a.whole != 0) out.whole[key] |= a.whole;
    if (a.shared != 0) out.shared[key] |= a.shared;
  }
  return out;
}

std::vector<RecordFix> PlanRecordFixes(const std::vector<KubeletAssignment>& assigned,
                                       const std::vector<codec::NodePodRecord>& pods) {
  absl::flat_hash_map<std::string, const codec::NodePodRecord*> by_uid;
  for (const auto& p : pods) by_uid[p.uid] = &p;
  std::vector<RecordFix> out;
  for (const KubeletAssignment& a : assigned) {
    auto it = by_uid.find(a.uid);
    const DeviceMask actual = a.whole | a.shared;
    if (it == by_uid.end() || actual == 0) continue;
    const codec::NodePodRecord& pod = *it->second;
    RecordFix fix{pod.ns, pod.name, pod.uid, pod.gpu_ids.value_or(""), codec::FormatGpuIds(actual),
                  false};
    auto recorded = pod.gpu_ids ? codec::ParseDeviceIds(*pod.gpu_ids, "gpu-ids")
                                : absl::StatusOr<uint64_t>(absl::NotFoundError("absent"));
    fix.correction = !recorded.ok() || *recorded != actual;
    bool confirmed = pod.gpu_ids_confirmed && *pod.gpu_ids_confirmed == fix.actual;
    if (fix.correction || !confirmed) out.push_back(std::move(fix));
  }
  return out;
}

}  // namespace gpusched::agent
