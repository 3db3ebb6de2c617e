// QueueManager: the preempt verb, reclaim and over-limit eviction. All three
// choose victims the same way (PlanNodeLocked): eligible pods grouped into
// units (a gang is a unit and is only eligible if all its members are on the
// node), ordered borrowed first, then lowest priority, then most recently
// started, and planned with policy::PlanVictims on a copy of the node.
#include <algorithm>
#include <iostream>

#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {
namespace {

struct Candidate {
  policy::VictimUnit unit;
  std::vector<const PodOnNode*> pods;
  bool borrowed = false;
  int32_t priority = 0;
  int64_t start = 0;
};

// Number of pods per namespace/gang in the snapshot.
std::map<std::string, int> GangSizes(const ClusterSnapshot& snapshot) {
  std::map<std::string, int> out;
  for (const auto& node : snapshot.nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (!p.gang.empty()) ++out[p.ns + "/" + p.gang];
    }
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::string>> QueueManager::PlanNodeLocked(
    const PodRequest& preemptor, const NodeInfo& node, const ClusterSnapshot& snapshot,
    const policy::Framework& fw, const std::vector<std::string>* allowed, bool reclaim,
    int64_t quota_demand) {
  const QuotaLedger& ledger = LedgerLocked(snapshot);
  const bool quotas = options_.quotas.enabled;
  const int64_t demand = DemandMilli(preemptor.gpu);
  const bool borrows =
      quotas && ledger.Usage(preemptor.ns) + demand > ledger.Guaranteed(preemptor.ns);
  const std::string& cohort = ledger.Quota(preemptor.ns).cohort;
  auto eligible = [&](const PodOnNode& p) {
    if (IsReservation(p.uid) || evicted_.contains(p.uid)) return false;
    const bool lower = p.priority < preemptor.priority;
    if (reclaim) {
      if (p.ns == preemptor.ns || cohort.empty() || ledger.Quota(p.ns).cohort != cohort)
        return false;
      if (ledger.Usage(p.ns) <= ledger.Guaranteed(p.ns)) return false;
      return lower || !options_.reclaim.only_lower_priority;
    }
    if (!lower) return false;
    if (p.ns != preemptor.ns && borrows && ledger.Usage(p.ns) <= ledger.Guaranteed(p.ns)) {
      return false;
    }
    return true;
  };
  auto listed = [&](const PodOnNode& p) {
    return allowed == nullptr ||
           std::find(allowed->begin(), allowed->end(), p.uid) != allowed->end();
  };
  std::map<std::string, int> gang_sizes = GangSizes(snapshot);
  std::vector<Candidate> cands;
  std::map<std::string, size_t> gang_index;
  for (const PodOnNode& p : node.pods) {
    if (p.gang.empty()) {
      if (listed(p) && eligible(p)) {
        cands.push_back({{{p.uid}}, {&p}, false, p.priority, p.start_unix});
      }
      continue;
    }
    const std::string key = p.ns + "/" + p.gang;
    auto [it, fresh] = gang_index.emplace(key, cands.size());
    if (fresh) cands.push_back({{{}}, {}, false, p.priority, p.start_unix});
    Candidate& c = cands[it->second];
    c.unit.uids.push_back(p.uid);
    c.pods.push_back(&p);
    c.priority = std::max(c.priority, p.priority);
    c.start = std::max(c.start, p.start_unix);
  }
  // A gang is a victim only whole: every member here, eligible, one listed.
  cands.erase(
      std::remove_if(cands.begin(), cands.end(),
                     [&](const Candidate& c) {
                       if (c.pods.front()->gang.empty()) return false;
                       const PodOnNode& f = *c.pods.front();
                       if (gang_sizes[f.ns + "/" + f.gang] != static_cast<int>(c.pods.size())) {
                         return true;
                       }
                       bool any_listed = false;
                       for (const PodOnNode* p : c.pods) {
                         if (!eligible(*p)) return true;
                         any_listed = any_listed || listed(*p);
                       }
                       return !any_listed;
                     }),
      cands.end());
  for (Candidate& c : cands) {
    c.borrowed = ledger.Usage(c.pods.front()->ns) > ledger.Guaranteed(c.pods.front()->ns);
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.borrowed != b.borrowed) return a.borrowed;
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.start > b.start;
  });
  std::vector<policy::VictimUnit> units;
  for (const Candidate& c : cands) units.push_back(c.unit);
  const std::string product = snapshot.product(node);
  auto accept = [&](const std::vector<int>& chosen) {
    if (!quotas) return true;
    QuotaLedger after = ledger;
    for (int i : chosen) {
      for (const PodOnNode* p : cands[i].pods) {
        // Never push another namespace below its guarantee to let a
        // borrower (or a reclaimer) in.
        if (p->ns != preemptor.ns && (borrows || reclaim) &&
            after.Usage(p->ns) <= after.Guaranteed(p->ns)) {
          return false;
        }
        after.Add(p->ns, product, -int64_t{p->gpus} * p->milli_per_gpu);
      }
    }
    return after.Check(preemptor.ns, quota_demand > 0 ? quota_demand : demand).ok &&
           after.CheckModels(preemptor.ns, product, demand).empty();
  };
  policy::PodContext ctx = fw.Prepare(preemptor, snapshot);
  auto plan = policy::PlanVictims(fw, ctx, node, units, accept);
  if (!plan.has_value()) return std::nullopt;
  std::vector<const Candidate*> chosen;
  for (int i : *plan) chosen.push_back(&cands[i]);
  std::stable_sort(chosen.begin(), chosen.end(), [](const Candidate* a, const Candidate* b) {
    return a->priority > b->priority;
  });
  std::vector<std::string> victims;
  for (const Candidate* c : chosen) {
    victims.insert(victims.end(), c->unit.uids.begin(), c->unit.uids.end());
  }
  return victims;
}

PreemptionOutcome QueueManager::Preempt(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                        const policy::Framework& fw) {
  PreemptionOutcome out;
  if (args.pod.preempt_never || args.pod.gpu.count == 0) return out;
  absl::MutexLock l(&mu_);
  // Evicting for a pod its queue holds back would free GPUs it still may not
  // take: not while an earlier unit could use the same nodes, and only
  // victims that leave quota for the earlier units as well.
  const Evaluation ev = EvaluateLocked(args.pod, snapshot, fw, /*all_checks=*/true);
  if (ev.behind_earlier) return out;
  std::map<std::string, NodeInfo> gang_room;  // nodes without lower-priority pods
  for (const PreemptionArgs::Candidate& c : args.candidates) {
    const NodeInfo* node = snapshot.Find(c.node);
    if (node == nullptr) continue;
    auto plan =
        PlanNodeLocked(args.pod, *node, snapshot, fw, &c.victim_uids, false, ev.quota_demand);
    if (!plan.has_value()) continue;
    // A gang member's preemption must be a step towards the whole gang
    // starting: with this node's victims gone, and every pod of lower
    // priority elsewhere (which the other members' preemptions may take),
    // all missing members must be placeable. kube-scheduler preempts for one
    // member at a time and keeps the freed node for it (nominatedNodeName).
    if (IsGang(args.pod) && !reservations_.contains(GangKey(args.pod.ns, args.pod.gang))) {
      if (gang_room.empty()) {
        for (const auto& other : snapshot.nodes()) {
          std::vector<std::string> lower;
          for (const PodOnNode& p : other->pods) {
            if (p.priority < args.pod.priority && !IsReservation(p.uid)) lower.push_back(p.uid);
          }
          if (!lower.empty()) gang_room[other->name] = policy::WithoutPods(*other, lower);
        }
      }
      std::map<std::string, NodeInfo> room = gang_room;
      room[node->name] = policy::WithoutPods(*node, *plan);
      const int32_t missing = args.pod.gang_size - HeldGangMembers(args.pod, snapshot);
      std::vector<std::pair<std::string, DeviceMask>> picks;
      if (PlaceGangLocked(args.pod, missing, snapshot, fw, room, &picks) < missing) continue;
    }
    PreemptionOutcome::NodeVictims nv{c.node, std::move(*plan), c.pdb_violations};
    // Victims kube-scheduler chose that hold no GPUs (its CPU/memory
    // choice) stay, unless we know them as not lower priority.
    for (const std::string& uid : c.victim_uids) {
      const bool gpu_pod = std::any_of(node->pods.begin(), node->pods.end(),
                                       [&](const PodOnNode& p) { return p.uid == uid; });
      if (gpu_pod) continue;
      auto known = deps_.state->FindPod(uid);
      if (known.has_value() && known->priority >= args.pod.priority) continue;
      nv.victim_uids.push_back(uid);
    }
    // An empty list is only returned for a placeholder candidate (sent
    // empty): the pod fits there as is.
    if (nv.victim_uids.empty() && !c.victim_uids.empty()) continue;
    out.nodes.push_back(std::move(nv));
  }
  if (!out.nodes.empty() && deps_.metrics != nullptr) {
    deps_.metrics->Inc("gpusched_preemptions_total",
                       "Preempt calls answered with at least one usable node.",
                       {{"namespace", args.pod.ns}});
  }
  return out;
}

bool QueueManager::EvictLocked(const std::string& uid, const std::string& reason,
                               const std::string& label) {
  auto pod = deps_.state->FindPod(uid);
  if (!pod.has_value() || deps_.writer == nullptr) return false;
  evicted_[uid] = Now();
  absl::Status s = deps_.writer->Evict(*pod, reason);
  std::cerr << "gpusched: " << label << ": evict " << pod->Key() << " on " << pod->node_name << ": "
            << reason << (s.ok() ? "" : StrCat(" (failed: ", FromAbsl(s.message()), ")")) << "\n";
  if (deps_.metrics != nullptr) {
    deps_.metrics->Inc("gpusched_evictions_total", "Evictions requested by gpusched.",
                       {{"reason", label}});
  }
  return s.ok();
}

int QueueManager::ReclaimLocked(const ClusterSnapshot& snapshot, const policy::Framework& fw) {
  int evictions = 0;
  const int64_t now = Now();
  std::vector<std::string> namespaces;
  for (const auto& [ns, q] : pending_) namespaces.push_back(ns);
  for (const std::string& ns : namespaces) {
    auto busy = reclaiming_.find(ns);
    if (busy != reclaiming_.end() && now - busy->second.at_ms < options_.reclaim_cooldown_ms &&
        std::any_of(
            busy->second.victims.begin(), busy->second.victims.end(),
            [&](const std::string& uid) { return deps_.state->FindPod(uid).has_value(); })) {
      continue;  // the last victims are still terminating
    }
    std::vector<Unit> units = UnitsLocked(ns, snapshot);
    const Unit* head = nullptr;
    for (const Unit& u : units) {
      if (now - std::max(u.head->last_filter_ms, u.head->first_seen_ms) > options_.stale_after_ms) {
        continue;
      }
      head = &u;
      break;
    }
    if (head == nullptr || IsGang(head->head->pod)) continue;
    const QuotaLedger& ledger = LedgerLocked(snapshot);
    if (ledger.Quota(ns).cohort.empty() ||
        ledger.Usage(ns) + head->demand > ledger.Guaranteed(ns)) {
      continue;  // only a namespace within its guarantee reclaims
    }
    const PodRequest& pod = head->head->pod;
    policy::PodContext ctx = fw.Prepare(pod, snapshot);
    bool fits = false;
    for (const auto& node : snapshot.nodes()) {
      if (policy::FitsWithDevices(fw, ctx, *node)) {
        fits = true;
        break;
      }
    }
    if (fits) continue;
    std::optional<std::vector<std::string>> best;
    for (const auto& node : snapshot.nodes()) {
      auto plan = PlanNodeLocked(pod, *node, snapshot, fw, nullptr, true);
      if (plan.has_value() && !plan->empty() && (!best || plan->size() < best->size())) {
        best = std::move(plan);
      }
    }
    if (!best.has_value()) continue;
    const std::string reason = StrCat("reclaim: namespace ", ns, " is below its guarantee and ",
                                      pod.Key(), " needs ", FormatGpus(head->demand), " GPUs");
    for (const std::string& uid : *best) evictions += EvictLocked(uid, reason, "reclaim") ? 1 : 0;
    reclaiming_[ns] = {now, *best, pod.uid, head->demand};
  }
  return evictions;
}

int QueueManager::EvictOverLimitLocked(const ClusterSnapshot& snapshot) {
  int evictions = 0;
  const QuotaLedger& ledger = LedgerLocked(snapshot);
  std::map<std::string, int64_t> over;
  for (const std::string& ns : ledger.Namespaces()) {
    if (ledger.Usage(ns) > ledger.Limit(ns)) over[ns] = ledger.Usage(ns) - ledger.Limit(ns);
  }
  if (over.empty()) return 0;
  std::vector<const PodOnNode*> pods;
  for (const auto& node : snapshot.nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (over.contains(p.ns) && !IsReservation(p.uid) && !evicted_.contains(p.uid)) {
        pods.push_back(&p);
      }
    }
  }
  std::stable_sort(pods.begin(), pods.end(), [](const PodOnNode* a, const PodOnNode* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    if (a->start_unix != b->start_unix) return a->start_unix > b->start_unix;
    return a->uid < b->uid;
  });
  for (const PodOnNode* p : pods) {
    int64_t& left = over[p->ns];
    if (left <= 0 || evicted_.contains(p->uid)) continue;
    // A gang goes whole.
    std::vector<const PodOnNode*> group = {p};
    if (!p->gang.empty()) {
      group.clear();
      for (const PodOnNode* q : pods) {
        if (q->ns == p->ns && q->gang == p->gang) group.push_back(q);
      }
    }
    const std::string reason = StrCat("namespace ", p->ns, " is above its lowered limit of ",
                                      FormatGpus(ledger.Limit(p->ns)), " GPUs");
    for (const PodOnNode* q : group) {
      left -= int64_t{q->gpus} * q->milli_per_gpu;
      evictions += EvictLocked(q->uid, reason, "over-limit") ? 1 : 0;
    }
  }
  return evictions;
}

}  // namespace gpusched::queue
