#include "gpusched/core/cluster_state.h"

#include <algorithm>
#include <array>
#include <bit>

#include "gpusched/util/strings.h"

namespace gpusched {
namespace {

DeviceMask LowMask(int n) { return n >= 64 ? ~DeviceMask{0} : (DeviceMask{1} << n) - 1; }

// What a node keeps of one of its pods (devices filled in by the caller).
PodOnNode OnNode(const PodRequest& p, bool devices_known) {
  PodOnNode on;
  on.uid = p.uid;
  on.ns = p.ns;
  on.name = p.name;
  on.priority = p.priority;
  on.start_unix = p.start_unix;
  on.gpus = p.gpu.count;
  on.milli_per_gpu = p.gpu.milli_per_gpu;
  on.devices_known = devices_known;
  on.gang = p.gang;
  on.cpu_milli = p.cpu_milli;
  on.memory_mib = p.memory_mib;
  on.reservation = p.reservation;
  on.workload = p.WorkloadKey();
  return on;
}

}  // namespace

namespace {

// The node's state while its pods are applied: which pod first took each
// device, for naming it in a conflict.
struct Holders {
  std::array<const PodRequest*, kMaxGpusPerNode> by_device{};
};

// Why `p`'s gpusched.io/gpu-ids claim cannot be honoured as written on `n`
// (ids the node does not have, a count that differs from the request, a
// device already full), or "" if it can.
std::string ClaimProblem(const NodeInfo& n, const PodRequest& p, const Holders& h) {
  const DeviceMask all = LowMask(n.gpu_count);
  if ((p.gpu_ids & ~all) != 0) {
    return StrCat("pod ", p.Key(), " claims GPUs ", FormatMask(p.gpu_ids), ", node has ",
                  n.gpu_count);
  }
  if (PopCount(p.gpu_ids) != p.gpu.count) {
    return StrCat("pod ", p.Key(), " claims ", PopCount(p.gpu_ids), " GPU ids (",
                  FormatMask(p.gpu_ids), ") for ", p.gpu.count, " GPUs");
  }
  const int add = p.gpu.shared() ? p.gpu.milli_per_gpu : 1000;
  for (DeviceMask m = p.gpu_ids; m != 0; m &= m - 1) {
    const int d = std::countr_zero(m);
    if (n.used_milli[d] + add <= 1000) continue;
    const PodRequest* other = h.by_device[d];
    return StrCat("pods ", other != nullptr ? other->Key() : "?", " and ", p.Key(),
                  " both claim GPU ", d);
  }
  return "";
}

// Marks `p`'s claimed devices used (ClaimProblem found none).
void ApplyClaim(NodeInfo& n, const PodRequest& p, PodOnNode& on, Holders& h) {
  const int add = p.gpu.shared() ? p.gpu.milli_per_gpu : 1000;
  on.devices = p.gpu_ids;
  for (DeviceMask m = p.gpu_ids; m != 0; m &= m - 1) {
    const int d = std::countr_zero(m);
    n.used_milli[d] = static_cast<uint16_t>(n.used_milli[d] + add);
    if (h.by_device[d] == nullptr) h.by_device[d] = &p;
  }
}

// Gives `p` (devices unknown) free devices: its own claimed ones first, then
// healthy ones, then the rest (it holds devices regardless). Returns how
// many it still lacks.
int TakeFreeDevices(NodeInfo& n, const PodRequest& p, PodOnNode& on, Holders& h) {
  const DeviceMask all = LowMask(n.gpu_count);
  const DeviceMask own = p.has_gpu_ids ? p.gpu_ids & all : 0;
  int need = p.gpu.count;
  for (DeviceMask pool : {own & n.healthy, n.healthy, all & ~n.healthy}) {
    for (DeviceMask m = pool; m != 0 && need > 0; m &= m - 1) {
      const int d = std::countr_zero(m);
      if (p.gpu.shared()) {
        if (n.used_milli[d] + p.gpu.milli_per_gpu > 1000) continue;
        n.used_milli[d] = static_cast<uint16_t>(n.used_milli[d] + p.gpu.milli_per_gpu);
        need = 0;
      } else if (n.used_milli[d] == 0) {
        n.used_milli[d] = 1000;
        --need;
      } else {
        continue;
      }
      on.devices |= DeviceMask{1} << d;
      if (h.by_device[d] == nullptr) h.by_device[d] = &p;
    }
  }
  return need;
}

// The devices offered on a node of `gpu_count` GPUs. The kubelet says how
// many are allocatable, not which: the missing ones are taken to be the
// highest indices. With the node agent's device plugin
// (NodeSpec::gpu_shares_offered) a GPU that holds shared pods is advertised
// unhealthy for nvidia.com/gpu only so the kubelet keeps whole-GPU pods off
// it; it is in service, and the others missing are counted among the rest.
DeviceMask OfferedDevices(const NodeSpec& spec, int gpu_count,
                          const std::vector<const PodRequest*>& pods) {
  const DeviceMask all = LowMask(gpu_count);
  DeviceMask shared = 0;
  if (spec.gpu_shares_offered) {
    for (const PodRequest* p : pods) {
      if (p->gpu.shared() && p->has_gpu_ids) shared |= p->gpu_ids & all;
    }
  }
  int missing = gpu_count - std::clamp(spec.gpu_allocatable, 0, gpu_count) - PopCount(shared);
  DeviceMask offered = all;
  for (int d = gpu_count - 1; d >= 0 && missing > 0; --d) {
    if ((shared >> d) & 1) continue;
    offered &= ~(DeviceMask{1} << d);
    --missing;
  }
  return offered;
}

bool StartedEarlier(const PodRequest* a, const PodRequest* b) {
  if (a->start_unix != b->start_unix) return a->start_unix < b->start_unix;
  return a->uid < b->uid;
}

}  // namespace

NodeInfo BuildNodeInfo(const NodeSpec& spec, std::shared_ptr<const GpuTopology> topology,
                       const std::vector<const PodRequest*>& pods, uint16_t product_id,
                       std::vector<std::string>* conflicts) {
  NodeInfo n;
  n.name = spec.name;
  n.product_id = product_id;
  n.gpu_memory_mib = spec.gpu_memory_mib;
  n.gpu_count = topology ? topology->size() : 0;
  n.healthy = OfferedDevices(spec, n.gpu_count, pods);
  n.used_milli.assign(n.gpu_count, 0);
  n.topology = std::move(topology);
  n.cpu_milli = spec.cpu_milli;
  n.memory_mib = spec.memory_mib;
  n.unschedulable = spec.unschedulable;
  n.labels = spec.labels;
  auto conflict = [&](std::string why) {
    ++n.device_conflicts;
    if (conflicts != nullptr) conflicts->push_back(std::move(why));
  };
  // Pass 1: claims that can be honoured, earliest started first (a later
  // claim on the same device is the one not honoured). Pass 2: pods without
  // usable ids, and those whose claim was not honoured: each holds that
  // many free devices, so every claim counts and a full node looks full.
  std::vector<const PodRequest*> claimed, unknown;
  for (const PodRequest* p : pods) {
    n.cpu_used_milli += p->cpu_milli;
    n.memory_used_mib += p->memory_mib;
    if (p->gpu.count == 0) continue;
    (p->has_gpu_ids ? claimed : unknown).push_back(p);
  }
  std::sort(claimed.begin(), claimed.end(), StartedEarlier);
  Holders holders;
  for (const PodRequest* p : claimed) {
    PodOnNode on = OnNode(*p, /*devices_known=*/true);
    std::string why = ClaimProblem(n, *p, holders);
    if (!why.empty()) {
      conflict(StrCat(why, "; ", p->Key(), " is counted on other free devices"));
      unknown.push_back(p);
      continue;
    }
    ApplyClaim(n, *p, on, holders);
    n.pods.push_back(std::move(on));
  }
  std::sort(unknown.begin(), unknown.end(), StartedEarlier);
  for (const PodRequest* p : unknown) {
    PodOnNode on = OnNode(*p, /*devices_known=*/false);
    const int missing = TakeFreeDevices(n, *p, on, holders);
    if (missing > 0) {
      conflict(StrCat("pod ", p->Key(), " holds ", p->gpu.count, " GPUs, ", missing,
                      " more than the node has free"));
    }
    n.pods.push_back(std::move(on));
  }
  for (DeviceMask m = n.healthy; m != 0; m &= m - 1) {
    int d = std::countr_zero(m);
    if (n.used_milli[d] == 0) n.whole_free |= DeviceMask{1} << d;
    if (n.used_milli[d] != 0 && n.used_milli[d] != 1000) n.partial_share = true;
  }
  std::sort(n.pods.begin(), n.pods.end(),
            [](const PodOnNode& a, const PodOnNode& b) { return a.uid < b.uid; });
  return n;
}

ClusterState::ClusterState(std::vector<TopologyTemplate> templates)
    : catalog_(std::move(templates)) {
  absl::MutexLock l(&mu_);
  product_names_.push_back("");
  CommitLocked();
}

uint16_t ClusterState::ProductId(const std::string& product) {
  for (size_t i = 0; i < product_names_.size(); ++i) {
    if (product_names_[i] == product) return static_cast<uint16_t>(i);
  }
  if (product_names_.size() >= 65535) return 0;
  product_names_.push_back(product);
  products_.reset();
  return static_cast<uint16_t>(product_names_.size() - 1);
}

void ClusterState::Touch(const std::string& node) {
  if (!node.empty()) dirty_.insert(node);
}

void ClusterState::NoteChanged(const std::string& uid) {
  pods_changed_.store(true, std::memory_order_release);
  if (pods_reset_) return;  // the next read is a full one anyway
  changed_pods_.insert(uid);
  // Without a reader the set would only grow (the removed pods' uids): past
  // a bound, the next read becomes a full one instead.
  if (changed_pods_.size() > pods_.size() + 65536) {
    changed_pods_.clear();
    pods_reset_ = true;
  }
}

void ClusterState::UpsertNode(NodeSpec spec) {
  absl::MutexLock l(&mu_);
  std::string name = spec.name;
  if (!nodes_.contains(name)) topology_changed_ = true;
  nodes_[name] = std::move(spec);
  Touch(name);
}

void ClusterState::RemoveNode(std::string_view name) {
  absl::MutexLock l(&mu_);
  if (nodes_.erase(std::string(name)) > 0) {
    topology_changed_ = true;
    built_.erase(std::string(name));
    conflicts_.erase(std::string(name));
  }
}

void ClusterState::UnlinkPod(const PodRequest& pod) {
  if (!pod.node_name.empty()) {
    auto it = pods_by_node_.find(pod.node_name);
    if (it != pods_by_node_.end()) {
      it->second.erase(pod.uid);
      if (it->second.empty()) pods_by_node_.erase(it);
    }
    Touch(pod.node_name);
  }
  uid_by_key_.erase(pod.Key());
}

void ClusterState::UpsertPod(PodRequest pod) {
  absl::MutexLock l(&mu_);
  UpsertPodLocked(std::move(pod));
}

void ClusterState::UpsertPodLocked(PodRequest pod) {
  auto it = pods_.find(pod.uid);
  if (it != pods_.end()) UnlinkPod(*it->second);
  if (!pod.node_name.empty()) {
    pods_by_node_[pod.node_name].insert(pod.uid);
    Touch(pod.node_name);
  }
  uid_by_key_[pod.Key()] = pod.uid;
  std::string uid = pod.uid;
  NoteChanged(uid);
  pods_[uid] = std::make_shared<const PodRequest>(std::move(pod));
}

void ClusterState::RemovePod(std::string_view uid) {
  absl::MutexLock l(&mu_);
  RemovePodLocked(uid);
}

void ClusterState::RemovePodLocked(std::string_view uid) {
  auto it = pods_.find(ToAbsl(uid));
  if (it == pods_.end()) return;
  UnlinkPod(*it->second);
  NoteChanged(it->first);
  pods_.erase(it);
}

void ClusterState::RemovePodsAndCommit(const std::vector<std::string>& uids) {
  absl::MutexLock l(&mu_);
  for (const std::string& uid : uids) RemovePodLocked(uid);
  CommitLocked();
}

void ClusterState::ApplyPodsAndCommit(std::vector<PodUpdate> updates) {
  absl::MutexLock l(&mu_);
  for (PodUpdate& u : updates) {
    if (u.pod.has_value()) {
      UpsertPodLocked(*std::move(u.pod));
    } else {
      RemovePodLocked(u.uid);
    }
  }
  CommitLocked();
}

void ClusterState::Reset(std::vector<NodeSpec> nodes, std::vector<PodRequest> pods) {
  absl::MutexLock l(&mu_);
  nodes_.clear();
  pods_.clear();
  changed_pods_.clear();
  pods_reset_ = true;
  pods_changed_.store(true, std::memory_order_release);
  uid_by_key_.clear();
  pods_by_node_.clear();
  built_.clear();
  dirty_.clear();
  topology_changed_ = true;
  // Sized once: growing these one rehash at a time moves every pod again.
  nodes_.reserve(nodes.size());
  dirty_.reserve(nodes.size());
  pods_.reserve(pods.size());
  uid_by_key_.reserve(pods.size());
  pods_by_node_.reserve(nodes.size());
  for (NodeSpec& n : nodes) {
    std::string name = n.name;
    nodes_[name] = std::move(n);
    dirty_.insert(name);
  }
  // A loop, not absl::erase_if: -Wthread-safety cannot see that a lambda
  // reading nodes_ runs under mu_.
  for (auto it = conflicts_.begin(); it != conflicts_.end();) {
    if (nodes_.contains(it->first)) {
      ++it;
    } else {
      conflicts_.erase(it++);  // flat_hash_map: erasing keeps other iterators valid
    }
  }
  for (PodRequest& p : pods) {
    if (!p.node_name.empty()) pods_by_node_[p.node_name].insert(p.uid);
    uid_by_key_.insert_or_assign(p.Key(), p.uid);
    std::string uid = p.uid;
    pods_.insert_or_assign(std::move(uid), std::make_shared<const PodRequest>(std::move(p)));
  }
}

absl::Status ClusterState::Assume(const PodRequest& pod, std::string_view node,
                                  DeviceMask devices) {
  return AssumeAll({{pod, std::string(node), devices}});
}

absl::Status ClusterState::CheckAssumableLocked(const PodRequest& pod, const std::string& node,
                                                DeviceMask devices,
                                                std::map<std::pair<std::string, int>, int>* taken) {
  auto known = pods_.find(pod.uid);
  if (known != pods_.end() && known->second->HoldsGpus()) {
    return absl::FailedPreconditionError(
        StrCat("pod ", pod.Key(), " is already bound to ", known->second->node_name));
  }
  const NodeInfo* info = nodes_.contains(node) ? current_->Find(node) : nullptr;
  if (info == nullptr) return absl::NotFoundError(StrCat("node '", node, "' is not known"));
  if (pod.gpu.count == 0) return absl::OkStatus();
  if (PopCount(devices) != pod.gpu.count || (devices & ~info->healthy) != 0) {
    return absl::InvalidArgumentError(
        StrCat("device set ", FormatMask(devices), " does not fit node '", node, "'"));
  }
  for (DeviceMask m = devices; m != 0; m &= m - 1) {
    const int d = std::countr_zero(m);
    const int need = pod.gpu.shared() ? pod.gpu.milli_per_gpu : 1000;
    int& more = (*taken)[{node, d}];  // by the earlier pods of the same call
    if (info->used_milli[d] + more + need > 1000) {
      return absl::FailedPreconditionError(
          StrCat("GPU ", d, " on ", node, " is already allocated"));
    }
    more += need;
  }
  return absl::OkStatus();
}

absl::Status ClusterState::AssumeAll(const std::vector<Assumption>& pods) {
  absl::MutexLock l(&mu_);
  CommitLocked();  // so the checks below see every earlier mutation
  std::map<std::pair<std::string, int>, int> taken;
  absl::flat_hash_set<std::string> uids;
  for (const Assumption& a : pods) {
    if (!uids.insert(a.pod.uid).second) {
      return absl::InvalidArgumentError(StrCat("pod ", a.pod.Key(), " is assumed twice"));
    }
    absl::Status s = CheckAssumableLocked(a.pod, a.node, a.devices, &taken);
    if (!s.ok()) return s;
  }
  for (const Assumption& a : pods) {
    PodRequest bound = a.pod;
    bound.node_name = a.node;
    if (bound.phase == PodPhase::kPending || bound.phase == PodPhase::kUnknown) {
      bound.phase = PodPhase::kRunning;
    }
    bound.has_gpu_ids = a.pod.gpu.count > 0;
    bound.gpu_ids = a.devices;
    auto known = pods_.find(bound.uid);
    if (known != pods_.end()) UnlinkPod(*known->second);
    pods_by_node_[bound.node_name].insert(bound.uid);
    Touch(bound.node_name);
    uid_by_key_[bound.Key()] = bound.uid;
    NoteChanged(bound.uid);
    std::string uid = bound.uid;
    pods_[uid] = std::make_shared<const PodRequest>(std::move(bound));
  }
  CommitLocked();
  return absl::OkStatus();
}

void ClusterState::Forget(std::string_view uid) {
  absl::MutexLock l(&mu_);
  auto it = pods_.find(ToAbsl(uid));
  if (it == pods_.end()) return;
  UnlinkPod(*it->second);
  auto pending = std::make_shared<PodRequest>(*it->second);
  pending->node_name.clear();
  pending->phase = PodPhase::kPending;
  pending->has_gpu_ids = false;
  pending->gpu_ids = 0;
  uid_by_key_[pending->Key()] = pending->uid;
  it->second = std::move(pending);
  NoteChanged(it->first);
  CommitLocked();
}

std::shared_ptr<const ClusterSnapshot> ClusterState::Commit() {
  absl::MutexLock l(&mu_);
  return CommitLocked();
}

std::shared_ptr<const ClusterSnapshot> ClusterState::CommitLocked() {
  if (dirty_.empty() && !topology_changed_ && current_ != nullptr) return current_;
  for (const std::string& name : dirty_) {
    auto spec = nodes_.find(name);
    if (spec == nodes_.end()) continue;
    std::vector<const PodRequest*> pods;
    auto bound = pods_by_node_.find(name);
    if (bound != pods_by_node_.end()) {
      for (const std::string& uid : bound->second) {
        auto p = pods_.find(uid);
        if (p != pods_.end() && p->second->HoldsGpus()) pods.push_back(p->second.get());
      }
    }
    const NodeSpec& s = spec->second;
    int gpus = std::clamp(std::max(s.gpu_count, s.gpu_allocatable), 0, kMaxGpusPerNode);
    std::string topo_error;
    auto topo = catalog_.ForNode(s, gpus, &topo_error);
    std::vector<std::string> found;
    auto info = std::make_shared<NodeInfo>(
        BuildNodeInfo(s, std::move(topo), pods, ProductId(s.product), &found));
    NoteConflictsLocked(name, std::move(found));
    if (!topo_error.empty()) spec->second.topology_error = topo_error;
    built_[name] = std::move(info);
  }
  if (products_ == nullptr) {
    products_ = std::make_shared<const std::vector<std::string>>(product_names_);
  }
  if (topology_changed_ || index_ == nullptr) {
    std::vector<std::string> names;
    names.reserve(nodes_.size());
    for (const auto& [name, spec] : nodes_) names.push_back(name);
    std::sort(names.begin(), names.end());
    order_.clear();
    order_.reserve(names.size());
    for (const std::string& name : names) order_.push_back(built_[name]);
    auto index = std::make_shared<const ClusterSnapshot::NodeIndex>(names);
    index_ = std::move(index);
    topology_changed_ = false;
    dirty_.clear();
    current_ = std::make_shared<const ClusterSnapshot>(++generation_, order_, index_, products_);
    published_.store(current_, std::memory_order_release);
    return current_;
  }
  std::vector<std::pair<int32_t, std::shared_ptr<const NodeInfo>>> changed;
  for (const std::string& name : dirty_) {
    const int32_t i = index_->Find(name);
    if (i < 0) continue;
    order_[i] = built_[name];
    changed.emplace_back(i, order_[i]);
  }
  dirty_.clear();
  if (current_ == nullptr) {
    current_ = std::make_shared<const ClusterSnapshot>(++generation_, order_, index_, products_);
  } else {
    current_ = ClusterSnapshot::Patched(*current_, ++generation_, std::move(changed), products_);
  }
  published_.store(current_, std::memory_order_release);
  return current_;
}

std::shared_ptr<const ClusterSnapshot> ClusterState::Snapshot() const {
  return published_.load(std::memory_order_acquire);
}

std::optional<PodRequest> ClusterState::FindPod(std::string_view uid) const {
  absl::MutexLock l(&mu_);
  auto it = pods_.find(ToAbsl(uid));
  if (it == pods_.end()) return std::nullopt;
  return *it->second;
}

std::vector<bool> ClusterState::HasPods(const std::vector<std::string_view>& uids) const {
  std::vector<bool> out(uids.size());
  if (uids.empty()) return out;
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < uids.size(); ++i) out[i] = pods_.contains(ToAbsl(uids[i]));
  return out;
}

std::optional<PodRequest> ClusterState::FindPodByName(std::string_view ns,
                                                      std::string_view name) const {
  absl::MutexLock l(&mu_);
  auto it = uid_by_key_.find(StrCat(ns, "/", name));
  if (it == uid_by_key_.end()) return std::nullopt;
  auto p = pods_.find(it->second);
  if (p == pods_.end()) return std::nullopt;
  return *p->second;
}

std::vector<PodRequest> ClusterState::Pods() const {
  absl::MutexLock l(&mu_);
  std::vector<PodRequest> out;
  out.reserve(pods_.size());
  for (const auto& [uid, p] : pods_) out.push_back(*p);
  std::sort(out.begin(), out.end(),
            [](const PodRequest& a, const PodRequest& b) { return a.uid < b.uid; });
  return out;
}

std::vector<PodRequest> ClusterState::PodsWhere(
    const std::function<bool(const PodRequest&)>& keep) const {
  absl::MutexLock l(&mu_);
  std::vector<PodRequest> out;
  for (const auto& [uid, p] : pods_) {
    if (keep(*p)) out.push_back(*p);
  }
  return out;
}

bool ClusterState::AwaitPodChanges(absl::Duration timeout) const {
  // NoteChanged sets the flag under mu_, so the condition is looked at again
  // whenever a writer releases it.
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](const std::atomic<bool>* changed) { return changed->load(); }, &pods_changed_),
      timeout);
}

ClusterState::PodChanges ClusterState::TakePodChanges(
    const std::function<bool(const PodRequest&)>& keep, bool all) {
  PodChanges out;
  // Nothing changed since the last call: answered without the mutex, which
  // a writer may hold for a while (the reader usually holds its own).
  if (!all && !pods_changed_.load(std::memory_order_acquire)) return out;
  absl::MutexLock l(&mu_);
  if (all || pods_reset_) {
    out.full = true;
    out.pods.reserve(pods_.size());
    for (const auto& [uid, p] : pods_) {
      if (keep(*p)) out.pods.emplace_back(uid, p);
    }
  } else {
    out.pods.reserve(changed_pods_.size());
    for (const std::string& uid : changed_pods_) {
      auto it = pods_.find(uid);
      if (it != pods_.end() && keep(*it->second)) {
        out.pods.emplace_back(uid, it->second);
      } else {
        out.pods.emplace_back(uid, nullptr);
      }
    }
  }
  changed_pods_.clear();
  pods_reset_ = false;
  pods_changed_.store(false, std::memory_order_relaxed);  // under mu_: no change is lost
  return out;
}

void ClusterState::NoteConflictsLocked(const std::string& node, std::vector<std::string> found) {
  auto it = conflicts_.find(node);
  if (found.empty()) {
    if (it != conflicts_.end()) conflicts_.erase(it);
    return;
  }
  if (conflict_log_) {
    for (const std::string& what : found) {
      const bool known = it != conflicts_.end() &&
                         std::find(it->second.begin(), it->second.end(), what) != it->second.end();
      if (!known) conflict_log_(node, what);
    }
  }
  conflicts_[node] = std::move(found);
}

std::vector<std::pair<std::string, std::string>> ClusterState::DeviceConflicts() const {
  absl::MutexLock l(&mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [node, list] : conflicts_) {
    if (!nodes_.contains(node)) continue;
    for (const std::string& what : list) out.emplace_back(node, what);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ClusterState::SetConflictLog(ConflictLog log) {
  absl::MutexLock l(&mu_);
  conflict_log_ = std::move(log);
}

std::vector<std::pair<std::string, std::string>> ClusterState::TopologyErrors() const {
  absl::MutexLock l(&mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, spec] : nodes_) {
    if (!spec.topology_error.empty()) out.emplace_back(name, spec.topology_error);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpusched
