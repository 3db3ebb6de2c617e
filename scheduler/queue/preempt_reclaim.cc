// QueueManager: the preempt verb, reclaim and over-limit eviction. All three
// choose victims the same way (PlanNode): eligible pods grouped into units (a
// gang is one unit, taken whole: its members on other nodes go with it),
// ordered borrowed first, then lowest priority, then fewest GPUs lost on
// other nodes, then most recently started, and planned with
// policy::PlanVictims on a copy of the node. A gang preemptor or reclaimer
// plans all its members at once (gang_preemption.cc).
// Reclaim is planned by the tick without the mutex (PlanReclaim reads only
// copies) and recorded under it only if still current.
#include <algorithm>
#include <bit>
#include <chrono>
#include <iostream>
#include <limits>
#include <set>

#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"

namespace gpusched::queue {

// The namespaces above their guarantee (only their pods can be reclaimed)
// and how many of them each cohort has ("" : none), made once per hold of
// the reclaim choice so that each namespace's check is O(1), not a walk
// over the borrowers.
struct Borrowers {
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_map<std::string, size_t> per_cohort;
};

namespace {

struct Candidate {
  policy::VictimUnit unit;
  std::vector<const PodOnNode*> pods;  // on the node planned
  std::vector<Victim> rest;            // a gang's members on other nodes
  bool borrowed = false;
  int32_t priority = 0;
  int64_t start = 0;
  int64_t rest_milli = 0;
};

int64_t Milli(const PodOnNode& p) { return int64_t{p.gpus} * p.milli_per_gpu; }

// Why the head of `ns` (needing `demand` more) may reclaim, given the
// namespaces above their guarantee:
//  - kGuarantee: it stays within its guarantee; any other borrower may go;
//  - kCohortLoan: it borrows no more than its cohort lends (the idle
//    guarantee of the cohort's other members) and within its limit, while
//    namespaces outside the cohort borrow: those may go.
enum class ReclaimKind { kNone, kGuarantee, kCohortLoan };

Borrowers BorrowersOf(const QuotaLedger& ledger) {
  Borrowers b;
  ledger.ForEachBorrower([&b, &ledger](const std::string& ns) {
    if (b.names.insert(ns).second) ++b.per_cohort[ledger.Quota(ns).cohort];
  });
  return b;
}

ReclaimKind ReclaimKindOf(const QuotaLedger& ledger, const std::string& ns, int64_t demand,
                          const Borrowers& borrowers) {
  const int64_t after = ledger.Usage(ns) + demand;
  const std::string& cohort = ledger.Quota(ns).cohort;
  const size_t self = borrowers.names.contains(ns) ? 1 : 0;
  const size_t others = borrowers.names.size() - self;  // borrowers but ns
  if (others == 0) return ReclaimKind::kNone;
  // Other borrowers outside ns's cohort (any, when it has none).
  auto same = borrowers.per_cohort.find(cohort);
  const size_t inside = same == borrowers.per_cohort.end() ? 0 : same->second - self;
  const bool outside = cohort.empty() || others > inside;
  if (after <= ledger.Guaranteed(ns)) return ReclaimKind::kGuarantee;
  if (cohort.empty() || !outside || after > ledger.Limit(ns)) return ReclaimKind::kNone;
  return after - ledger.Guaranteed(ns) <= ledger.CohortLendable(ns) ? ReclaimKind::kCohortLoan
                                                                    : ReclaimKind::kNone;
}

}  // namespace

std::vector<std::string> QueueManager::NodePlan::VictimUids() const {
  std::vector<std::string> out;
  for (const Victim& v : victims) out.push_back(v.uid);
  return out;
}

std::vector<std::string> QueueManager::NodePlan::AllUids() const {
  std::vector<std::string> out = VictimUids();
  for (const Victim& v : gang_rest) out.push_back(v.uid);
  return out;
}

int32_t QueueManager::NodePlan::MaxPriority() const {
  int32_t top = std::numeric_limits<int32_t>::min();
  for (const Victim& v : victims) top = std::max(top, v.priority);
  for (const Victim& v : gang_rest) top = std::max(top, v.priority);
  return top;
}

int64_t QueueManager::NodePlan::Milli() const {
  int64_t sum = 0;
  for (const Victim& v : victims) sum += v.milli;
  for (const Victim& v : gang_rest) sum += v.milli;
  return sum;
}

// One PlanNode call: the victim candidates on one node, in the order they
// are offered, and the quota check of a victim set.
class QueueManager::NodeSearch {
 public:
  NodeSearch(const PlanInputs& in, const PodRequest& preemptor, const NodeInfo& node,
             const ClusterSnapshot& snapshot, const NodePlanRules& rules)
      : in_(in),
        ledger_(*in.ledger),
        preemptor_(preemptor),
        node_(node),
        snapshot_(snapshot),
        rules_(rules),
        quotas_(in.options->quotas.enabled),
        demand_(DemandMilli(preemptor.gpu)),
        cohort_(ledger_.Quota(preemptor.ns).cohort),
        product_(snapshot.product(node)) {
    // Fills the ledger's cohort sums once: the copies Accept makes per
    // victim set tried inherit them and keep them current.
    (void)ledger_.Lendable(preemptor.ns);
    const int64_t adds = rules.borrow_demand > 0 ? rules.borrow_demand : demand_;
    borrows_ = quotas_ && ledger_.Usage(preemptor.ns) + adds > ledger_.Guaranteed(preemptor.ns);
  }

  // The eligible candidates of the node (a gang whole or not at all), in
  // the order victims are taken.
  void Collect() {
    std::map<std::string, size_t> gang_index;
    for (const PodOnNode& p : node_.pods) {
      if (p.gang.empty()) {
        if (Listed(p) && Eligible(p)) {
          cands_.push_back({{{p.uid}}, {&p}, {}, false, p.priority, p.start_unix, 0});
        }
        continue;
      }
      auto [it, fresh] = gang_index.emplace(p.ns + "/" + p.gang, cands_.size());
      if (fresh) cands_.push_back({{{}}, {}, {}, false, p.priority, p.start_unix, 0});
      Candidate& c = cands_[it->second];
      c.unit.uids.push_back(p.uid);
      c.pods.push_back(&p);
      c.priority = std::max(c.priority, p.priority);
      c.start = std::max(c.start, p.start_unix);
    }
    std::erase_if(cands_, [&](Candidate& c) { return !c.pods.front()->gang.empty() && !Whole(c); });
    for (Candidate& c : cands_) {
      c.borrowed = ledger_.Usage(c.pods.front()->ns) > ledger_.Guaranteed(c.pods.front()->ns);
    }
    // Borrowed first, then lowest priority, then the fewest GPUs lost on
    // other nodes (a gang spanning nodes goes whole), then most recent.
    std::stable_sort(cands_.begin(), cands_.end(), [](const Candidate& a, const Candidate& b) {
      if (a.borrowed != b.borrowed) return a.borrowed;
      if (a.priority != b.priority) return a.priority < b.priority;
      if (a.rest_milli != b.rest_milli) return a.rest_milli < b.rest_milli;
      return a.start > b.start;
    });
  }

  std::vector<policy::VictimUnit> Units() const {
    std::vector<policy::VictimUnit> units;
    for (const Candidate& c : cands_) units.push_back(c.unit);
    return units;
  }

  // Whether evicting the candidates `chosen` leaves quota for the preemptor
  // without pushing anyone else below its guarantee.
  bool Accept(const std::vector<int>& chosen) const {
    if (!quotas_) return true;
    QuotaLedger after = ledger_;
    for (int i : chosen) {
      for (const PodOnNode* p : cands_[i].pods) {
        if (!Take(after, p->ns, product_, Milli(*p))) return false;
      }
      for (const Victim& v : cands_[i].rest) {
        if (!Take(after, v.ns, v.product, v.milli)) return false;
      }
    }
    if (!after.CheckModels(preemptor_.ns, product_, demand_).empty()) return false;
    return !rules_.check_quota ||
           after.Check(preemptor_.ns, rules_.quota_demand > 0 ? rules_.quota_demand : demand_).ok;
  }

  // The plan of the candidates PlanVictims chose, highest priority first.
  NodePlan Result(const std::vector<int>& plan) const {
    std::vector<const Candidate*> chosen;
    for (int i : plan) chosen.push_back(&cands_[i]);
    std::stable_sort(chosen.begin(), chosen.end(), [](const Candidate* a, const Candidate* b) {
      return a->priority > b->priority;
    });
    NodePlan out;
    for (const Candidate* c : chosen) {
      for (const PodOnNode* p : c->pods) {
        out.victims.push_back({p->uid, p->ns, node_.name, product_, Milli(*p), p->priority});
      }
      out.gang_rest.insert(out.gang_rest.end(), c->rest.begin(), c->rest.end());
    }
    return out;
  }

 private:
  bool Eligible(const PodOnNode& p) const {
    if (p.reservation || in_.evicted->contains(p.uid)) return false;
    if (in_.only != nullptr) return in_.only->Contains(p);
    const bool lower = p.priority < preemptor_.priority;
    if (rules_.reclaim) {
      // Any borrower restores a guarantee; a cohort's loan is taken back
      // only from borrowers outside the cohort.
      if (p.ns == preemptor_.ns || ledger_.Usage(p.ns) <= ledger_.Guaranteed(p.ns)) return false;
      if (in_.floors != nullptr && ledger_.Usage(p.ns) <= Floor(p.ns)) return false;
      if (in_.cohort_loan && (cohort_.empty() || ledger_.Quota(p.ns).cohort == cohort_)) {
        return false;
      }
      return lower || !in_.options->reclaim.only_lower_priority;
    }
    if (!lower) return false;
    return p.ns == preemptor_.ns || !borrows_ || ledger_.Usage(p.ns) > ledger_.Guaranteed(p.ns);
  }

  // A fair-share reclaim's floor for `ns`: above any usage when `ns` is
  // not above its fair share (none of its pods may go).
  int64_t Floor(const std::string& ns) const {
    auto it = in_.floors->find(ns);
    return it == in_.floors->end() ? std::numeric_limits<int64_t>::max() : it->second;
  }

  bool Listed(const PodOnNode& p) const {
    return rules_.allowed == nullptr || std::find(rules_.allowed->begin(), rules_.allowed->end(),
                                                  p.uid) != rules_.allowed->end();
  }

  // A gang is a victim only whole: every member here eligible and one of
  // them listed; its members on other nodes eligible too (or already going).
  bool Whole(Candidate& c) const {
    bool any_listed = false;
    for (const PodOnNode* p : c.pods) {
      if (!Eligible(*p)) return false;
      any_listed = any_listed || Listed(*p);
    }
    if (!any_listed) return false;
    const PodOnNode& f = *c.pods.front();
    if (in_.gangs->Held(f.ns, f.gang) == static_cast<int>(c.pods.size())) return true;
    const auto* where = in_.gangs->Nodes(f.ns, f.gang);
    if (where == nullptr) return false;
    for (const auto& [name, count] : *where) {
      if (name == node_.name) continue;
      const NodeInfo* other = snapshot_.Find(name);
      if (other == nullptr) return false;
      for (const PodOnNode& p : other->pods) {
        if (p.ns != f.ns || p.gang != f.gang || in_.evicted->contains(p.uid)) continue;
        if (!Eligible(p)) return false;
        c.rest.push_back({p.uid, p.ns, name, snapshot_.product(*other), Milli(p), p.priority});
        c.rest_milli += Milli(p);
        c.priority = std::max(c.priority, p.priority);
        c.start = std::max(c.start, p.start_unix);
      }
    }
    return true;
  }

  // Takes `milli` of `ns` out of `after`, unless that breaks a guarantee.
  bool Take(QuotaLedger& after, const std::string& ns, const std::string& where,
            int64_t milli) const {
    // Never push another namespace below its guarantee to let a borrower
    // (or a reclaimer) in.
    if (ns != preemptor_.ns && (borrows_ || rules_.reclaim) &&
        after.Usage(ns) <= after.Guaranteed(ns)) {
      return false;
    }
    // Reclaim takes only what a namespace borrows: a victim that would leave
    // its namespace below its guarantee comes straight back within it and
    // takes the freed GPUs again (eviction churn).
    if (rules_.reclaim && after.Usage(ns) - milli < after.Guaranteed(ns)) return false;
    // A fair-share reclaim leaves each victim namespace its fair share.
    if (rules_.reclaim && in_.floors != nullptr && after.Usage(ns) - milli < Floor(ns)) {
      return false;
    }
    after.Add(ns, where, -milli);
    return true;
  }

  const PlanInputs& in_;
  const QuotaLedger& ledger_;
  const PodRequest& preemptor_;
  const NodeInfo& node_;
  const ClusterSnapshot& snapshot_;
  const NodePlanRules& rules_;
  const bool quotas_;
  const int64_t demand_;
  const std::string& cohort_;
  const std::string product_;
  bool borrows_ = false;
  std::vector<Candidate> cands_;
};

std::optional<QueueManager::NodePlan> QueueManager::PlanNode(
    const PlanInputs& in, const PodRequest& preemptor, const NodeInfo& node,
    const ClusterSnapshot& snapshot, const policy::Framework& fw, const NodePlanRules& rules) {
  NodeSearch search(in, preemptor, node, snapshot, rules);
  search.Collect();
  policy::PodContext ctx = fw.Prepare(preemptor, snapshot);
  auto plan =
      policy::PlanVictims(fw, ctx, node, search.Units(),
                          [&](const std::vector<int>& chosen) { return search.Accept(chosen); });
  if (!plan.has_value()) return std::nullopt;
  return search.Result(*plan);
}

std::optional<PreemptionOutcome::NodeVictims> QueueManager::AnswerNodeLocked(
    const PodRequest& pod, const PreemptionArgs::Candidate& c, const NodeInfo& node,
    const NodePlan& plan) {
  PreemptionOutcome::NodeVictims nv{c.node, plan.VictimUids(), c.pdb_violations};
  // Victims kube-scheduler chose that hold no GPUs (its CPU/memory
  // choice) stay, unless we know them as not lower priority.
  for (const std::string& uid : c.victim_uids) {
    const bool gpu_pod = std::any_of(node.pods.begin(), node.pods.end(),
                                     [&](const PodOnNode& p) { return p.uid == uid; });
    if (gpu_pod) continue;
    auto known = deps_.state->FindPod(uid);
    if (known.has_value() && known->priority >= pod.priority) continue;
    nv.victim_uids.push_back(uid);
  }
  // An empty list is only returned for a placeholder candidate (sent
  // empty): the pod fits there as is.
  if (nv.victim_uids.empty() && !c.victim_uids.empty()) return std::nullopt;
  // Victim gangs with members elsewhere: those go too once kube-scheduler
  // evicts the members here (GangFollowupEvictionsLocked).
  std::map<std::string, GangFollowup> followups;
  for (const Victim& v : plan.gang_rest) {
    auto pod_here = deps_.state->FindPod(v.uid);
    if (!pod_here.has_value()) continue;
    GangFollowup& f = followups[GangKey(pod_here->ns, pod_here->gang)];
    f.rest.push_back(v.uid);
  }
  for (auto& [key, f] : followups) {
    for (const Victim& v : plan.victims) {
      auto p = deps_.state->FindPod(v.uid);
      if (p.has_value() && GangKey(p->ns, p->gang) == key) f.trigger.push_back(v.uid);
    }
    // kube-scheduler evicts on one of the nodes answered, and answers for
    // other nodes may name other members of the same victim gang: the gang
    // goes once a member named in any of them goes.
    GangFollowup& merged = gang_followups_[key];
    for (std::string& uid : f.trigger) {
      if (std::find(merged.trigger.begin(), merged.trigger.end(), uid) == merged.trigger.end()) {
        merged.trigger.push_back(std::move(uid));
      }
    }
    for (std::string& uid : f.rest) {
      if (std::find(merged.rest.begin(), merged.rest.end(), uid) == merged.rest.end()) {
        merged.rest.push_back(std::move(uid));
      }
    }
    merged.at_ms = Now();
  }
  return nv;
}

bool QueueManager::PreparePreemptLocked(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                        const policy::Framework& fw, PreemptWork* work) {
  SyncLocked(deps_.state->Snapshot());
  // The source's pod when it waits in a queue; a pod not shown yet gets an
  // answer for what the request says (kube-scheduler evicts, not we).
  const Entry* entry = FindEntryLocked(args.pod.uid);
  const PodRequest& pod = entry != nullptr ? *entry->pod : args.pod;
  if (pod.preempt_never || pod.gpu.count == 0) return false;
  // A gang member of unknown size is never admitted: evicting for it would
  // free GPUs it may not take.
  if (pod.gang_size == kGangSizeUnknown) return false;
  // Evicting for a pod its queue holds back would free GPUs it still may
  // not take: not while an earlier unit could use the same nodes (the node
  // scan runs after unlocking), and only victims that leave quota for the
  // earlier units as well.
  const Evaluation ev = EvaluateLocked(pod, snapshot, fw, /*all_checks=*/true, &work->scan);
  // A gang still missing members preempts as one decision
  // (gang_preemption.cc); an elastic gang past its minMember preempts like a
  // single pod. A gang pod the source has not shown gets no plan.
  const int32_t missing = IsGang(pod) && !reservations_.contains(GangKey(pod.ns, pod.gang))
                              ? pod.gang_size - HeldGangMembersLocked(pod)
                              : 0;
  if (missing > 0) {
    if (entry == nullptr) return false;
    if (work->scan.heads.empty()) {
      if (GangPlan* plan = CurrentGangPlanLocked(GangKey(pod.ns, pod.gang))) {
        work->answered = AnswerFromGangPlanLocked(*plan, pod, args, snapshot);
        return false;
      }
    }
  }
  work->view = PlanningViewLocked();
  work->queue_version = queue_version_;
  work->pod = pod;
  work->missing = missing;
  work->quota_demand = ev.quota_demand;
  return true;
}

PreemptionOutcome QueueManager::PreemptOne(const PreemptionArgs& args,
                                           const ClusterSnapshot& snapshot,
                                           const policy::Framework& fw, const PreemptWork& work) {
  // One plan per candidate node, answered under the mutex.
  const PlanInputs in = work.view->Inputs();
  std::vector<std::pair<const PreemptionArgs::Candidate*, NodePlan>> plans;
  for (const PreemptionArgs::Candidate& c : args.candidates) {
    const NodeInfo* node = snapshot.Find(c.node);
    if (node == nullptr) continue;
    NodePlanRules rules;
    rules.allowed = &c.victim_uids;
    rules.quota_demand = work.quota_demand;
    auto plan = PlanNode(in, work.pod, *node, snapshot, fw, rules);
    if (plan.has_value()) plans.emplace_back(&c, std::move(*plan));
  }
  PreemptionOutcome out;
  StateHold l(this, "preempt-commit");
  for (const auto& [c, plan] : plans) {
    const std::vector<std::string> victims = plan.AllUids();
    if (!PlanCurrentLocked({work.view->stamp, work.queue_version, "", false, &victims})) continue;
    if (auto nv = AnswerNodeLocked(work.pod, *c, *snapshot.Find(c->node), plan)) {
      out.nodes.push_back(std::move(*nv));
    }
  }
  return out;
}

PreemptionOutcome QueueManager::PreemptGang(const PreemptionArgs& args,
                                            const ClusterSnapshot& snapshot,
                                            const policy::Framework& fw, const PreemptWork& work) {
  const std::string key = GangKey(work.pod.ns, work.pod.gang);
  {
    StateHold l(this, "preempt-commit");
    if (GangPlan* current = CurrentGangPlanLocked(key)) {  // planned meanwhile
      return AnswerFromGangPlanLocked(*current, work.pod, args, snapshot);
    }
  }
  auto plan = PlanGang(work.view->Inputs(), work.pod, work.missing, snapshot, fw,
                       /*reclaim=*/false, work.quota_demand);
  if (!plan.has_value()) return {};
  StateHold l(this, "preempt");
  GangPlan* current = CurrentGangPlanLocked(key);  // another member's call may have planned
  if (current == nullptr) {
    std::vector<std::string> victims;
    for (const GangStep& step : plan->steps) {
      for (std::string& uid : step.plan.AllUids()) victims.push_back(std::move(uid));
    }
    if (!PlanCurrentLocked({work.view->stamp, work.queue_version, work.pod.uid, false, &victims}))
      return {};
    plan->at_ms = Now();
    if (!plan->where.empty()) {
      Log(StrCat("gpusched: gang ", key, " preempts as one plan of ", victims.size(),
                 " victims: ", plan->where));
    }
    current = &(gang_plans_[key] = std::move(*plan));
  }
  return AnswerFromGangPlanLocked(*current, work.pod, args, snapshot);
}

PreemptionOutcome QueueManager::Preempt(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                        const policy::Framework& fw) {
  auto counted = [&](PreemptionOutcome o, const std::string& ns) {
    if (!o.nodes.empty() && deps_.metrics != nullptr) {
      deps_.metrics->Inc("gpusched_preemptions_total",
                         "Preempt calls answered with at least one usable node.",
                         {{"namespace", ns}});
    }
    return o;
  };
  // Plans read many nodes: they are made without the mutex, on the planning
  // view (a gang's plan: every node; a single pod's: kube-scheduler's
  // candidates).
  PreemptWork work;
  {
    StateHold l(this, "preempt");
    if (!PreparePreemptLocked(args, snapshot, fw, &work)) {
      if (!work.answered.has_value()) return {};
      return counted(std::move(*work.answered), args.pod.ns);
    }
  }
  if (!work.scan.heads.empty()) {
    Evaluation behind;
    ScanBehind(work.scan, snapshot, fw, &behind);
    if (behind.behind_earlier) return {};
  }
  PreemptionOutcome out = work.missing <= 0 ? PreemptOne(args, snapshot, fw, work)
                                            : PreemptGang(args, snapshot, fw, work);
  return counted(std::move(out), work.pod.ns);
}

std::optional<PodRequest> QueueManager::MarkEvictedLocked(const std::string& uid) {
  auto pod = deps_.state->FindPod(uid);
  if (!pod.has_value() || deps_.writer == nullptr) return std::nullopt;
  evicted_[uid] = Now();
  ++evicted_version_;
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

void QueueManager::ChooseReclaimsLocked(ReclaimChoice& c) {
  if (!c.started) {
    // Round-robin from the cursor: the namespaces from it to the last, then
    // from the first up to it.
    c.started = true;
    c.first = c.next = reclaim_cursor_;
    reclaim_cursor_.clear();
    c.queue_version = queue_version_;
  }
  const int64_t now = Now();
  // The hold's budget counts the ledger (made again after a usage change)
  // and its borrowers too: when they alone outlast it, the hold ends there
  // (once a turn) and the next one, finding the ledger made, looks on.
  const auto budget = std::chrono::microseconds(options_.reclaim_choice_hold_us);
  const auto started = std::chrono::steady_clock::now();
  const QuotaLedger& ledger = LedgerLocked();
  // Namespaces above their guarantee: only their pods can be reclaimed.
  const Borrowers borrowers = BorrowersOf(ledger);
  if (!c.ledger_hold && budget.count() > 0 && std::chrono::steady_clock::now() - started > budget) {
    c.ledger_hold = true;  // the next hold finds the ledger made
    return;
  }
  auto it = order_.lower_bound(c.next);
  for (size_t looked = 0;; ++looked) {
    if (it == order_.end() && !c.wrapped && !c.first.empty()) {
      c.wrapped = true;
      it = order_.begin();
    }
    if (it == order_.end() || (c.wrapped && it->first >= c.first)) {
      c.done = true;  // every namespace looked at once
      return;
    }
    if (static_cast<int32_t>(c.jobs.size()) >= options_.reclaim_plans_per_tick) {
      reclaim_cursor_ = it->first;  // the next tick starts here
      c.done = true;
      return;
    }
    if (looked == kNamespacesPerHold ||
        (looked > 0 && budget.count() > 0 && std::chrono::steady_clock::now() - started > budget)) {
      c.next = it->first;  // the next hold starts here
      return;
    }
    if (auto job = ReclaimJobForLocked(it->first, it->second, ledger, borrowers, now)) {
      c.jobs.push_back(std::move(*job));
    }
    ++it;
  }
}

std::optional<QueueManager::ReclaimJob> QueueManager::ReclaimJobForLocked(
    const std::string& ns, const Order& order, const QuotaLedger& ledger,
    const Borrowers& borrowers, int64_t now) {
  auto busy = reclaiming_.find(ns);
  if (busy != reclaiming_.end() && now - busy->second.at_ms < options_.stale_after_ms &&
      busy->second.victims_present) {
    return std::nullopt;  // the last victims are still terminating (at most stale_after_ms)
  }
  // The head: the first unit filtered (or seen) within stale_after_ms.
  // A gang is one unit, seen at its first member.
  const Entry* head = nullptr;
  absl::flat_hash_set<std::string> gangs;
  for (const Entry* e : order) {
    if (IsGang(*e->pod) && !gangs.insert(e->pod->gang).second) continue;
    if (now - std::max(e->last_filter_ms(), e->first_seen_ms) > options_.stale_after_ms) continue;
    head = e;
    break;
  }
  if (head == nullptr || head->pod->gang_size == kGangSizeUnknown) return std::nullopt;
  auto backoff = reclaim_backoff_.find(ns);
  if (backoff != reclaim_backoff_.end() && backoff->second.head_uid == head->pod->uid &&
      now < backoff->second.retry_at_ms) {
    return std::nullopt;  // its last plan for this head found nothing
  }
  // A gang reclaims for all its members not yet placed, once: not while
  // it holds a reservation (its devices are found).
  int32_t members = 1;
  if (IsGang(*head->pod)) {
    if (reservations_.contains(GangKey(ns, head->pod->gang))) return std::nullopt;
    members = head->pod->gang_size - usage_.GangHeld(ns, head->pod->gang);
    if (members <= 0) return std::nullopt;
  }
  const int64_t demand = DemandMilli(head->pod->gpu) * members;
  // Held back by a borrowing unit of its Backfill cohort: it could not take
  // what reclaim frees (within its guarantee it is never held).
  if (CohortHeldLocked(*head->pod, demand)) return std::nullopt;
  const ReclaimKind kind = ReclaimKindOf(ledger, ns, demand, borrowers);
  // Else a fair-share reclaim, else an attained-service preemption within
  // the namespace.
  absl::flat_hash_map<std::string, int64_t> floors;
  DemotedWorkloads only;
  const bool fair = kind == ReclaimKind::kNone && options_.reclaim.enabled &&
                    options_.reclaim.fair_share.enabled && !head->pod->preempt_never &&
                    FairFloorsLocked(ns, demand, now, &floors);
  if ((kind == ReclaimKind::kNone || !options_.reclaim.enabled) && !fair &&
      !AttainedVictimsLocked(*head, now, &only)) {
    return std::nullopt;
  }
  // The head is copied only for a job (not per namespace looked at).
  ReclaimJob job{ns, *head->pod, members, demand, {}};
  job.cohort_loan = kind == ReclaimKind::kCohortLoan;
  job.floors = std::move(floors);
  job.only = std::move(only);
  return job;
}

std::vector<uint8_t> QueueManager::ReclaimWorth(const PlanInputs& in, const ReclaimJob& job,
                                                const ClusterSnapshot& snapshot,
                                                policy::FilterMemo& memo, size_t* fewest_out) {
  const auto& nodes = snapshot.nodes();
  const QuotaLedger& ledger = *in.ledger;
  const std::string& cohort = ledger.Quota(job.pod.ns).cohort;
  // Borrowers (for a cohort's loan, outside the cohort): only their pods
  // can be reclaimed.
  absl::flat_hash_set<std::string> borrowers;
  for (const std::string& o : ledger.Namespaces()) {
    if (o == job.pod.ns || ledger.Usage(o) <= ledger.Guaranteed(o)) continue;
    if (job.cohort_loan && ledger.Quota(o).cohort == cohort) continue;
    if (!job.floors.empty() && !job.floors.contains(o)) continue;
    borrowers.insert(o);
  }
  const bool lower_only = in.options->reclaim.only_lower_priority;
  auto reclaimable = [&](const PodOnNode& p) {
    if (p.reservation || in.evicted->contains(p.uid)) return false;
    if (in.only != nullptr) return in.only->Contains(p);
    return borrowers.contains(p.ns) && (!lower_only || p.priority < job.pod.priority);
  };
  // Per node, whether planning can help: its verdict is not unresolvable, it
  // has a reclaimable pod, and its free devices plus every reclaimable
  // pod's are enough for a whole-GPU pod. Also the fewest victims any plan
  // can have: a victim frees at most `most` devices, a node has at most
  // `most_free` free, so a plan of that size is the cheapest there is.
  const int32_t count = job.pod.gpu.shared() ? 1 : job.pod.gpu.count;
  std::vector<uint8_t> worth(nodes.size(), 0);
  int32_t most = 1, most_free = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    in.Pace();
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
    if (!any || (!job.pod.gpu.shared() && could_free < count)) continue;
    worth[i] = 1;
    most_free = std::max(most_free, free);
  }
  *fewest_out =
      static_cast<size_t>(std::max(1, (count - most_free + most - 1) / std::max(1, most)));
  return worth;
}

void QueueManager::PlanReclaim(const PlanInputs& batch_in, const ClusterSnapshot& snapshot,
                               const policy::Framework& fw, ReclaimJob* job) {
  PlanInputs in = batch_in;
  in.cohort_loan = job->cohort_loan;
  in.floors = job->floors.empty() ? nullptr : &job->floors;
  if (IsGang(job->pod)) {
    // Every missing member placed, as one plan; members that fit as is
    // need no victims. Victim gangs go whole (their rest included).
    auto plan = PlanGang(in, job->pod, job->members, snapshot, fw, /*reclaim=*/in.only == nullptr,
                         job->demand);
    if (!plan.has_value()) return;
    for (const GangStep& step : plan->steps) {
      for (std::string& uid : step.plan.AllUids()) job->victims.push_back(std::move(uid));
    }
    if (!job->victims.empty()) job->where = std::move(plan->where);
    return;
  }
  policy::PodContext ctx = fw.Prepare(job->pod, snapshot);
  policy::FilterMemo memo(fw, ctx);
  const auto& nodes = snapshot.nodes();
  // An attained-service preemption, a cohort's loan and a fair-share
  // reclaim also free quota: a head its namespace's quota refuses needs
  // victims even where a node has room.
  const bool quota_ok = (in.only == nullptr && !job->cohort_loan && in.floors == nullptr) ||
                        in.ledger->Check(job->pod.ns, job->demand).ok;
  for (size_t i = 0; quota_ok && i < nodes.size(); ++i) {
    in.Pace();
    if (memo.Filter(snapshot.hot(static_cast<int32_t>(i))).fits() &&
        policy::FitsWithDevices(fw, ctx, *nodes[i])) {
      return;  // it fits somewhere as is: nothing to reclaim
    }
  }
  size_t fewest = 1;
  const std::vector<uint8_t> worth = ReclaimWorth(in, *job, snapshot, memo, &fewest);
  std::optional<std::vector<std::string>> best;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!worth[i]) continue;
    in.Pace();
    NodePlanRules rules;
    rules.reclaim = in.only == nullptr;
    auto plan = PlanNode(in, job->pod, *nodes[i], snapshot, fw, rules);
    if (!plan.has_value() || plan->victims.empty()) continue;
    // The fewest pods evicted, a victim gang's members elsewhere included.
    std::vector<std::string> uids = plan->AllUids();
    if (!best || uids.size() < best->size()) {
      best = std::move(uids);
      if (best->size() <= fewest) break;  // no later node can need fewer
    }
  }
  if (best.has_value()) job->victims = std::move(*best);
}

std::string QueueManager::ReclaimReasonLocked(const ReclaimJob& job, int64_t now) {
  if (!job.only.empty()) {
    const AttainedServiceConfig& a = AttainedOf(options_.quotas, job.ns);
    // One preemption of the budget per workload evicted.
    absl::flat_hash_set<std::string> workloads;
    for (const std::string& uid : job.victims) {
      if (const std::string* w = attained_.WorkloadOf(uid)) workloads.insert(*w);
    }
    Refill(attained_budget_, job.ns, a.preemptions_per_hour, now).tokens -=
        static_cast<double>(std::max<size_t>(1, workloads.size()));
    return StrCat("attained service: ", job.pod.Key(), " has run less than ",
                  FormatGpus(a.demote_after_gpu_seconds * 1000 / 3600), " GPU-hours and needs ",
                  FormatGpus(job.demand), " GPUs held by a workload of ", job.ns,
                  " that has run more");
  }
  if (!job.floors.empty()) return FairShareReasonLocked(job, now);
  if (job.cohort_loan) {
    return StrCat("reclaim: cohort ",
                  options_.quotas.namespaces.contains(job.ns)
                      ? options_.quotas.namespaces.at(job.ns).cohort
                      : options_.quotas.default_quota.cohort,
                  " lends ", job.ns, " its idle guarantee, borrowed outside the cohort, and ",
                  job.pod.Key(), " needs ", FormatGpus(job.demand), " GPUs");
  }
  return StrCat("reclaim: namespace ", job.ns, " is below its guarantee and ", job.pod.Key(),
                " needs ", FormatGpus(job.demand), " GPUs");
}

void QueueManager::RecordReclaimLocked(const ReclaimJob& job, int64_t now) {
  Reclaim& r = reclaiming_[job.ns];
  reclaim_view_.dirty = true;
  r = {now,
       job.victims,
       job.pod.uid,
       job.demand,
       {},
       job.pod.priority,
       IsGang(job.pod) ? job.pod.gang : "",
       job.only.empty() && !job.cohort_loan && job.floors.empty()};
  for (const std::string& uid : job.victims) {
    if (auto v = deps_.state->FindPod(uid)) r.nodes.insert(v->node_name);
  }
  auto held = std::make_shared<HeldNodes>();
  for (const std::string& node : r.nodes) {
    held->emplace_back(node, StrCat("gpusched: GPUs freed on ", node, " by reclaim are held for ",
                                    job.pod.Key(), " until it binds"));
  }
  r.held = std::move(held);
}

std::vector<std::pair<PodRequest, std::string>> QueueManager::CommitReclaimsLocked(
    const std::vector<ReclaimJob>& jobs, const PlanningView::Stamp& planned,
    uint64_t queue_version) {
  SyncLocked(deps_.state->Snapshot());  // the facts as they are now
  std::vector<std::pair<PodRequest, std::string>> out;
  const int64_t now = Now();
  for (const ReclaimJob& job : jobs) {
    if (!job.planned) {
      // The budget ran out: the next tick starts with this namespace.
      reclaim_cursor_ = job.ns;
      break;
    }
    if (job.victims.empty()) {
      ReclaimBackoff& b = reclaim_backoff_[job.ns];
      b.failures = b.head_uid == job.pod.uid ? b.failures + 1 : 1;
      b.head_uid = job.pod.uid;
      b.retry_at_ms = now + (int64_t{1000} << std::min(b.failures - 1, 4));
      continue;
    }
    reclaim_backoff_.erase(job.ns);
    // The commit rule (PlanCurrentLocked): its pod still heads its queue
    // and every victim is still there and not evicted, unless nothing moved.
    if (!PlanCurrentLocked(
            {planned, queue_version, job.pod.uid, /*heads_queue=*/true, &job.victims}))
      continue;
    std::string reason = ReclaimReasonLocked(job, now);
    if (!job.where.empty()) StrAppend(&reason, "; ", job.where);
    for (const std::string& uid : job.victims) {
      if (auto pod = MarkEvictedLocked(uid)) out.emplace_back(std::move(*pod), reason);
    }
    RecordReclaimLocked(job, now);
  }
  return out;
}

QueueManager::OverLimitPlan QueueManager::PlanOverLimit(const PlanningView& view) {
  OverLimitPlan plan;
  const QuotaLedger& ledger = *view.ledger;
  std::map<std::string, int64_t> over;
  for (const std::string& ns : ledger.Namespaces()) {
    if (ledger.Usage(ns) <= ledger.Limit(ns)) continue;
    over[ns] = ledger.Usage(ns) - ledger.Limit(ns);
    plan.usage[ns] = ledger.Usage(ns);
  }
  if (over.empty()) return plan;
  std::vector<const PodOnNode*> pods;
  for (const auto& node : view.snapshot->nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (over.contains(p.ns) && !p.reservation && !view.evicted.contains(p.uid)) {
        pods.push_back(&p);
      }
    }
  }
  std::stable_sort(pods.begin(), pods.end(), [](const PodOnNode* a, const PodOnNode* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    if (a->start_unix != b->start_unix) return a->start_unix > b->start_unix;
    return a->uid < b->uid;
  });
  absl::flat_hash_set<std::string> taken;
  for (const PodOnNode* p : pods) {
    int64_t& left = over[p->ns];
    if (left <= 0 || taken.contains(p->uid)) continue;
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
      if (!taken.insert(q->uid).second) continue;
      plan.victims.push_back(q->uid);
      plan.reasons.push_back(reason);
    }
  }
  return plan;
}

std::vector<std::pair<PodRequest, std::string>> QueueManager::CommitOverLimitLocked(
    const OverLimitPlan& plan, const PlanningView::Stamp& planned, uint64_t queue_version) {
  std::vector<std::pair<PodRequest, std::string>> out;
  if (plan.victims.empty()) return out;
  SyncLocked(deps_.state->Snapshot());  // the facts as they are now
  if (!PlanCurrentLocked(
          {planned, queue_version, "", false, &plan.victims, nullptr, &plan.usage})) {
    return out;  // planned again by the next tick
  }
  for (size_t i = 0; i < plan.victims.size(); ++i) {
    if (auto pod = MarkEvictedLocked(plan.victims[i])) {
      out.emplace_back(std::move(*pod), plan.reasons[i]);
    }
  }
  return out;
}

}  // namespace gpusched::queue
