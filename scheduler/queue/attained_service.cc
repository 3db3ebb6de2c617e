#include "scheduler/queue/attained_service.h"

#include <algorithm>

#include "scheduler/queue/snapshot_delta.h"

namespace gpusched::queue {

const AttainedServiceConfig& AttainedOf(const QuotaConfig& quotas, const std::string& ns) {
  static const AttainedServiceConfig kOff;
  if (!quotas.enabled) return kOff;
  auto it = quotas.namespaces.find(ns);
  return it == quotas.namespaces.end() ? quotas.default_quota.attained : it->second.attained;
}

const std::string* AttainedService::WorkloadOf(const std::string& uid) const {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : &it->second.workload;
}

void AttainedService::Add(const PodOnNode& p, int64_t now_s) {
  const int64_t milli = int64_t{p.gpus} * p.milli_per_gpu;
  const int64_t start = p.start_unix > 0 ? std::min(p.start_unix, now_s) : now_s;
  pods_[p.uid] = {p.ns, p.workload, milli, start};
  Workload& w = workloads_[p.ns][p.workload];
  w.running_milli += milli;
  w.running_milli_start += milli * start;
  w.running.push_back({p.uid, p.priority, start});
}

void AttainedService::Remove(const std::string& uid, int64_t now_s) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  const PodRecord& r = it->second;
  Workload& w = workloads_[r.ns][r.workload];
  w.banked += r.milli * std::max<int64_t>(0, now_s - r.start_s);
  w.running_milli -= r.milli;
  w.running_milli_start -= r.milli * r.start_s;
  std::erase_if(w.running, [&](const RunningPod& p) { return p.uid == uid; });
  w.last_left_s = now_s;
  if (w.running.empty() && !w.awaits_forget) {
    w.awaits_forget = true;
    left_.emplace(now_s, r.ns, r.workload);
  }
  pods_.erase(it);
}

void AttainedService::Update(std::shared_ptr<const ClusterSnapshot> snapshot, int64_t now_s) {
  if (snapshot == last_) return;
  SnapshotDelta delta = DiffSnapshots(last_.get(), *snapshot, pods_);
  for (const PodOnNode* p : delta.present) {
    if (!pods_.contains(p->uid)) Add(*p, now_s);
  }
  for (const std::string& uid : delta.maybe_gone) Remove(uid, now_s);
  last_ = std::move(snapshot);
}

double AttainedService::GpuSeconds(const std::string& ns, const std::string& workload,
                                   int64_t now_s) const {
  auto n = workloads_.find(ns);
  if (n == workloads_.end()) return 0;
  auto w = n->second.find(workload);
  return w == n->second.end() ? 0 : static_cast<double>(w->second.MilliSeconds(now_s)) / 1000.0;
}

const absl::flat_hash_map<std::string, AttainedService::Workload>* AttainedService::Of(
    const std::string& ns) const {
  auto n = workloads_.find(ns);
  return n == workloads_.end() ? nullptr : &n->second;
}

size_t AttainedService::Forget(int64_t now_s, int64_t forget_after_s, size_t max_forgets) {
  size_t forgotten = 0;
  while (!left_.empty() && forgotten < max_forgets) {
    const auto& [left_s, ns, workload] = left_.top();
    if (now_s - left_s <= forget_after_s) break;  // neither it nor any later one is due
    auto n = workloads_.find(ns);
    if (n == workloads_.end()) {
      left_.pop();
      continue;
    }
    auto it = n->second.find(workload);
    if (it == n->second.end()) {
      left_.pop();
      continue;
    }
    Workload& work = it->second;
    work.awaits_forget = false;
    if (!work.running.empty()) {  // back on a node: queued again when it empties
      left_.pop();
      continue;
    }
    if (left_s != work.last_left_s) {  // emptied again since: queued by that time
      LeftEntry again{work.last_left_s, ns, workload};
      left_.pop();
      work.awaits_forget = true;
      left_.push(std::move(again));
      continue;
    }
    left_.pop();
    n->second.erase(it);
    if (n->second.empty()) workloads_.erase(n);
    ++forgotten;
  }
  return forgotten;
}

}  // namespace gpusched::queue
