// QueueManager: whole-gang preemption. A gang preempts as one decision: one
// plan places every missing member (on a node with room as is, else on the
// node needing the fewest GPUs evicted), the victims together leave quota for
// the whole gang, and each member's preempt call answers from that plan with
// the node of its own step. A victim gang is taken whole: its members on the
// node answered for are evicted by kube-scheduler, and gpusched evicts the
// others once one of those is going (GangFollowupEvictionsLocked).
#include <algorithm>

#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {
namespace {

// True if some pod on `node` could be a victim for `member` at all (cheap
// pre-check before planning there).
bool AnyCandidate(const NodeInfo& node, const PodRequest& member, bool reclaim,
                  const absl::flat_hash_map<std::string, int64_t>& evicted) {
  return std::any_of(node.pods.begin(), node.pods.end(), [&](const PodOnNode& p) {
    if (p.reservation || evicted.contains(p.uid)) return false;
    return reclaim ? p.ns != member.ns : p.priority < member.priority;
  });
}

}  // namespace

// Lower highest victim priority first, then fewer GPUs evicted.
bool QueueManager::Cheaper(const NodePlan& a, const NodePlan& b) {
  if (a.MaxPriority() != b.MaxPriority()) return a.MaxPriority() < b.MaxPriority();
  return a.Milli() < b.Milli();
}

std::optional<QueueManager::GangPlan> QueueManager::PlanGang(const PlanInputs& in,
                                                             const PodRequest& member,
                                                             int32_t missing,
                                                             const ClusterSnapshot& snapshot,
                                                             const policy::Framework& fw,
                                                             bool reclaim, int64_t quota_demand) {
  const int64_t demand = DemandMilli(member.gpu);
  const int64_t whole = quota_demand > 0 ? quota_demand : demand * missing;
  // The cluster as the earlier steps leave it: their victims gone (from the
  // nodes, the ledger and the candidates) and their members placed.
  QuotaLedger ledger = *in.ledger;
  absl::flat_hash_map<std::string, int64_t> gone = *in.evicted;
  const PlanInputs local{&ledger, in.options, &gone, in.usage};
  std::map<std::string, NodeInfo> changed;
  auto view = [&](const NodeInfo& n) -> const NodeInfo& {
    auto it = changed.find(n.name);
    return it == changed.end() ? n : it->second;
  };
  policy::PodContext ctx = fw.Prepare(member, snapshot);
  GangPlan plan;
  for (int32_t i = 0; i < missing; ++i) {
    // A node with room as is: the best score.
    const NodeInfo* roomy = nullptr;
    DeviceMask devices = 0;
    int64_t best_score = -1;
    for (const auto& ptr : snapshot.nodes()) {
      const NodeInfo& n = view(*ptr);
      if (!fw.Filter(ctx, n).fits()) continue;
      if (!ledger.CheckModels(member.ns, snapshot.product(n), demand).empty()) continue;
      auto placement = policy::ChoosePlacement(member.gpu, n);
      if (!placement.has_value()) continue;
      const int64_t score = fw.Score(ctx, n);
      if (score > best_score) {
        roomy = &n;
        devices = placement->devices;
        best_score = score;
      }
    }
    if (roomy != nullptr) {
      const std::string name = roomy->name;
      changed[name] = policy::WithPod(*roomy, member, devices);
      plan.steps.push_back({name, {}, ""});
      continue;
    }
    // Else the node whose plan evicts the fewest GPUs. Only the last step
    // must leave the gang's quota: the earlier steps' victims count too.
    NodePlanRules rules;
    rules.reclaim = reclaim;
    rules.quota_demand = whole;
    rules.borrow_demand = demand * missing;
    rules.check_quota = i + 1 == missing;
    std::optional<NodePlan> cheapest;
    const NodeInfo* where = nullptr;
    for (const auto& ptr : snapshot.nodes()) {
      const NodeInfo& n = view(*ptr);
      if (!AnyCandidate(n, member, reclaim, gone)) continue;
      if (fw.Filter(ctx, n).verdict == policy::Verdict::kUnresolvable) continue;
      auto p = PlanNode(local, member, n, snapshot, fw, rules);
      if (!p.has_value() || p->victims.empty()) continue;
      if (!cheapest.has_value() || Cheaper(*p, *cheapest)) {
        cheapest = std::move(p);
        where = &n;
      }
    }
    if (!cheapest.has_value()) return std::nullopt;
    const std::string name = where->name;
    NodeInfo after = policy::WithoutPods(*where, cheapest->VictimUids());
    auto placement = policy::ChoosePlacement(member.gpu, after);
    if (!placement.has_value()) return std::nullopt;
    changed[name] = policy::WithPod(after, member, placement->devices);
    for (const Victim& v : cheapest->gang_rest) {
      const NodeInfo* other = snapshot.Find(v.node);
      if (other != nullptr) changed[v.node] = policy::WithoutPods(view(*other), {v.uid});
    }
    for (const std::string& uid : cheapest->AllUids()) gone.emplace(uid, 0);
    for (const Victim& v : cheapest->victims) ledger.Add(v.ns, v.product, -v.milli);
    for (const Victim& v : cheapest->gang_rest) ledger.Add(v.ns, v.product, -v.milli);
    plan.steps.push_back({name, std::move(*cheapest), ""});
  }
  if (in.options->quotas.enabled && !ledger.Check(member.ns, whole).ok) return std::nullopt;
  return plan;
}

QueueManager::GangPlan* QueueManager::CurrentGangPlanLocked(const std::string& key) {
  auto it = gang_plans_.find(key);
  if (it == gang_plans_.end()) return nullptr;
  auto terminating = [&](const GangPlan& p) {
    for (const GangStep& s : p.steps) {
      for (const std::string& uid : s.plan.AllUids()) {
        auto v = deps_.state->FindPod(uid);
        if (v.has_value() && v->deleting) return true;
      }
    }
    return false;
  };
  const int64_t age = Now() - it->second.at_ms;
  if (age < options_.gang_plan_ms || (age < options_.stale_after_ms && terminating(it->second))) {
    return &it->second;
  }
  gang_plans_.erase(it);
  return nullptr;
}

PreemptionOutcome QueueManager::AnswerFromGangPlanLocked(GangPlan& plan, const PodRequest& pod,
                                                         const PreemptionArgs& args,
                                                         const ClusterSnapshot& snapshot) {
  PreemptionOutcome out;
  auto candidate = [&](const std::string& node) -> const PreemptionArgs::Candidate* {
    for (const auto& c : args.candidates) {
      if (c.node == node) return &c;
    }
    return nullptr;
  };
  GangStep* step = nullptr;
  for (GangStep& s : plan.steps) {
    if (s.member_uid == pod.uid) step = &s;
  }
  for (GangStep& s : plan.steps) {
    if (step != nullptr) break;
    const bool free = s.member_uid.empty() || !deps_.state->FindPod(s.member_uid).has_value();
    if (free && !s.plan.victims.empty() && candidate(s.node) != nullptr) {
      s.member_uid = pod.uid;
      step = &s;
    }
  }
  if (step == nullptr || step->plan.victims.empty()) return out;
  const PreemptionArgs::Candidate* c = candidate(step->node);
  const NodeInfo* node = snapshot.Find(step->node);
  if (c == nullptr || node == nullptr) return out;
  // Victims already gone leave the step; the rest are answered again.
  NodePlan left = step->plan;
  left.victims.erase(
      std::remove_if(left.victims.begin(), left.victims.end(),
                     [&](const Victim& v) { return !deps_.state->FindPod(v.uid).has_value(); }),
      left.victims.end());
  if (left.victims.empty()) return out;
  if (auto nv = AnswerNodeLocked(pod, *c, *node, left)) out.nodes.push_back(std::move(*nv));
  return out;
}

std::vector<std::pair<PodRequest, std::string>> QueueManager::GangFollowupEvictionsLocked() {
  std::vector<std::pair<PodRequest, std::string>> out;
  const int64_t now = Now();
  for (auto it = gang_followups_.begin(); it != gang_followups_.end();) {
    const GangFollowup& f = it->second;
    std::string lost;
    for (const std::string& uid : f.trigger) {
      auto p = deps_.state->FindPod(uid);
      if (!p.has_value() || p->deleting) lost = uid;
    }
    if (lost.empty() && now - f.at_ms <= options_.gang_followup_ms) {
      ++it;
      continue;
    }
    if (!lost.empty()) {
      const std::string reason =
          StrCat("gang ", it->first, " lost a member to preemption (uid ", lost,
                 "): its other members go too (a gang runs whole or not at all)");
      for (const std::string& uid : f.rest) {
        if (evicted_.contains(uid)) continue;
        if (auto pod = MarkEvictedLocked(uid)) out.emplace_back(std::move(*pod), reason);
      }
    }
    it = gang_followups_.erase(it);
  }
  return out;
}

}  // namespace gpusched::queue
