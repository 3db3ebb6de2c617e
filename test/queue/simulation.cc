#include "test/queue/simulation.h"

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "test/queue/harness.h"

namespace gpusched::queue::testing {
namespace {

using ::gpusched::testing::Dgx1V100;
using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::Pcie4xT4;

const char* const kNamespaces[] = {"team-a", "team-b", "team-c", "guest"};

constexpr char kClique[] = "nvidia.com/gpu.clique";

// Topology mode: the H100s in cliques x and y, the V100 in x, the T4 in none.
std::vector<NodeSpec> Nodes(bool topology) {
  std::vector<NodeSpec> nodes = {Hgx8H100("h100-0"), Hgx8H100("h100-1"), Dgx1V100("v100-0"),
                                 Pcie4xT4("t4-0")};
  if (topology) {
    for (int i = 0; i < 3; ++i) {
      nodes[i].labels =
          std::make_shared<const NodeLabels>(NodeLabels{{kClique, i == 1 ? "y" : "x"}});
    }
  }
  return nodes;
}

QueueOptions InitialOptions(bool from_scratch, bool topology) {
  QueueOptions o;
  if (topology) o.gang.topology_levels = {kClique};
  o.recompute_from_scratch = from_scratch;
  NamespaceQuota a = Quota(8, 16, "research");
  a.models["H100"] = {4, 8};
  o.quotas = Quotas({{"team-a", a}, {"team-b", Quota(8, 12, "research")}, {"team-c", Quota(4, 8)}},
                    Quota(2, 4));
  o.gang.reservation_seconds = 30;
  return o;
}

class Simulation {
 public:
  Simulation(uint32_t seed, bool from_scratch, std::vector<std::string>* decisions, bool topology)
      : rng_(seed),
        h_(Nodes(topology), {}, InitialOptions(from_scratch, topology)),
        decisions_(decisions),
        topology_(topology) {}

  SimulationResult Run(int64_t steps) {
    for (r_.steps = 0; r_.steps < steps && r_.violation.empty(); ++r_.steps) {
      Step();
      Check();
    }
    return r_;
  }

 private:
  int Rand(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void Record(std::string line) {
    if (decisions_ != nullptr) decisions_->push_back(StrCat(r_.steps, " ", line));
  }

  std::vector<PodRequest> Pods(bool pending) {
    std::vector<PodRequest> out;
    for (PodRequest& p : h_.state().Pods()) {
      if (p.reservation) continue;
      const bool waiting = !p.HoldsGpus() && p.phase == PodPhase::kPending;
      const bool running = p.HoldsGpus();
      if ((pending && waiting) || (!pending && running)) out.push_back(std::move(p));
    }
    return out;
  }

  void Submit() {
    if (Pods(true).size() >= 24) return;
    const int kind = Rand(10);
    const std::string ns = kNamespaces[Rand(4)];
    const int32_t priority = std::vector<int32_t>{0, 10, 100}[Rand(3)];
    const int gpus = std::vector<int>{1, 1, 2, 4, 8}[Rand(5)];
    const int members = kind == 0 ? 2 : 1;
    const std::string gang = kind == 0 ? StrCat("g", next_id_) : "";
    // Topology mode: a gang requires one clique, prefers one, or neither.
    const auto rule = static_cast<TopologyRule>(topology_ && kind == 0 ? Rand(3) : 0);
    for (int m = 0; m < members; ++m) {
      PodRequest p;
      p.ns = ns;
      p.name = StrCat("p", next_id_++);
      p.uid = "uid-" + p.name;
      p.priority = priority;
      p.creation_unix = h_.now_ms / 1000;
      p.gpu.count = kind == 0 ? 4 : gpus;
      if (kind == 1) p.gpu.topology = TopologyMode::kNvlinkRequired;
      if (kind == 2) {
        p.gpu.models = {"T4"};
        p.gpu.count = std::min(p.gpu.count, 4);  // the T4 node has 4
      }
      if (kind == 3 && p.gpu.count == 1) p.gpu.milli_per_gpu = 500;
      if (kind == 4) p.preempt_never = true;
      p.gang = gang;
      p.gang_size = kind == 0 ? members : 0;
      if (rule != TopologyRule::kNone) p.topology_request = {rule, kClique, 0, "annotation", ""};
      h_.state().UpsertPod(p);
    }
    h_.state().Commit();
    ++r_.submits;
  }

  // Queue order within a namespace: priority (descending), creation time,
  // name, uid.
  static bool Earlier(const PodRequest& a, const PodRequest& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.creation_unix != b.creation_unix) return a.creation_unix < b.creation_unix;
    if (a.name != b.name) return a.name < b.name;
    return a.uid < b.uid;
  }

  // Like kube-scheduler's active queue, mostly offers the pod at the front
  // (here: the head of a random namespace's queue); sometimes any pending
  // pod, which exercises strict priority and backfill.
  bool PickPending(PodRequest* out) {
    auto pending = Pods(true);
    if (pending.empty()) return false;
    if (Rand(4) == 0) {
      *out = pending[Rand(static_cast<int>(pending.size()))];
      return true;
    }
    const PodRequest& any = pending[Rand(static_cast<int>(pending.size()))];
    const PodRequest* head = &any;
    for (const PodRequest& p : pending) {
      if (p.ns == any.ns && Earlier(p, *head)) head = &p;
    }
    *out = *head;
    return true;
  }

  void FilterAndBind() {
    PodRequest p;
    if (!PickPending(&p)) return;
    std::string reason;
    auto nodes = h_.Filter(p, &reason);
    Record(StrCat("filter ", p.Key(), " -> ", nodes.size(), " nodes; ", reason));
    if (nodes.empty() || Rand(8) == 0) return;  // sometimes kube never binds
    std::string err = h_.Bind(p, nodes[Rand(static_cast<int>(nodes.size()))]);
    Record(StrCat("bind ", p.Key(), ": ", err));
    err.empty() ? ++r_.binds : ++r_.rejected_binds;
  }

  // kube-scheduler retries waiting pods with nothing changed in between:
  // a few filters of pending pods, none submitted again, none bound (the
  // queue's per-namespace index is reused across them).
  void Retry() {
    auto pending = Pods(true);
    if (pending.empty()) return;
    for (int i = 0; i < 3; ++i) {
      const PodRequest& p = pending[Rand(static_cast<int>(pending.size()))];
      std::string reason;
      auto nodes = h_.FilterOnly(p, &reason);
      Record(StrCat("retry ", p.Key(), " -> ", nodes.size(), " nodes; ", reason));
    }
  }

  // The user deletes a pod that is still waiting.
  void Cancel() {
    auto pending = Pods(true);
    if (pending.empty()) return;
    h_.state().RemovePod(pending[Rand(static_cast<int>(pending.size()))].uid);
    h_.state().Commit();
    ++r_.cancels;
  }

  void BindAnywhere() {
    auto pending = Pods(true);
    if (pending.empty()) return;
    const PodRequest& p = pending[Rand(static_cast<int>(pending.size()))];
    std::string err = h_.Bind(p, h_.nodes[Rand(static_cast<int>(h_.nodes.size()))].name);
    Record(StrCat("bind anywhere ", p.Key(), ": ", err));
    err.empty() ? ++r_.binds : ++r_.rejected_binds;
  }

  // Someone on the network filters a pod the cluster never showed: highest
  // priority, a real namespace, sometimes a real pod's name with another
  // uid. The answer is placement only; nothing may stay behind.
  void Forge() {
    PodRequest p;
    p.ns = kNamespaces[Rand(4)];
    p.name = Rand(2) == 0 ? StrCat("p", Rand(static_cast<int>(next_id_) + 1)) : "forged";
    p.uid = StrCat("forged-", r_.steps);
    p.priority = 2'000'000'000;
    p.creation_unix = 0;
    p.gpu.count = 8;
    std::string reason;
    auto nodes = h_.FilterOnly(p, &reason);
    Record(StrCat("forged ", p.Key(), " -> ", nodes.size(), " nodes; ", reason));
    if (h_.state().FindPod(p.uid).has_value()) {
      r_.violation = StrCat("forged pod ", p.uid, " entered the cluster state");
      return;
    }
    if (h_.Bind(p, h_.nodes[0].name).empty() || h_.state().FindPod(p.uid).has_value()) {
      r_.violation = StrCat("bind of forged pod ", p.uid, " changed the cluster state");
      return;
    }
    for (const auto& ns : h_.queue->Report({p.ns, 1000}).namespaces) {
      for (const auto& q : ns.queue) {
        if (q.uid == p.uid) {
          r_.violation = StrCat("forged pod ", p.uid, " stayed in the queue");
          return;
        }
      }
    }
  }

  void Finish(bool remove) {
    auto running = Pods(false);
    if (running.empty()) return;
    PodRequest p = running[Rand(static_cast<int>(running.size()))];
    if (remove) {
      h_.state().RemovePod(p.uid);
    } else {
      p.phase = PodPhase::kSucceeded;
      h_.state().UpsertPod(p);
      // Finished pods stay in the state for a while, then are deleted (Job
      // TTL, pod GC), so the state does not grow with the step count.
      finished_.push_back(p.uid);
      if (finished_.size() > 8) {
        h_.state().RemovePod(finished_.front());
        finished_.pop_front();
      }
    }
    h_.state().Commit();
    ++r_.finishes;
  }

  void ChangeQuota() {
    QueueOptions o = h_.options;
    const std::string ns = kNamespaces[Rand(3)];
    NamespaceQuota& q = o.quotas.namespaces[ns];
    q.gpus.guaranteed = Rand(12);
    q.gpus.limit = q.gpus.guaranteed + Rand(8);
    for (auto& [model, amount] : q.models) {
      amount.guaranteed = Rand(8);
      amount.limit = amount.guaranteed + Rand(6);
    }
    // Now and then the namespace orders by attained service (and evicts by
    // it, within a budget), or stops.
    q.attained = {};
    if (Rand(2) == 0) q.attained = {true, (1 + Rand(3)) * 20, Rand(4) * 30};
    o.reclaim.evict_over_limit = Rand(4) == 0;
    o.reclaim.only_lower_priority = Rand(2) == 0;
    // Either queueing strategy (the default, BestEffortFIFO, or StrictFIFO).
    q.queueing = Rand(2) == 0 ? QueueingStrategy::kStrictFifo : QueueingStrategy::kBestEffortFifo;
    // Fair-share reclaim on now and then, with weights and a budget.
    q.weight = 1 + Rand(3);
    o.reclaim.fair_share = {Rand(2) == 0, static_cast<int32_t>(1 + Rand(12))};
    h_.options = o;
    h_.queue->SetOptions(o);
    ++r_.quota_changes;
  }

  void Preempt() {
    PodRequest p;
    if (!PickPending(&p)) return;
    PreemptionArgs args;
    args.pod = p;
    auto snap = h_.state().Snapshot();
    for (const auto& node : snap->nodes()) {
      PreemptionArgs::Candidate c{node->name, {}, 0};
      for (const PodOnNode& v : node->pods) {
        if (v.priority < p.priority && !v.reservation) c.victim_uids.push_back(v.uid);
      }
      args.candidates.push_back(std::move(c));
    }
    PreemptionOutcome out = h_.service->Preempt(args);
    std::string answer = StrCat("preempt ", p.Key(), ":");
    for (const auto& n : out.nodes) StrAppend(&answer, " ", n.node, "=", n.victim_uids.size());
    Record(std::move(answer));
    if (out.nodes.empty()) return;
    const auto& chosen = out.nodes[Rand(static_cast<int>(out.nodes.size()))];
    std::set<std::string> hit;  // victim gangs
    for (const std::string& uid : chosen.victim_uids) {
      auto v = h_.state().FindPod(uid);
      if (!v.has_value() || v->priority >= p.priority || v->reservation) {
        r_.violation = StrCat("preempt offered victim ", uid, " for ", p.Key());
        return;
      }
      if (!v->gang.empty()) hit.insert(StrCat(v->ns, "/", v->gang));
      h_.state().RemovePod(uid);
    }
    h_.state().Commit();
    ++r_.preemptions;
    // Gangs with members left running on other nodes: the next tick must
    // evict those.
    for (const PodRequest& p : Pods(false)) {
      if (!p.gang.empty() && hit.contains(StrCat(p.ns, "/", p.gang))) {
        broken_.insert(StrCat(p.ns, "/", p.gang));
      }
    }
  }

  void Step() {
    const int op = Rand(100);
    if (op < 22) {
      Submit();
    } else if (op < 57) {
      FilterAndBind();
    } else if (op < 60) {
      Retry();
    } else if (op < 63) {
      BindAnywhere();
    } else if (op < 75) {
      Finish(false);
    } else if (op < 80) {
      Finish(true);
    } else if (op < 83) {
      Cancel();
    } else if (op < 85) {
      ChangeQuota();
    } else if (op < 91) {
      Preempt();
    } else if (op < 98) {
      h_.now_ms += Rand(20'000);
      const size_t before = h_.writer.evicted.size();
      r_.evictions += h_.queue->Tick();
      std::string evicted = "tick evicts:";
      for (size_t i = before; i < h_.writer.evicted.size(); ++i) {
        StrAppend(&evicted, " ", h_.writer.evicted[i]);
      }
      Record(std::move(evicted));
      ticked_ = true;
      CheckNoPartialGang();
    } else if (op < 99) {
      Forge();
    } else {
      h_.Restart();
      broken_.clear();  // a restarted extender knows no earlier preempt answer
      ++r_.restarts;
    }
  }

  void Check() {
    auto snap = h_.state().Snapshot();
    std::set<std::string> placeholders;
    std::map<std::string, int64_t> held_by_gang;  // "ns/gang" -> holders
    for (const auto& node : snap->nodes()) {
      if (node->device_conflicts != 0) {
        r_.violation = StrCat("device allocated twice on ", node->name);
        return;
      }
      for (const PodOnNode& p : node->pods) {
        if (!p.reservation) continue;
        placeholders.insert(p.uid);
        ++held_by_gang[StrCat(p.ns, "/", p.gang)];
      }
    }
    // The queue's reservations (open slots per gang) are exactly the
    // holders in the cluster state.
    std::map<std::string, int64_t> open;
    for (const auto& r : h_.queue->Report().reservations) {
      if (r.slots > r.bound) open[StrCat(r.ns, "/", r.gang)] = r.slots - r.bound;
    }
    if (open != held_by_gang) {
      r_.violation = "reservation placeholders and live reservations differ";
      return;
    }
    r_.gang_reservations = std::max<int64_t>(r_.gang_reservations, placeholders.size());
    QuotaLedger ledger(h_.options.quotas, *snap);
    for (const char* ns : kNamespaces) {
      const int64_t usage = ledger.Usage(ns);
      if (usage > ledger.Limit(ns) && usage > prev_usage_[ns]) {
        r_.violation =
            StrCat("namespace ", ns, " grew to ", usage, " above its limit ", ledger.Limit(ns));
        return;
      }
      prev_usage_[ns] = usage;
      // Per-model limits hold the same way (team-a's H100 amount).
      for (const auto& [model, amount] : ledger.Quota(ns).models) {
        const int64_t used = ledger.ModelUsage(ns, model);
        const std::string key = StrCat(ns, "/", model);
        if (used > amount.limit * 1000 && used > prev_usage_[key]) {
          r_.violation = StrCat("namespace ", ns, " grew to ", used, " milli-GPUs of ", model,
                                " above its model limit ", amount.limit * 1000);
          return;
        }
        prev_usage_[key] = used;
      }
    }
    if (ticked_) {
      ticked_ = false;
      for (const auto& r : h_.queue->Report().reservations) {
        if (r.expires_in_seconds < 0) {
          r_.violation = "reservation outlived its deadline";
          return;
        }
      }
      CheckIdleGpusAreLent(*snap, ledger);
      if (!r_.violation.empty()) return;
    }
    CheckGuaranteeAdmits(*snap, ledger);
    if (topology_) CheckRequiredGangsInOneDomain(*snap);
  }

  // Topology mode: the members of a gang that requires a clique (running
  // or holding its reservation) are all in one clique.
  void CheckRequiredGangsInOneDomain(const ClusterSnapshot& snap) {
    std::map<std::string, std::set<std::string>> cliques;  // "ns/gang" -> cliques used
    for (const auto& node : snap.nodes()) {
      const std::string* clique = FindLabel(node->labels.get(), kClique);
      for (const PodOnNode& p : node->pods) {
        if (p.gang.empty()) continue;
        auto pod = h_.state().FindPod(p.uid);
        const PodRequest* req = pod.has_value() ? &*pod : nullptr;
        if (req == nullptr || req->topology_request.rule != TopologyRule::kRequired) continue;
        cliques[StrCat(p.ns, "/", p.gang)].insert(clique != nullptr ? *clique : "(none)");
      }
    }
    for (const auto& [gang, used] : cliques) {
      if (used.size() > 1 || used.contains("(none)")) {
        r_.violation = StrCat("gang ", gang, " requires one clique but holds GPUs in ", used.size(),
                              " (or on a node without one)");
        return;
      }
      ++r_.domain_checks;
    }
  }

  // Work conservation, checked after every tick: the head of a namespace's
  // queue never waits for quota while a node has room for it now and its
  // namespace is below its limit with it (GPUs held back for another
  // namespace's reclaim excepted: they are spoken for).
  void CheckIdleGpusAreLent(const ClusterSnapshot& snap, const QuotaLedger& ledger) {
    auto fw = h_.service->framework();
    for (const auto& [ns, head] : Heads()) {
      if (!head.gang.empty()) continue;
      if (ledger.Usage(ns) + DemandMilli(head.gpu) > ledger.Limit(ns)) continue;
      policy::PodContext ctx = fw->Prepare(head, snap);
      bool room = false;
      for (const auto& node : snap.nodes()) {
        room = room || policy::FitsWithDevices(*fw, ctx, *node);
      }
      if (!room) continue;
      std::string reason;
      if (!h_.Filter(head, &reason).empty()) continue;
      if (reason.find(" at quota:") != std::string::npos &&
          reason.find("position 1 in queue") != std::string::npos &&
          reason.find("held for pods of namespaces below their guarantee") == std::string::npos) {
        r_.violation = StrCat("head ", head.Key(),
                              " waits for quota below its limit while a node "
                              "has room for it: ",
                              reason);
        return;
      }
      ++r_.idle_checks;
    }
  }

  // A gang that lost a member to preemption runs no member after the next
  // tick: gpusched evicts the rest (a gang runs whole or not at all).
  void CheckNoPartialGang() {
    for (const PodRequest& p : Pods(false)) {
      if (!p.gang.empty() && broken_.contains(StrCat(p.ns, "/", p.gang))) {
        r_.violation = StrCat("gang ", p.ns, "/", p.gang, " lost a member to preemption but ",
                              p.Key(), " still runs after a tick");
        return;
      }
    }
    r_.gang_followups += static_cast<int64_t>(broken_.size());
    broken_.clear();
  }

  // The head of a namespace's queue within its guarantee passes filter when
  // some node has room for it.
  // The first pending pod of each namespace, in queue order.
  std::map<std::string, PodRequest> Heads() {
    std::map<std::string, PodRequest> heads;
    for (PodRequest& p : Pods(true)) {
      auto it = heads.find(p.ns);
      if (it == heads.end() || Earlier(p, it->second)) heads[p.ns] = std::move(p);
    }
    return heads;
  }

  void CheckGuaranteeAdmits(const ClusterSnapshot& snap, const QuotaLedger& ledger) {
    auto fw = h_.service->framework();
    for (const auto& [ns, head] : Heads()) {
      if (!head.gang.empty()) continue;
      if (ledger.Usage(ns) + DemandMilli(head.gpu) > ledger.Guaranteed(ns)) continue;
      policy::PodContext ctx = fw->Prepare(head, snap);
      bool room = false;
      for (const auto& node : snap.nodes()) {
        if (policy::FitsWithDevices(*fw, ctx, *node) &&
            ledger.CheckModels(ns, snap.product(*node), DemandMilli(head.gpu)).empty()) {
          room = true;
          break;
        }
      }
      if (!room) continue;
      std::string reason;
      // Excepted: the room is on nodes a reclaim freed for another pod
      // (docs/queue.md: a hold made for a pod within its guarantee binds
      // pods within theirs too, so the freed GPUs are not taken first).
      if (h_.Filter(head, &reason).empty() &&
          reason.find(" by reclaim are held for ") == std::string::npos) {
        r_.violation = StrCat("head ", head.Key(), " within guarantee was refused: ", reason);
        return;
      }
    }
  }

  std::mt19937 rng_;
  Harness h_;
  std::vector<std::string>* decisions_;
  const bool topology_;
  SimulationResult r_;
  int64_t next_id_ = 0;
  bool ticked_ = false;
  std::deque<std::string> finished_;
  std::set<std::string> broken_;               // "ns/gang" that lost a member to preemption
  std::map<std::string, int64_t> prev_usage_;  // namespace or namespace/model -> milli
};

}  // namespace

SimulationResult RunSimulation(int64_t steps, uint32_t seed, bool from_scratch,
                               std::vector<std::string>* decisions, bool topology) {
  Simulation sim(seed, from_scratch, decisions, topology);
  return sim.Run(steps);
}

}  // namespace gpusched::queue::testing
