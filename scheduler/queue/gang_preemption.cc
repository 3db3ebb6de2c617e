// QueueManager: whole-gang preemption. A gang preempts as one decision: one
// plan places every missing member (on a node with room as is, else on the
// node needing the fewest GPUs evicted), the victims together leave quota for
// the whole gang, and each member's preempt call answers from that plan with
// the node of its own step. A victim gang is taken whole: its members on the
// node answered for are evicted by kube-scheduler, and gpusched evicts the
// others once one of those is going (GangFollowupEvictionsLocked).
#include <algorithm>
#include <bit>
#include <limits>
#include <tuple>

#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/room_finder.h"

namespace gpusched::queue {
namespace {

// What planning on one node can at best achieve, from a cheap look at its
// pods: the devices it could offer (free plus every possible victim's), the
// lowest priority a victim there can have and the fewest milli-GPUs any
// plan there evicts. Plans cost at least this (NodePlan ordering), so nodes
// are planned in this order and the search stops once a plan found is no
// worse than the next node's bound.
struct NodeBound {
  size_t index = 0;
  int32_t could_free = 0;  // 0: no pod there could be a victim
  int32_t min_priority = std::numeric_limits<int32_t>::max();
  int64_t min_milli = 0;
};

NodeBound Bound(size_t index, const NodeInfo& node, const PodRequest& member, bool reclaim,
                const absl::flat_hash_map<std::string, int64_t>& evicted,
                const absl::flat_hash_set<std::string>* only) {
  NodeBound b;
  b.index = index;
  bool any = false;
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (const PodOnNode& p : node.pods) {
    if (p.reservation || evicted.contains(p.uid)) continue;
    if (only != nullptr ? !only->contains(p.uid)
                        : (reclaim ? p.ns == member.ns : p.priority >= member.priority)) {
      continue;
    }
    any = true;
    b.could_free += std::popcount(p.devices);
    b.min_priority = std::min(b.min_priority, p.priority);
    smallest = std::min(smallest, int64_t{p.gpus} * p.milli_per_gpu);
  }
  if (!any) return {index, 0, 0, 0};
  const int32_t free = std::popcount(node.whole_free & node.healthy);
  b.could_free += free;
  const int32_t count = member.gpu.shared() ? 1 : member.gpu.count;
  b.min_milli = std::max<int64_t>(smallest, int64_t{std::max(0, count - free)} * 1000);
  return b;
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
  const PlanInputs local{&ledger, in.options, &gone, in.usage, in.only, in.cohort_loan, in.yield};
  std::map<std::string, NodeInfo> changed;
  auto view = [&](const NodeInfo& n) -> const NodeInfo& {
    auto it = changed.find(n.name);
    return it == changed.end() ? n : it->second;
  };
  policy::PodContext ctx = fw.Prepare(member, snapshot);
  // Nodes no earlier step changed are read through the memo (one filter per
  // distinct node state, as the filter verb does).
  policy::FilterMemo memo(fw, ctx);
  const auto& nodes = snapshot.nodes();
  auto filter = [&](size_t i) -> policy::FilterResult {
    auto it = changed.find(nodes[i]->name);
    return it == changed.end() ? memo.Filter(snapshot.hot(static_cast<int32_t>(i)))
                               : fw.Filter(ctx, it->second);
  };
  const int32_t count = member.gpu.shared() ? 1 : member.gpu.count;
  GangPlan plan;
  for (int32_t i = 0; i < missing; ++i) {
    // A node with room as is: the best score.
    const Room room = FindRoomByScan(
        member, ctx, snapshot, fw, ledger,
        [&](size_t k) -> const NodeInfo& { return view(*nodes[k]); },
        [&](size_t k) {
          in.Pace();
          return filter(k).fits();
        });
    if (room.found()) {
      const std::string name = nodes[room.index]->name;
      changed[name] = policy::WithPod(view(*nodes[room.index]), member, room.devices);
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
    std::vector<NodeBound> bounds;
    for (size_t k = 0; k < nodes.size(); ++k) {
      in.Pace();
      NodeBound b = Bound(k, view(*nodes[k]), member, reclaim, gone, in.only);
      if (b.could_free == 0 || (!member.gpu.shared() && b.could_free < count)) continue;
      bounds.push_back(b);
    }
    std::stable_sort(bounds.begin(), bounds.end(), [](const NodeBound& a, const NodeBound& b) {
      return std::tie(a.min_priority, a.min_milli) < std::tie(b.min_priority, b.min_milli);
    });
    std::optional<NodePlan> cheapest;
    const NodeInfo* where = nullptr;
    for (const NodeBound& b : bounds) {
      in.Pace();
      if (cheapest.has_value() && std::make_tuple(cheapest->MaxPriority(), cheapest->Milli()) <=
                                      std::make_tuple(b.min_priority, b.min_milli)) {
        break;  // no node left can have a cheaper plan
      }
      const size_t k = b.index;
      const NodeInfo& n = view(*nodes[k]);
      if (filter(k).verdict == policy::Verdict::kUnresolvable) continue;
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
        auto going = deps_.state->FindPod(uid);
        if (!going.has_value() || going->deleting) continue;  // the member lost, or going
        if (auto pod = MarkEvictedLocked(uid)) out.emplace_back(std::move(*pod), reason);
      }
    }
    it = gang_followups_.erase(it);
  }
  return out;
}

}  // namespace gpusched::queue
