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
#include "scheduler/queue/domain_placement.h"
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
                const DemotedWorkloads* only) {
  NodeBound b;
  b.index = index;
  bool any = false;
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (const PodOnNode& p : node.pods) {
    if (p.reservation || evicted.contains(p.uid)) continue;
    if (only != nullptr ? !only->Contains(p)
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

// One PlanGang call: the cluster as the earlier steps leave it (their
// victims gone from the nodes, the ledger and the candidates, their members
// placed), and the two ways to place the next member.
class QueueManager::GangSearch {
 public:
  GangSearch(const PlanInputs& in, const PodRequest& member, const ClusterSnapshot& snapshot,
             const policy::Framework& fw, const NodeSubset* nodes)
      : nodes_(nodes),
        in_(in),
        member_(member),
        snapshot_(snapshot),
        fw_(fw),
        ledger_(*in.ledger),
        gone_(*in.evicted),
        local_{&ledger_, in.options,     &gone_,    in.gangs,
               in.only,  in.cohort_loan, in.floors, in.yield},
        ctx_(fw.Prepare(member, snapshot)),
        memo_(fw, ctx_) {}

  // On a node with room as is: the best score. False if there is none.
  bool PlaceAsIs(GangPlan* plan) {
    const auto& nodes = snapshot_.nodes();
    const Room room = FindRoomByScan(
        member_, ctx_, snapshot_, fw_, ledger_,
        [&](size_t k) -> const NodeInfo& { return View(*nodes[k]); },
        [&](size_t k) {
          in_.Pace();
          return Filter(k).fits();
        },
        nodes_);
    if (!room.found()) return false;
    const std::string name = nodes[room.index]->name;
    changed_[name] = policy::WithPod(View(*nodes[room.index]), member_, room.devices);
    plan->steps.push_back({name, {}, ""});
    return true;
  }

  // On the node whose plan costs least (lowest highest victim priority,
  // then fewest GPUs), its victims gone. False if no node has a plan.
  bool PlaceWithVictims(const NodePlanRules& rules, GangPlan* plan) {
    const NodeInfo* where = nullptr;
    std::optional<NodePlan> cheapest = Cheapest(rules, &where);
    if (!cheapest.has_value()) return false;
    const std::string name = where->name;
    NodeInfo after = policy::WithoutPods(*where, cheapest->VictimUids());
    auto placement = policy::ChoosePlacement(member_.gpu, after);
    if (!placement.has_value()) return false;
    changed_[name] = policy::WithPod(after, member_, placement->devices);
    for (const Victim& v : cheapest->gang_rest) {
      const NodeInfo* other = snapshot_.Find(v.node);
      if (other != nullptr) changed_[v.node] = policy::WithoutPods(View(*other), {v.uid});
    }
    for (const std::string& uid : cheapest->AllUids()) gone_.emplace(uid, 0);
    for (const Victim& v : cheapest->victims) ledger_.Add(v.ns, v.product, -v.milli);
    for (const Victim& v : cheapest->gang_rest) ledger_.Add(v.ns, v.product, -v.milli);
    plan->steps.push_back({name, std::move(*cheapest), ""});
    return true;
  }

  const QuotaLedger& ledger() const { return ledger_; }

 private:
  const NodeInfo& View(const NodeInfo& n) const {
    auto it = changed_.find(n.name);
    return it == changed_.end() ? n : it->second;
  }

  // Nodes no earlier step changed are read through the memo (one filter per
  // distinct node state, as the filter verb does).
  policy::FilterResult Filter(size_t i) {
    const auto& nodes = snapshot_.nodes();
    auto it = changed_.find(nodes[i]->name);
    return it == changed_.end() ? memo_.Filter(snapshot_.hot(static_cast<int32_t>(i)))
                                : fw_.Filter(ctx_, it->second);
  }

  std::optional<NodePlan> Cheapest(const NodePlanRules& rules, const NodeInfo** where) {
    const auto& nodes = snapshot_.nodes();
    const int32_t count = member_.gpu.shared() ? 1 : member_.gpu.count;
    std::vector<NodeBound> bounds;
    const size_t visit = nodes_ != nullptr ? nodes_->size() : nodes.size();
    for (size_t i = 0; i < visit; ++i) {
      const size_t k = nodes_ != nullptr ? static_cast<size_t>((*nodes_)[i]) : i;
      in_.Pace();
      NodeBound b = Bound(k, View(*nodes[k]), member_, rules.reclaim, gone_, in_.only);
      if (b.could_free == 0 || (!member_.gpu.shared() && b.could_free < count)) continue;
      bounds.push_back(b);
    }
    std::stable_sort(bounds.begin(), bounds.end(), [](const NodeBound& a, const NodeBound& b) {
      return std::tie(a.min_priority, a.min_milli) < std::tie(b.min_priority, b.min_milli);
    });
    std::optional<NodePlan> cheapest;
    for (const NodeBound& b : bounds) {
      in_.Pace();
      if (cheapest.has_value() && std::make_tuple(cheapest->MaxPriority(), cheapest->Milli()) <=
                                      std::make_tuple(b.min_priority, b.min_milli)) {
        break;  // no node left can have a cheaper plan
      }
      const NodeInfo& n = View(*nodes[b.index]);
      if (Filter(b.index).verdict == policy::Verdict::kUnresolvable) continue;
      auto p = PlanNode(local_, member_, n, snapshot_, fw_, rules);
      if (!p.has_value() || p->victims.empty()) continue;
      if (!cheapest.has_value() || Cheaper(*p, *cheapest)) {
        cheapest = std::move(p);
        *where = &n;
      }
    }
    return cheapest;
  }

  const NodeSubset* nodes_;  // null: every node
  const PlanInputs& in_;
  const PodRequest& member_;
  const ClusterSnapshot& snapshot_;
  const policy::Framework& fw_;
  QuotaLedger ledger_;
  absl::flat_hash_map<std::string, int64_t> gone_;
  const PlanInputs local_;
  policy::PodContext ctx_;
  policy::FilterMemo memo_;
  std::map<std::string, NodeInfo> changed_;
};

std::optional<QueueManager::GangPlan> QueueManager::PlanGang(const PlanInputs& in,
                                                             const PodRequest& member,
                                                             int32_t missing,
                                                             const ClusterSnapshot& snapshot,
                                                             const policy::Framework& fw,
                                                             bool reclaim, int64_t quota_demand) {
  const ResolvedTopology topology = ResolveTopology(member, in.options->gang.topology_levels);
  if (!topology.error.empty()) return std::nullopt;  // never partly: the gang waits
  if (topology.rule == TopologyRule::kNone) {
    return PlanGangOn(in, member, missing, snapshot, fw, reclaim, quota_demand, nullptr);
  }
  const bool required = topology.rule == TopologyRule::kRequired;
  // A preferred gang climbs as its placement does (domain_placement.h): its
  // own level, then each larger one; the first level with a plan wins.
  std::vector<std::string> levels = {topology.level};
  if (!required) levels.insert(levels.end(), topology.climb.begin(), topology.climb.end());
  const NodeRooms per_node = RoomPerNode(snapshot, fw, member, 0);  // GPUs only
  for (const std::string& level : levels) {
    const std::shared_ptr<const TopologyDomains> domains = CachedDomainsAt(snapshot, level);
    const std::vector<int32_t> held = HeldDomains(snapshot, member, *domains, missing);
    if (held.size() > 1 || (held.size() == 1 && held[0] < 0)) {
      if (required) return std::nullopt;
      continue;  // its running members already span this level's domains
    }
    std::optional<GangPlan> best = PlanInOneDomain(in, member, missing, snapshot, fw, reclaim,
                                                   quota_demand, *domains, per_node, held);
    if (best.has_value()) {
      best->where = StrCat("the victims free one ", level, " (", best->where, ") for all ", missing,
                           " members");
      if (level != topology.level) {
        StrAppend(&best->where, "; no single ", topology.level, " could be freed for them");
      }
      return best;
    }
    if (required) return std::nullopt;
  }
  // Preferred, and no domain of any level tried can be freed for the gang:
  // the members go where victims cost least, as without topology.
  auto plan = PlanGangOn(in, member, missing, snapshot, fw, reclaim, quota_demand, nullptr);
  if (plan.has_value()) {
    plan->where = StrCat("no single ", levels.back(), " could be freed for all ", missing,
                         " members: they go where victims cost least");
  }
  return plan;
}

std::optional<QueueManager::GangPlan> QueueManager::PlanInOneDomain(
    const PlanInputs& in, const PodRequest& member, int32_t missing,
    const ClusterSnapshot& snapshot, const policy::Framework& fw, bool reclaim,
    int64_t quota_demand, const TopologyDomains& domains, const NodeRooms& per_node,
    const std::vector<int32_t>& held) {
  // Every domain whose GPUs could hold the gang, best fit first.
  const std::vector<DomainRoom> rooms = RoomIn(per_node, domains, 0);
  const int64_t need = int64_t{member.gpu.shared() ? 1 : member.gpu.count} * missing;
  std::vector<int32_t> order;
  for (const DomainRoom& r : rooms) {
    if (r.healthy_gpus >= need && (held.empty() || held[0] == r.domain)) order.push_back(r.domain);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (rooms[a].free_gpus != rooms[b].free_gpus) return rooms[a].free_gpus < rooms[b].free_gpus;
    return domains.names[a] < domains.names[b];
  });
  // A plan's cost, compared like NodePlans (Cheaper): the highest victim
  // priority over its steps, then the GPUs it evicts.
  auto cost = [](const GangPlan& p) {
    std::pair<int32_t, int64_t> c{std::numeric_limits<int32_t>::min(), 0};
    for (const GangStep& s : p.steps) {
      c.first = std::max(c.first, s.plan.MaxPriority());
      c.second += s.plan.Milli();
    }
    return c;
  };
  std::optional<GangPlan> best;
  for (int32_t d : order) {
    auto plan =
        PlanGangOn(in, member, missing, snapshot, fw, reclaim, quota_demand, &domains.nodes[d]);
    if (plan.has_value() && (!best.has_value() || cost(*plan) < cost(*best))) {
      best = std::move(plan);
      best->where = domains.names[d];
    }
  }
  return best;
}

std::optional<QueueManager::GangPlan> QueueManager::PlanGangOn(
    const PlanInputs& in, const PodRequest& member, int32_t missing,
    const ClusterSnapshot& snapshot, const policy::Framework& fw, bool reclaim,
    int64_t quota_demand, const std::vector<int32_t>* only) {
  const int64_t demand = DemandMilli(member.gpu);
  const int64_t whole = quota_demand > 0 ? quota_demand : demand * missing;
  GangSearch search(in, member, snapshot, fw, only);
  GangPlan plan;
  for (int32_t i = 0; i < missing; ++i) {
    if (search.PlaceAsIs(&plan)) continue;
    // Else the node whose plan evicts the fewest GPUs. Only the last step
    // must leave the gang's quota: the earlier steps' victims count too.
    NodePlanRules rules;
    rules.reclaim = reclaim;
    rules.quota_demand = whole;
    rules.borrow_demand = demand * missing;
    rules.check_quota = i + 1 == missing;
    if (!search.PlaceWithVictims(rules, &plan)) return std::nullopt;
  }
  if (in.options->quotas.enabled && !search.ledger().Check(member.ns, whole).ok) {
    return std::nullopt;
  }
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
