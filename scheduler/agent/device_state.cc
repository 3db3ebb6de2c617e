#include "scheduler/agent/device_state.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gpusched/util/strings.h"

namespace gpusched::agent {
namespace {

constexpr char kMismatchReason[] = "GpuschedDeviceMismatch";

int Milli(const codec::NodePodRecord* pod) {
  int milli = 0;
  if (pod != nullptr && pod->gpu_milli && absl::SimpleAtoi(*pod->gpu_milli, &milli) && milli >= 1 &&
      milli <= 1000) {
    return milli;
  }
  return 0;
}

std::string_view KindName(ResourceKind kind) {
  return kind == ResourceKind::kWholeGpu ? "nvidia.com/gpu" : "gpusched.io/gpu-shares";
}

}  // namespace

DeviceState::DeviceState(DeviceStateOptions options, NodeApi* api, Metrics* metrics)
    : options_(std::move(options)), api_(api), metrics_(metrics) {}

bool DeviceState::SetInventory(const QueryReport& report) {
  absl::MutexLock lock(&mu_);
  bool changed = table_.Update(report);
  if (changed) ++generation_;
  if (topology_ == nullptr || topology_->size() != static_cast<int>(table_.devices().size())) {
    // No `nvidia-smi topo -m` yet (or it disagrees): every pair as PCIe
    // across sockets, so the rule still packs and answers.
    topology_ = GpuTopology::Uniform(static_cast<int>(table_.devices().size()), Link{0, 10});
  }
  return changed;
}

void DeviceState::SetTopology(std::shared_ptr<const GpuTopology> topology) {
  absl::MutexLock lock(&mu_);
  topology_ = std::move(topology);
}

DeviceTable DeviceState::Table() const {
  absl::MutexLock lock(&mu_);
  return table_;
}

NodeAllocations DeviceState::CurrentLocked() const {
  NodeAllocations out = kubelet_;
  for (const Answered& a : answered_) {
    auto& map = a.kind == ResourceKind::kWholeGpu ? out.whole : out.shared;
    map[a.key] |= a.devices;
  }
  return out;
}

NodeAllocations DeviceState::Allocations() const {
  absl::MutexLock lock(&mu_);
  return CurrentLocked();
}

std::vector<AdvertisedDevice> DeviceState::Advertised(ResourceKind kind) const {
  absl::MutexLock lock(&mu_);
  NodeAllocations alloc = CurrentLocked();
  // Whole GPUs with shares on them, and shares of GPUs allocated whole, are
  // not offered.
  const DeviceMask blocked =
      kind == ResourceKind::kWholeGpu ? alloc.SharedUsed() : alloc.WholeUsed();
  std::vector<AdvertisedDevice> out;
  for (const GpuDevice& d : table_.devices()) {
    if (d.uuid.empty()) continue;
    const bool healthy = d.healthy && (blocked & (DeviceMask{1} << d.index)) == 0;
    if (kind == ResourceKind::kWholeGpu) {
      out.push_back({d.uuid, healthy});
      continue;
    }
    for (int r = 0; r < options_.shares_per_gpu; ++r)
      out.push_back({StrCat(d.uuid, "::", r), healthy});
  }
  return out;
}

uint64_t DeviceState::Generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

uint64_t DeviceState::WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != seen; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), absl::FromChrono(timeout));
  return generation_;
}

std::vector<codec::NodePodRecord> DeviceState::Pods() {
  auto pods = api_->ListPods();
  absl::MutexLock lock(&mu_);
  if (pods.ok()) {
    last_pods_ = *pods;
    return std::move(*pods);
  }
  std::cerr << "gpusched node-agent: cannot list pods (" << pods.status().message()
            << "); deciding from the last list (" << last_pods_.size() << " pods)\n";
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_agent_api_errors_total", "Failed Kubernetes API calls.",
                  {{"call", "list"}});
  }
  return last_pods_;
}

HandshakeInput DeviceState::Input(ResourceKind kind, int size,
                                  const std::vector<codec::NodePodRecord>& pods,
                                  const NodeAllocations& alloc) const {
  HandshakeInput in;
  in.kind = kind;
  in.size = size;
  in.node = options_.node;
  in.pods = &pods;
  in.allocated = &alloc;
  in.topology = topology_.get();
  in.device_count = static_cast<int>(table_.devices().size());
  return in;
}

DeviceMask DeviceState::MaskOf(const std::vector<std::string>& ids, std::string* unknown) const {
  DeviceMask m = 0;
  for (const std::string& id : ids) {
    auto i = table_.ResolveDeviceId(id);
    if (!i) {
      if (unknown != nullptr && unknown->empty()) *unknown = id;
      continue;
    }
    m |= DeviceMask{1} << *i;
  }
  return m;
}

// Whole GPUs: the devices' UUIDs. Shares: `size` of the offered IDs of the
// chosen device.
std::vector<std::string> DeviceState::IdsFor(ResourceKind kind, DeviceMask devices, int size,
                                             const std::vector<std::string>& available) const {
  std::vector<std::string> out;
  for (const std::string& id : available) {
    if (static_cast<int>(out.size()) == size) break;
    auto i = table_.ResolveDeviceId(id);
    if (!i || (devices & (DeviceMask{1} << *i)) == 0) continue;
    if (kind == ResourceKind::kWholeGpu) devices &= ~(DeviceMask{1} << *i);
    out.push_back(id);
  }
  return out;
}

void DeviceState::Report(const DeviceChoiceResult& r, ResourceKind kind, std::string_view call,
                         const std::vector<codec::NodePodRecord>& pods) {
  if (metrics_ != nullptr) {
    metrics_->Inc(
        "gpusched_agent_choices_total",
        "Device choices by source (record = as gpusched recorded; others are mismatches).",
        {{"call", std::string(call)},
         {"resource", std::string(KindName(kind))},
         {"source", std::string(ChoiceSourceName(r.source))}});
  }
  if (r.source == ChoiceSource::kRecord) return;
  std::cerr << "gpusched node-agent: " << call << " " << KindName(kind) << ": "
            << ChoiceSourceName(r.source) << ": " << r.detail << "; devices "
            << FormatMask(r.devices) << "\n";
  for (const auto& p : pods) {
    if (!r.uid.empty() && p.uid == r.uid) {
      api_->RecordEvent(
          p, "Warning", kMismatchReason,
          StrCat("devices ", FormatMask(r.devices), " not as gpusched recorded: ", r.detail));
    }
  }
}

std::vector<std::string> DeviceState::Prefer(ResourceKind kind,
                                             const std::vector<std::string>& available,
                                             const std::vector<std::string>& must_include,
                                             int size) {
  std::vector<codec::NodePodRecord> pods = Pods();
  DeviceChoiceResult choice;
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    NodeAllocations alloc = CurrentLocked();
    HandshakeInput in = Input(kind, size, pods, alloc);
    in.available = MaskOf(available, nullptr);
    in.must_include = MaskOf(must_include, nullptr);
    choice = ChooseDevices(in);
    ids = IdsFor(kind, choice.devices, size, available);
    last_preference_[static_cast<int>(kind)] = choice;
  }
  Report(choice, kind, "GetPreferredAllocation", pods);
  return ids;
}

ContainerAnswer DeviceState::Answer(ResourceKind kind, DeviceMask devices,
                                    const codec::NodePodRecord* pod) const {
  ContainerAnswer a;
  std::vector<std::string> uuids;
  for (int i : MaskToIndices(devices)) uuids.push_back(table_.ByIndex(i)->uuid);
  if (options_.cdi) {
    for (const std::string& u : uuids) a.cdi_devices.push_back(StrCat("nvidia.com/gpu=", u));
  } else {
    a.envs["NVIDIA_VISIBLE_DEVICES"] = absl::StrJoin(uuids, ",");
  }
  const int milli = Milli(pod);
  if (kind == ResourceKind::kGpuShare && milli > 0 && uuids.size() == 1) {
    const GpuDevice* d = table_.ByIndex(MaskToIndices(devices)[0]);
    a.envs["GPUSCHED_GPU_MILLI"] = StrCat(milli);
    a.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = StrCat(std::max(1, milli / 10));
    if (d->memory_mib > 0) {
      a.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = StrCat("0=", d->memory_mib * milli / 1000, "M");
    }
  }
  return a;
}

absl::StatusOr<ContainerAnswer> DeviceState::Allocate(ResourceKind kind,
                                                      const std::vector<std::string>& ids) {
  std::vector<codec::NodePodRecord> pods;
  {
    absl::MutexLock lock(&mu_);
    std::string unknown;
    MaskOf(ids, &unknown);
    if (!unknown.empty()) {
      CountAllocation(kind, "error");
      return absl::InvalidArgumentError(
          StrCat("device ID '", unknown, "' names no GPU of node ", options_.node));
    }
    const DeviceChoiceResult& last = last_preference_[static_cast<int>(kind)];
    if (!last.uid.empty()) pods = last_pods_;  // the list the preference was made from
  }
  if (pods.empty()) pods = Pods();
  DeviceChoiceResult who;
  ContainerAnswer answer;
  {
    absl::MutexLock lock(&mu_);
    const DeviceMask granted = MaskOf(ids, nullptr);
    NodeAllocations alloc = CurrentLocked();
    HandshakeInput in = Input(kind, static_cast<int>(ids.size()), pods, alloc);
    who = IdentifyAllocation(in, granted, &last_preference_[static_cast<int>(kind)]);
    last_preference_[static_cast<int>(kind)] = DeviceChoiceResult{};
    const DeviceMask before =
        kind == ResourceKind::kWholeGpu ? alloc.WholeUsed() : alloc.SharedUsed();
    ++seq_;
    answered_.push_back(
        {seq_, kind, who.uid.empty() ? StrCat("unidentified-", seq_) : who.uid, granted, 0});
    if ((before | granted) != before) ++generation_;  // the other resource's offer changes
    const codec::NodePodRecord* pod = nullptr;
    for (const auto& p : pods) {
      if (p.uid == who.uid) pod = &p;
    }
    answer = Answer(kind, granted, pod);
    for (int i : MaskToIndices(granted)) {
      if (!table_.ByIndex(i)->healthy) {
        std::cerr << "gpusched node-agent: Allocate: device " << i << " is unhealthy ("
                  << table_.ByIndex(i)->health_reason << ")\n";
      }
    }
  }
  Report(who, kind, "Allocate", pods);
  CountAllocation(kind, who.source == ChoiceSource::kRecord ? "recorded" : "fallback");
  return answer;
}

void DeviceState::CountAllocation(ResourceKind kind, std::string_view outcome) {
  if (metrics_ == nullptr) return;
  metrics_->Inc("gpusched_agent_allocations_total",
                "Allocate answers by outcome: recorded (the devices gpusched recorded for the "
                "pod), fallback (other devices: no usable record; see "
                "gpusched_agent_choices_total), error (refused).",
                {{"resource", std::string(KindName(kind))}, {"outcome", std::string(outcome)}});
}

uint64_t DeviceState::AllocationSeq() const {
  absl::MutexLock lock(&mu_);
  return seq_;
}

void DeviceState::SetKubeletAllocations(const NodeAllocations& truth, uint64_t seq) {
  absl::MutexLock lock(&mu_);
  NodeAllocations before = CurrentLocked();
  kubelet_ = truth;
  // An Allocate answered before the List started is in it, unless the
  // kubelet had not stored it yet: such an entry is kept for two more Lists.
  std::erase_if(answered_, [&truth, seq](Answered& a) {
    if (a.seq > seq) return false;
    const auto& map = a.kind == ResourceKind::kWholeGpu ? truth.whole : truth.shared;
    return map.contains(a.key) || ++a.missed > 2;
  });
  NodeAllocations after = CurrentLocked();
  if (before.WholeUsed() != after.WholeUsed() || before.SharedUsed() != after.SharedUsed()) {
    ++generation_;
  }
}

}  // namespace gpusched::agent
