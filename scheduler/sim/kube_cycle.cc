// KubeCycle: one kube-scheduler cycle against the ExtenderService (see
// kube_cycle.h).
#include "scheduler/sim/kube_cycle.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace gpusched::sim {

KubeCycle::KubeCycle(ExtenderService* service, ClusterState* state,
                     const std::vector<std::string>& names, uint64_t tie_seed)
    : service_(service), state_(state), tie_seed_(tie_seed), ties_(tie_seed) {
  args_.cache_mode = true;
  for (const std::string& n : names) args_.node_names.push_back(n);
}

CycleResult KubeCycle::Schedule(const PodRequest& pod) {
  CycleResult r;
  args_.pod = pod;
  // The node list never changes here: resolved once per node set.
  if (args_.resolved == nullptr ||
      args_.resolved->node_set.get() != state_->Snapshot()->node_set_identity()) {
    args_.resolved = service_->Resolve(args_.node_names);
  }
  FilterOutcome filtered = service_->Filter(args_);
  if (!filtered.error.empty()) {
    r.reason = filtered.error;
    return r;
  }
  if (filtered.passed.empty()) {
    r.reason = !filtered.failed.empty()         ? filtered.reason(filtered.failed.front())
               : !filtered.unresolvable.empty() ? filtered.reason(filtered.unresolvable.front())
                                                : "no nodes";
    r.victims = Preempt(pod, filtered);
    return r;
  }
  ExtenderArgs prio;
  prio.pod = pod;
  for (int32_t i : filtered.passed) prio.node_names.push_back(args_.node_names[i]);
  std::vector<int64_t> scores = service_->Prioritize(prio);
  size_t best = 0, tied = 1;
  for (size_t i = 1; i < scores.size(); ++i) {
    if (scores[i] > scores[best]) {
      best = i, tied = 1;
    } else if (tie_seed_ != 0 && scores[i] == scores[best] && ties_() % ++tied == 0) {
      best = i;  // reservoir sampling: each tied node with probability 1/tied
    }
  }
  const std::string node(prio.node_names[best]);
  std::string err = service_->Bind(BindingArgs{pod.name, pod.ns, pod.uid, node});
  if (!err.empty()) {
    r.reason = err;
    return r;
  }
  r.node = node;
  return r;
}

int32_t KubeCycle::LowestRunningPriority(const ClusterSnapshot& snapshot) {
  if (lowest_generation_ == snapshot.generation() && lowest_generation_ != 0) {
    return lowest_priority_;
  }
  int32_t lowest = INT32_MAX;
  for (const auto& node : snapshot.nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (!p.reservation) lowest = std::min(lowest, p.priority);
    }
  }
  lowest_generation_ = snapshot.generation();
  lowest_priority_ = lowest;
  return lowest;
}

std::vector<std::string> KubeCycle::Preempt(const PodRequest& pod, const FilterOutcome& filtered) {
  if (pod.preempt_never || filtered.failed.empty()) return {};
  auto snapshot = state_->Snapshot();
  if (pod.priority <= LowestRunningPriority(*snapshot)) return {};  // no node has a victim
  PreemptionArgs args;
  args.pod = pod;
  const int64_t demand = pod.gpu.count;
  for (const FilterOutcome::Failure& failure : filtered.failed) {
    const NodeInfo* node = snapshot->Find(args_.node_names[failure.node]);
    if (node == nullptr) continue;
    // kube-scheduler's view: requests of the pods it knows (gpusched's gang
    // reservation placeholders are not pods to it).
    int64_t used = 0;
    std::vector<const PodOnNode*> lower;
    for (const PodOnNode& p : node->pods) {
      if (p.reservation) continue;
      used += p.gpus;
      if (p.priority < pod.priority) lower.push_back(&p);
    }
    const int64_t free = node->healthy_count() - used;
    int64_t freed = 0;
    for (const PodOnNode* p : lower) freed += p->gpus;
    if (free + freed < demand) continue;
    // Reprieve the most important victims first while the pod still fits.
    std::stable_sort(lower.begin(), lower.end(), [](const PodOnNode* a, const PodOnNode* b) {
      if (a->priority != b->priority) return a->priority > b->priority;
      return a->start_unix < b->start_unix;
    });
    PreemptionArgs::Candidate c;
    c.node = node->name;
    for (const PodOnNode* p : lower) {
      if (free + freed - p->gpus >= demand) {
        freed -= p->gpus;
      } else {
        c.victim_uids.push_back(p->uid);
      }
    }
    args.candidates.push_back(std::move(c));
  }
  if (args.candidates.empty()) return {};
  PreemptionOutcome out = service_->Preempt(args);
  // kube-scheduler's pickOneNodeForPreemption (no PDBs here): the lowest
  // highest-victim priority, then the lowest priority sum, then the fewest.
  const PreemptionOutcome::NodeVictims* best = nullptr;
  std::tuple<int64_t, int64_t, size_t> best_key;
  for (const auto& nv : out.nodes) {
    if (nv.victim_uids.empty()) continue;  // fits as is: nothing to free
    int64_t top = INT64_MIN, sum = 0;
    for (const std::string& uid : nv.victim_uids) {
      auto p = state_->FindPod(uid);
      const int64_t prio = p.has_value() ? p->priority : 0;
      top = std::max(top, prio);
      sum += prio;
    }
    auto key = std::make_tuple(top, sum, nv.victim_uids.size());
    if (best == nullptr || key < best_key) {
      best = &nv;
      best_key = key;
    }
  }
  if (best == nullptr) return {};
  return best->victim_uids;
}

}  // namespace gpusched::sim
