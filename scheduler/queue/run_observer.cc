#include "scheduler/queue/run_observer.h"

#include "absl/container/flat_hash_set.h"

namespace gpusched::queue {

void RunObserver::Observe(const std::shared_ptr<const ClusterSnapshot>& snapshot, int64_t now_s,
                          const EndOf& end_of, RuntimeHistory* history) {
  if (snapshot == nullptr || snapshot == last_) return;
  absl::flat_hash_set<std::string> maybe_gone;
  std::vector<const PodOnNode*> present;
  auto after = [&](const NodeInfo& n) {
    for (const PodOnNode& p : n.pods) {
      if (!p.reservation && p.gpus > 0) present.push_back(&p);
    }
  };
  const auto& nodes = snapshot->nodes();
  if (last_ != nullptr && last_->node_set_identity() == snapshot->node_set_identity()) {
    const auto& before = last_->nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (before[i] == nodes[i]) continue;
      for (const PodOnNode& p : before[i]->pods) maybe_gone.insert(p.uid);
      after(*nodes[i]);
    }
  } else {
    for (const auto& [uid, r] : running_) maybe_gone.insert(uid);
    for (const auto& n : nodes) after(*n);
  }
  for (const PodOnNode* p : present) {
    maybe_gone.erase(p->uid);
    if (running_.contains(p->uid)) continue;
    const int64_t start = p->start_unix > 0 ? std::min(p->start_unix, now_s) : now_s;
    running_[p->uid] = {p->ns, p->workload, p->gpus, start};
  }
  for (const std::string& uid : maybe_gone) {
    auto it = running_.find(uid);
    if (it == running_.end()) continue;
    if (std::optional<int64_t> end = end_of(uid, now_s)) {
      const Running& r = it->second;
      history->Record(r.ns, r.workload, r.gpus, *end - r.start_s);
    }
    running_.erase(it);
  }
  last_ = snapshot;
}

void RunObserver::Seed(const std::vector<PodRequest>& pods, RuntimeHistory* history) {
  for (const PodRequest& p : pods) {
    if (p.phase != PodPhase::kSucceeded || p.finish_unix <= 0 || p.start_unix <= 0) continue;
    if (p.gpu.count == 0 || !seeded_.emplace(p.uid, true).second) continue;
    history->Record(p.ns, p.WorkloadKey(), p.gpu.count, p.finish_unix - p.start_unix);
  }
}

}  // namespace gpusched::queue
