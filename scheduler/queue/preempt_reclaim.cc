// QueueManager: the preempt verb, reclaim and over-limit eviction. All three
// choose victims the same way (PlanNodeLocked): eligible pods grouped into
// units (a gang is a unit and is only eligible if all its members are on the
// node), ordered borrowed first, then lowest priority, then most recently
// started, and planned with policy::PlanVictims on a copy of the node.
// Reclaim is planned by the tick without the mutex (PlanReclaim reads only
// copies) and recorded under it only if still current.
#include <algorithm>
#include <bit>
#include <iostream>
#include <set>

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

}  // namespace

QueueManager::PlanInputs QueueManager::LivePlanInputsLocked() {
  return {&LedgerLocked(), &options_, &evicted_, &usage_};
}

std::optional<std::vector<std::string>> QueueManager::PlanNode(
    const PlanInputs& in, const PodRequest& preemptor, const NodeInfo& node,
    const ClusterSnapshot& snapshot, const policy::Framework& fw,
    const std::vector<std::string>* allowed, bool reclaim, int64_t quota_demand) {
  const QuotaLedger& ledger = *in.ledger;
  const QueueOptions& options = *in.options;
  const bool quotas = options.quotas.enabled;
  // Fills the ledger's cohort sums once: the copies `accept` makes per
  // victim set tried inherit them and keep them current.
  (void)ledger.Lendable(preemptor.ns);
  const int64_t demand = DemandMilli(preemptor.gpu);
  const bool borrows =
      quotas && ledger.Usage(preemptor.ns) + demand > ledger.Guaranteed(preemptor.ns);
  const std::string& cohort = ledger.Quota(preemptor.ns).cohort;
  auto eligible = [&](const PodOnNode& p) {
    if (IsReservation(p.uid) || in.evicted->contains(p.uid)) return false;
    const bool lower = p.priority < preemptor.priority;
    if (reclaim) {
      if (p.ns == preemptor.ns || cohort.empty() || ledger.Quota(p.ns).cohort != cohort)
        return false;
      if (ledger.Usage(p.ns) <= ledger.Guaranteed(p.ns)) return false;
      return lower || !options.reclaim.only_lower_priority;
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
                       if (in.usage->GangHeld(f.ns, f.gang) != static_cast<int>(c.pods.size())) {
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
  TimedLock l(&mu_, &lock_stats_, deps_.metrics);
  SyncLocked(deps_.state->Snapshot());
  // The source's pod when it waits in a queue; a pod not shown yet gets an
  // answer for what the request says (kube-scheduler evicts, not we).
  const Entry* entry = FindEntryLocked(args.pod.uid);
  const PodRequest& pod = entry != nullptr ? entry->pod : args.pod;
  if (pod.preempt_never || pod.gpu.count == 0) return out;
  // Evicting for a pod its queue holds back would free GPUs it still may not
  // take: not while an earlier unit could use the same nodes, and only
  // victims that leave quota for the earlier units as well.
  const Evaluation ev = EvaluateLocked(pod, snapshot, fw, /*all_checks=*/true);
  if (ev.behind_earlier) return out;
  // After EvaluateLocked: it may build the ledger these point into.
  const PlanInputs live = LivePlanInputsLocked();
  std::map<std::string, NodeInfo> gang_room;  // nodes without lower-priority pods
  for (const PreemptionArgs::Candidate& c : args.candidates) {
    const NodeInfo* node = snapshot.Find(c.node);
    if (node == nullptr) continue;
    auto plan = PlanNode(live, pod, *node, snapshot, fw, &c.victim_uids, false, ev.quota_demand);
    if (!plan.has_value()) continue;
    // A gang member's preemption must be a step towards the whole gang
    // starting: with this node's victims gone, and every pod of lower
    // priority elsewhere (which the other members' preemptions may take),
    // all missing members must be placeable. kube-scheduler preempts for one
    // member at a time and keeps the freed node for it (nominatedNodeName).
    if (IsGang(pod) && !reservations_.contains(GangKey(pod.ns, pod.gang))) {
      if (gang_room.empty()) {
        for (const auto& other : snapshot.nodes()) {
          std::vector<std::string> lower;
          for (const PodOnNode& p : other->pods) {
            if (p.priority < pod.priority && !IsReservation(p.uid)) lower.push_back(p.uid);
          }
          if (!lower.empty()) gang_room[other->name] = policy::WithoutPods(*other, lower);
        }
      }
      std::map<std::string, NodeInfo> room = gang_room;
      room[node->name] = policy::WithoutPods(*node, *plan);
      const int32_t missing = pod.gang_size - HeldGangMembersLocked(pod);
      std::vector<std::pair<std::string, DeviceMask>> picks;
      if (PlaceGangLocked(pod, missing, snapshot, fw, room, &picks) < missing) continue;
    }
    PreemptionOutcome::NodeVictims nv{c.node, std::move(*plan), c.pdb_violations};
    // Victims kube-scheduler chose that hold no GPUs (its CPU/memory
    // choice) stay, unless we know them as not lower priority.
    for (const std::string& uid : c.victim_uids) {
      const bool gpu_pod = std::any_of(node->pods.begin(), node->pods.end(),
                                       [&](const PodOnNode& p) { return p.uid == uid; });
      if (gpu_pod) continue;
      auto known = deps_.state->FindPod(uid);
      if (known.has_value() && known->priority >= pod.priority) continue;
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
                       {{"namespace", pod.ns}});
  }
  return out;
}

std::optional<PodRequest> QueueManager::MarkEvictedLocked(const std::string& uid) {
  auto pod = deps_.state->FindPod(uid);
  if (!pod.has_value() || deps_.writer == nullptr) return std::nullopt;
  evicted_[uid] = Now();
  return pod;
}

int QueueManager::SendEvictions(const std::vector<std::pair<PodRequest, std::string>>& evictions,
                                const std::string& label) {
  int sent = 0;
  for (const auto& [pod, reason] : evictions) {
    absl::Status s = deps_.writer->Evict(pod, reason);
    Log(StrCat("gpusched: ", label, ": evict ", pod.Key(), " on ", pod.node_name, ": ", reason,
               s.ok() ? "" : StrCat(" (failed: ", FromAbsl(s.message()), ")")));
    if (deps_.metrics != nullptr) {
      deps_.metrics->Inc("gpusched_evictions_total", "Evictions requested by gpusched.",
                         {{"reason", label}});
    }
    sent += s.ok() ? 1 : 0;
  }
  return sent;
}

std::vector<QueueManager::ReclaimJob> QueueManager::ReclaimJobsLocked(
    const ClusterSnapshot& snapshot) {
  std::vector<ReclaimJob> jobs;
  const int64_t now = Now();
  const QuotaLedger& ledger = LedgerLocked();
  // Cohorts with a member above its guarantee: only their pods can be
  // reclaimed, so a namespace of any other cohort has nothing to plan.
  std::set<std::string> lending;
  for (const std::string& ns : ledger.Namespaces()) {
    if (ledger.Usage(ns) > ledger.Guaranteed(ns) && !ledger.Quota(ns).cohort.empty()) {
      lending.insert(ledger.Quota(ns).cohort);
    }
  }
  // Round-robin from the cursor, at most reclaim_plans_per_tick namespaces.
  std::vector<const std::pair<const std::string, Order>*> turn;
  for (auto it = order_.lower_bound(reclaim_cursor_); it != order_.end(); ++it)
    turn.push_back(&*it);
  for (auto it = order_.begin(); it != order_.end() && it->first < reclaim_cursor_; ++it) {
    turn.push_back(&*it);
  }
  reclaim_cursor_.clear();
  for (const auto* entry : turn) {
    const std::string& ns = entry->first;
    const Order& order = entry->second;
    if (static_cast<int32_t>(jobs.size()) >= options_.reclaim_plans_per_tick) {
      reclaim_cursor_ = ns;  // the next tick starts here
      break;
    }
    auto busy = reclaiming_.find(ns);
    if (busy != reclaiming_.end() && now - busy->second.at_ms < options_.reclaim_cooldown_ms &&
        std::any_of(
            busy->second.victims.begin(), busy->second.victims.end(),
            [&](const std::string& uid) { return deps_.state->FindPod(uid).has_value(); })) {
      continue;  // the last victims are still terminating
    }
    // The head: the first unit filtered (or seen) within stale_after_ms.
    // A gang is one unit, seen at its first member.
    const Entry* head = nullptr;
    absl::flat_hash_set<std::string> gangs;
    for (const Entry* e : order) {
      if (IsGang(e->pod) && !gangs.insert(e->pod.gang).second) continue;
      if (now - std::max(e->last_filter_ms, e->first_seen_ms) > options_.stale_after_ms) continue;
      head = e;
      break;
    }
    if (head == nullptr || IsGang(head->pod) || head->pod.gang_size == kGangSizeUnknown) continue;
    const std::string& cohort = ledger.Quota(ns).cohort;
    const int64_t demand = DemandMilli(head->pod.gpu);
    if (cohort.empty() || ledger.Usage(ns) + demand > ledger.Guaranteed(ns)) {
      continue;  // only a namespace within its guarantee reclaims
    }
    if (!lending.contains(cohort)) continue;  // no borrower to reclaim from
    jobs.push_back({ns, head->pod, demand, {}});
  }
  (void)snapshot;
  return jobs;
}

void QueueManager::PlanReclaim(const PlanInputs& in, const ClusterSnapshot& snapshot,
                               const policy::Framework& fw, ReclaimJob* job) {
  policy::PodContext ctx = fw.Prepare(job->pod, snapshot);
  policy::FilterMemo memo(fw, ctx);
  const auto& nodes = snapshot.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (memo.Filter(snapshot.hot(static_cast<int32_t>(i))).fits() &&
        policy::FitsWithDevices(fw, ctx, *nodes[i])) {
      return;  // it fits somewhere as is: nothing to reclaim
    }
  }
  const QuotaLedger& ledger = *in.ledger;
  const std::string& cohort = ledger.Quota(job->pod.ns).cohort;
  // The cohort's borrowers: only their pods can be reclaimed.
  absl::flat_hash_set<std::string> borrowers;
  for (const std::string& o : ledger.Namespaces()) {
    if (o != job->pod.ns && ledger.Quota(o).cohort == cohort &&
        ledger.Usage(o) > ledger.Guaranteed(o)) {
      borrowers.insert(o);
    }
  }
  const bool lower_only = in.options->reclaim.only_lower_priority;
  auto reclaimable = [&](const PodOnNode& p) {
    return borrowers.contains(p.ns) && !IsReservation(p.uid) && !in.evicted->contains(p.uid) &&
           (!lower_only || p.priority < job->pod.priority);
  };
  // Per node, whether planning can help: its verdict is not unresolvable, it
  // has a reclaimable pod, and its free devices plus every reclaimable
  // pod's are enough for a whole-GPU pod. Also the fewest victims any plan
  // can have: a victim frees at most `most` devices, a node has at most
  // `most_free` free, so a plan of that size is the cheapest there is.
  const int32_t count = job->pod.gpu.shared() ? 1 : job->pod.gpu.count;
  std::vector<uint8_t> worth(nodes.size(), 0);
  int32_t most = 1, most_free = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& node = *nodes[i];
    if (memo.Filter(snapshot.hot(static_cast<int32_t>(i))).verdict ==
        policy::Verdict::kUnresolvable) {
      continue;  // no eviction makes this node fit
    }
    const int32_t free = std::popcount(node.whole_free & node.healthy);
    int32_t could_free = free;
    bool any = false;
    for (const PodOnNode& p : node.pods) {
      if (!reclaimable(p)) continue;
      any = true;
      could_free += std::popcount(p.devices);
      most = std::max(most, std::popcount(p.devices));
    }
    if (!any || (!job->pod.gpu.shared() && could_free < count)) continue;
    worth[i] = 1;
    most_free = std::max(most_free, free);
  }
  const size_t fewest =
      static_cast<size_t>(std::max(1, (count - most_free + most - 1) / std::max(1, most)));
  std::optional<std::vector<std::string>> best;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!worth[i]) continue;
    auto plan = PlanNode(in, job->pod, *nodes[i], snapshot, fw, nullptr, true);
    if (plan.has_value() && !plan->empty() && (!best || plan->size() < best->size())) {
      best = std::move(plan);
      if (best->size() <= fewest) break;  // no later node can need fewer
    }
  }
  if (best.has_value()) job->victims = std::move(*best);
}

std::vector<std::pair<PodRequest, std::string>> QueueManager::CommitReclaimsLocked(
    const std::vector<ReclaimJob>& jobs, uint64_t planned_generation) {
  std::vector<std::pair<PodRequest, std::string>> out;
  const int64_t now = Now();
  for (const ReclaimJob& job : jobs) {
    if (job.victims.empty()) continue;
    // Still current: nothing changed since the plan, or the pod still
    // heads its queue and every victim is still there and not evicted.
    const Entry* e = FindEntryLocked(job.pod.uid);
    if (e == nullptr) continue;
    if (deps_.state->Snapshot()->generation() != planned_generation) {
      auto q = order_.find(job.ns);
      if (q == order_.end() || *q->second.begin() != e) continue;
      if (std::any_of(job.victims.begin(), job.victims.end(), [&](const std::string& uid) {
            return evicted_.contains(uid) || !deps_.state->FindPod(uid).has_value();
          })) {
        continue;
      }
    }
    const std::string reason = StrCat("reclaim: namespace ", job.ns, " is below its guarantee and ",
                                      job.pod.Key(), " needs ", FormatGpus(job.demand), " GPUs");
    for (const std::string& uid : job.victims) {
      if (auto pod = MarkEvictedLocked(uid)) out.emplace_back(std::move(*pod), reason);
    }
    reclaiming_[job.ns] = {now, job.victims, job.pod.uid, job.demand};
  }
  return out;
}

std::vector<std::pair<PodRequest, std::string>> QueueManager::OverLimitEvictionsLocked(
    const ClusterSnapshot& snapshot) {
  std::vector<std::pair<PodRequest, std::string>> out;
  const QuotaLedger& ledger = LedgerLocked();
  std::map<std::string, int64_t> over;
  for (const std::string& ns : ledger.Namespaces()) {
    if (ledger.Usage(ns) > ledger.Limit(ns)) over[ns] = ledger.Usage(ns) - ledger.Limit(ns);
  }
  if (over.empty()) return out;
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
      if (auto pod = MarkEvictedLocked(q->uid)) out.emplace_back(std::move(*pod), reason);
    }
  }
  return out;
}

}  // namespace gpusched::queue
