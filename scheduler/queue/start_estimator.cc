#include "scheduler/queue/start_estimator.h"

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"

namespace gpusched::queue {

using ::gpusched::StrCat;

namespace {

// The nodes as the simulation changed them, indexed by GPU product and
// number of wholly free devices, so a placement looks at the nodes with
// just enough room first instead of scanning every node.
class SimNodes {
 public:
  explicit SimNodes(const ClusterSnapshot& snapshot) : snapshot_(snapshot) {
    const auto& nodes = snapshot.nodes();
    changed_.resize(nodes.size());
    buckets_.resize(snapshot.products().size() + 1);
    free_.resize(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k) Index(k, *nodes[k]);
  }
  const NodeInfo& View(size_t k) const {
    return changed_[k] ? *changed_[k] : *snapshot_.nodes()[k];
  }
  void Set(size_t k, NodeInfo n) {
    Unindex(k);
    changed_[k] = std::make_unique<NodeInfo>(std::move(n));
    Index(k, *changed_[k]);
  }
  int64_t free_total() const { return free_total_; }
  // The first node (fewest free devices that are enough, then node order)
  // where `ctx`'s pod passes the filters and gets devices; SIZE_MAX if none.
  size_t Find(const policy::Framework& fw, const policy::PodContext& ctx) const {
    const int32_t need = std::max(1, ctx.pod->gpu.count);
    int budget = kMaxTries;
    for (int32_t f = need; f <= kMaxGpusPerNode; ++f) {
      for (size_t p = 0; p < buckets_.size(); ++p) {
        if (!ctx.ProductAllowed(static_cast<uint16_t>(p))) continue;
        if (buckets_[p].size() <= static_cast<size_t>(f)) continue;
        for (size_t k : buckets_[p][f]) {
          if (policy::FitsWithDevices(fw, ctx, View(k))) return k;
          if (--budget == 0) return SIZE_MAX;
        }
      }
    }
    return SIZE_MAX;
  }

 private:
  // Nodes whose filters refuse a pod tried per placement at most (a pod no
  // node takes must not cost every node at every step).
  static constexpr int kMaxTries = 256;
  static int32_t Free(const NodeInfo& n) {
    return static_cast<int32_t>(std::popcount(n.whole_free & n.healthy));
  }
  void Index(size_t k, const NodeInfo& n) {
    const int32_t f = Free(n);
    auto& per = buckets_[n.product_id];
    if (per.size() <= static_cast<size_t>(f)) per.resize(f + 1);
    per[f].insert(k);
    free_[k] = f;
    free_total_ += f;
  }
  void Unindex(size_t k) {
    const NodeInfo& n = View(k);
    buckets_[n.product_id][free_[k]].erase(k);
    free_total_ -= free_[k];
  }
  const ClusterSnapshot& snapshot_;
  std::vector<std::unique_ptr<NodeInfo>> changed_;
  std::vector<std::vector<std::set<size_t>>> buckets_;  // [product][free] -> nodes
  std::vector<int32_t> free_;
  int64_t free_total_ = 0;
};

// A pod that ends at `end_s` in the simulation.
struct End {
  int64_t end_s = 0;
  size_t node = 0;
  std::string uid;
  std::string ns;
  int64_t milli = 0;
  bool by_default = false;  // its runtime is the default (no estimate)
  bool operator>(const End& o) const { return end_s > o.end_s; }
};

// A pod running in the simulation, as guarantee reclaim sees it.
struct Running {
  size_t node = 0;
  std::string ns;
  int64_t milli = 0;
  int32_t priority = 0;
  int64_t start_s = 0;
  std::string gang;  // "ns/gang" of a gang member, "" for a single pod
};

class Simulation {
 public:
  explicit Simulation(const StartEstimatorInput& in)
      : in_(in), nodes_(*in.snapshot), ledger_(*in.ledger) {
    for (RoomCache& c : cache_) std::fill(std::begin(c.by_need_step), std::end(c.by_need_step), -1);
  }
  StartEstimates Run();

 private:
  struct Ref {
    size_t queue;
    size_t unit;
    uint32_t shape = 0;  // same namespace and shape: same id (ShapeKey)
  };
  void Init();
  void Order();
  void InitCohorts();
  void Step(int64_t t);
  bool TryStart(const EstimateUnit& unit, int64_t t);
  // Room taken for a head that no node has room for: by guarantee reclaim
  // (borrowers' pods) or by preemption (lower-priority pods).
  enum Rule { kReclaim = 0, kPreempt = 1 };
  struct Taker {
    Rule rule;
    const PodRequest* head;
    bool borrows;  // the head's unit would take its namespace above its guarantee
    // Reclaim on its cohort's loan (see the header): it takes only the pods
    // of borrowers outside its cohort.
    std::string loan_cohort;
  };
  // The pods a rule may take from as a step began (reclaim: of borrowing
  // namespaces; preemption: every pod), per node, cheapest first (lowest
  // priority, then newest). Made once per step; which of them a head may
  // take is decided when it asks (Usable).
  struct Victim {
    std::string uid;
    int32_t priority;
    int64_t start_s;
    int64_t milli;
  };
  using Victims = absl::flat_hash_map<size_t, std::vector<Victim>>;
  struct RoomCache {
    Victims victims;
    int32_t step = -1;
    // Per GPU count: the nodes with victims, fewest needed first.
    std::vector<std::pair<int32_t, size_t>> by_need[kMaxGpusPerNode + 1];
    int32_t by_need_step[kMaxGpusPerNode + 1];
  };
  struct Taken {  // a victim taken, with what undoes it
    std::string uid;
    size_t node;
    NodeInfo before;
    std::string ns, product;
    int64_t milli;
  };
  static constexpr size_t kReclaimNodes = 8;  // nodes tried per member
  int32_t TryTakeRoom(Rule rule, const EstimateUnit& unit, int64_t t, int32_t step);
  std::string LoanCohort(const std::string& ns, int64_t demand) const;
  const Victims& StepVictims(Rule rule, int32_t step);
  const Running* Usable(const Taker& tk, const std::string& uid) const;
  bool KeepsGuarantee(const Taker& tk, const Running& r, int64_t milli) const;
  std::vector<std::pair<int32_t, size_t>> RoomNodes(const Taker& tk, const policy::PodContext& ctx);
  bool TakeOnNode(const Taker& tk, size_t k, const policy::PodContext& ctx,
                  std::vector<Taken>* taken);
  // A victim and, if it is a gang member, the gang's other running members
  // (a gang is taken whole, as the planners evict it); its GPUs in all.
  std::vector<std::string> WithGang(const std::string& uid, const Running& r, int64_t* milli) const;
  void Take(const std::string& uid, std::vector<Taken>* taken);
  void Undo(std::vector<Taken>* taken, size_t keep);
  void AddRunning(const std::string& uid, Running r);
  void RemoveRunning(const std::string& uid);
  void EndUntil(int64_t t);
  bool TakeRoom(const EstimateUnit& unit, int64_t t, int32_t step);
  void Answer(const EstimateUnit& unit, int64_t start_s, std::string basis);
  std::string ShapeKey(const EstimateUnit& unit) const;
  // Cohort Backfill (see the header). What `r` (of a cohort's queue,
  // asking `demand`) would borrow, counting its queue's units not started
  // in this step before it; whether an earlier unit of its cohort holds it
  // back (`r` borrowing `over`); and the record of a unit that did not
  // start.
  int64_t WouldBorrow(const Ref& r, int64_t demand, int32_t step) const;
  bool CohortHeld(const Ref& r, int64_t over, int32_t step);
  void NoteNotStarted(const Ref& r, int64_t demand, int64_t over, int32_t step);
  // The GPU products `r`'s pod accepts, by product id (cached per shape).
  const std::vector<uint8_t>& Products(const Ref& r);
  static int64_t Demand(const EstimateUnit& unit);

  const StartEstimatorInput& in_;
  SimNodes nodes_;
  QuotaLedger ledger_;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends_;
  std::vector<Ref> waiting_;  // in order, not yet started
  int32_t ended_ = 0, ended_default_ = 0;
  std::vector<int32_t> failed_at_;   // per shape id: the step it last failed in
  std::vector<int32_t> blocked_at_;  // per queue: the step a strict queue was held back in
  std::vector<uint8_t> strict_;      // per queue
  std::vector<int32_t> head_at_;     // per queue: the step its head was tried in
  absl::flat_hash_map<std::string, Running> running_;  // by uid
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> running_by_ns_;
  absl::flat_hash_map<std::string, std::vector<std::string>> gang_running_;  // by Running::gang
  std::map<int32_t, int32_t> priorities_;      // of the running pods: how many of each
  absl::flat_hash_set<std::string> evicted_;   // taken for a head; their ends are void
  absl::flat_hash_set<std::string> evicting_;  // taken by the attempt being tried
  RoomCache cache_[2];                         // per Rule
  // Per cohort of Backfill namespaces: the most any of its units that did
  // not start in step `borrow_at` would borrow, and the products accepted
  // by its units that did not start in step `products_at`.
  struct Cohort {
    int32_t borrow_at = -1;
    int64_t borrow_most = 0;
    int32_t products_at = -1;
    std::vector<uint8_t> products;
  };
  std::vector<Cohort> cohorts_;
  std::vector<int32_t> cohort_of_;       // per queue: its cohort, -1 if none
  std::vector<int64_t> not_started_;     // per queue: demand of its units not started ...
  std::vector<int32_t> not_started_at_;  // ... in this step
  std::vector<std::vector<uint8_t>> shape_products_;  // per shape id (empty: not made yet)
  StartEstimates out_;
};

void Simulation::Init() {
  const auto& nodes = in_.snapshot->nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    std::vector<std::string> holders;
    for (const PodOnNode& p : nodes[k]->pods) {
      if (p.reservation) holders.push_back(p.uid);
      if (p.reservation || p.gpus == 0) continue;
      const int64_t est = in_.running_seconds ? in_.running_seconds(p) : 0;
      const int64_t run = est > 0 ? est : in_.default_runtime_s;
      const int64_t start = p.start_unix > 0 ? std::min(p.start_unix, in_.now_s) : in_.now_s;
      int64_t end = start + run;
      if (end <= in_.now_s) end = in_.now_s + std::max<int64_t>(60, run / 4);  // overrun
      ends_.push({end, k, p.uid, p.ns, int64_t{p.gpus} * p.milli_per_gpu, est <= 0});
      AddRunning(p.uid, {k, p.ns, int64_t{p.gpus} * p.milli_per_gpu, p.priority, start,
                         p.gang.empty() ? "" : StrCat(p.ns, "/", p.gang)});
      out_.running_end[p.uid] = end;
    }
    if (!holders.empty()) nodes_.Set(k, policy::WithoutPods(nodes_.View(k), holders));
  }
}

// Queue order across namespaces: each namespace's own order, merged by the
// units' priority (higher first) and creation time.
void Simulation::Order() {
  auto key = [&](const Ref& r) {
    const PodRequest& p = *in_.queues[r.queue].units[r.unit].members.front();
    return std::make_tuple(-int64_t{p.priority}, p.creation_unix, r.queue);
  };
  auto later = [&](const Ref& a, const Ref& b) { return key(a) > key(b); };
  std::priority_queue<Ref, std::vector<Ref>, decltype(later)> heads(later);
  for (size_t q = 0; q < in_.queues.size(); ++q) {
    if (!in_.queues[q].units.empty()) heads.push({q, 0});
  }
  absl::flat_hash_map<std::string, uint32_t> shapes;
  while (!heads.empty()) {
    Ref r = heads.top();
    heads.pop();
    const std::string key =
        StrCat(in_.queues[r.queue].ns, "|", ShapeKey(in_.queues[r.queue].units[r.unit]));
    r.shape = shapes.try_emplace(key, static_cast<uint32_t>(shapes.size())).first->second;
    waiting_.push_back(r);
    if (r.unit + 1 < in_.queues[r.queue].units.size()) heads.push({r.queue, r.unit + 1});
  }
  failed_at_.assign(shapes.size(), -1);
  blocked_at_.assign(in_.queues.size(), -1);
  head_at_.assign(in_.queues.size(), -1);
  strict_.resize(in_.queues.size());
  for (size_t q = 0; q < in_.queues.size(); ++q) {
    // Backfill is simulated as StrictFIFO: what it lets pass ends before
    // the earlier units' estimated starts, so their estimates stand.
    // Without quotas the queue holds nobody back (QueueManager's rules are off).
    strict_[q] = ledger_.enabled() &&
                 ledger_.Quota(in_.queues[q].ns).queueing != QueueingStrategy::kBestEffortFifo;
  }
  for (size_t i = 0; i < waiting_.size(); ++i) {
    for (const auto& m : in_.queues[waiting_[i].queue].units[waiting_[i].unit].members) {
      out_.by_uid[m->uid].order = static_cast<int64_t>(i);
    }
  }
  InitCohorts();
}

void Simulation::InitCohorts() {
  cohort_of_.assign(in_.queues.size(), -1);
  not_started_.assign(in_.queues.size(), 0);
  not_started_at_.assign(in_.queues.size(), -1);
  if (!ledger_.enabled()) return;
  std::map<std::string, int32_t> ids;
  for (size_t q = 0; q < in_.queues.size(); ++q) {
    const NamespaceQuota& quota = ledger_.Quota(in_.queues[q].ns);
    if (quota.cohort.empty() || quota.queueing != QueueingStrategy::kBackfill) continue;
    cohort_of_[q] = ids.try_emplace(quota.cohort, static_cast<int32_t>(ids.size())).first->second;
  }
  cohorts_.resize(ids.size());
}

int64_t Simulation::Demand(const EstimateUnit& unit) {
  int64_t demand = 0;
  for (const auto& m : unit.members) demand += DemandMilli(m->gpu);
  return demand;
}

int64_t Simulation::WouldBorrow(const Ref& r, int64_t demand, int32_t step) const {
  const int64_t before = not_started_at_[r.queue] == step ? not_started_[r.queue] : 0;
  return ledger_.WouldBorrow(in_.queues[r.queue].ns, before, demand);
}

const std::vector<uint8_t>& Simulation::Products(const Ref& r) {
  if (shape_products_.size() <= r.shape) shape_products_.resize(r.shape + 1);
  std::vector<uint8_t>& products = shape_products_[r.shape];
  if (products.empty()) {
    const PodRequest& pod = *in_.queues[r.queue].units[r.unit].members.front();
    const policy::PodContext ctx = in_.fw->Prepare(pod, *in_.snapshot);
    products.resize(in_.snapshot->products().size() + 1);
    for (size_t p = 0; p < products.size(); ++p) {
      products[p] = ctx.ProductAllowed(static_cast<uint16_t>(p)) ? 1 : 0;
    }
  }
  return products;
}

bool Simulation::CohortHeld(const Ref& r, int64_t over, int32_t step) {
  const Cohort& c = cohorts_[cohort_of_[r.queue]];
  // Both borrow more than the idle GPUs r may borrow: held on every node.
  if (c.borrow_at == step && c.borrow_most + over > ledger_.Lendable(in_.queues[r.queue].ns)) {
    return true;
  }
  if (c.products_at != step) return false;
  const std::vector<uint8_t>& mine = Products(r);
  for (size_t p = 0; p < mine.size(); ++p) {
    if (mine[p] != 0 && c.products[p] != 0) return true;
  }
  return false;
}

void Simulation::NoteNotStarted(const Ref& r, int64_t demand, int64_t over, int32_t step) {
  if (not_started_at_[r.queue] != step) {
    not_started_at_[r.queue] = step;
    not_started_[r.queue] = 0;
  }
  not_started_[r.queue] += demand;
  Cohort& c = cohorts_[cohort_of_[r.queue]];
  if (over > 0) {
    if (c.borrow_at != step) c.borrow_most = 0;
    c.borrow_at = step;
    c.borrow_most = std::max(c.borrow_most, over);
  }
  const std::vector<uint8_t>& mine = Products(r);
  if (c.products_at != step) {
    c.products_at = step;
    c.products.assign(mine.size(), 0);
  }
  for (size_t p = 0; p < mine.size(); ++p) c.products[p] |= mine[p];
}

std::string Simulation::ShapeKey(const EstimateUnit& unit) const {
  const PodRequest& p = *unit.members.front();
  std::string models;
  for (const std::string& m : p.gpu.models) StrAppend(&models, m, ",");
  return StrCat(unit.members.size(), "/", p.gpu.count, "/", p.gpu.milli_per_gpu, "/",
                p.gpu.min_memory_mib, "/", static_cast<int>(p.gpu.topology), "/", models, "/",
                p.cpu_milli, "/", p.memory_mib);
}

bool Simulation::TryStart(const EstimateUnit& unit, int64_t t) {
  const std::string& ns = unit.members.front()->ns;
  int64_t demand = 0;
  for (const auto& m : unit.members) demand += DemandMilli(m->gpu);
  if (ledger_.enabled() && !ledger_.Check(ns, demand).ok) return false;
  std::vector<std::pair<size_t, NodeInfo>> saved;  // to undo a gang that does not fit whole
  std::vector<End> started;
  const int64_t run = unit.runtime.known() ? unit.runtime.seconds : in_.default_runtime_s;
  for (const auto& member : unit.members) {
    const PodRequest& m = *member;
    const policy::PodContext ctx = in_.fw->Prepare(m, *in_.snapshot);
    const size_t k = nodes_.Find(*in_.fw, ctx);
    const std::string* product = k == SIZE_MAX ? nullptr : &in_.snapshot->product(nodes_.View(k));
    const int64_t milli = DemandMilli(m.gpu);
    if (product == nullptr || !ledger_.CheckModels(ns, *product, milli).empty()) {
      for (auto it = saved.rbegin(); it != saved.rend(); ++it) nodes_.Set(it->first, it->second);
      for (const End& e : started) {
        ledger_.Add(ns, in_.snapshot->product(nodes_.View(e.node)), -e.milli);
      }
      return false;
    }
    const NodeInfo& n = nodes_.View(k);
    auto placement = policy::ChoosePlacement(m.gpu, n);
    NodeInfo next = policy::WithPod(n, m, placement->devices);
    next.pods.back().uid = m.uid;
    saved.emplace_back(k, n);
    nodes_.Set(k, std::move(next));
    ledger_.Add(ns, *product, milli);
    started.push_back({t + run, k, m.uid, ns, milli, !unit.runtime.known()});
  }
  const std::string& gang = unit.members.front()->gang;
  for (End& e : started) {
    AddRunning(e.uid, {e.node, ns, e.milli, unit.members.front()->priority, t,
                       gang.empty() ? "" : StrCat(ns, "/", gang)});
    ends_.push(std::move(e));
  }
  return true;
}

void Simulation::AddRunning(const std::string& uid, Running r) {
  running_by_ns_[r.ns].insert(uid);
  ++priorities_[r.priority];
  if (!r.gang.empty()) gang_running_[r.gang].push_back(uid);
  running_[uid] = std::move(r);
}

void Simulation::RemoveRunning(const std::string& uid) {
  auto it = running_.find(uid);
  if (it == running_.end()) return;
  if (auto g = gang_running_.find(it->second.gang); g != gang_running_.end()) {
    std::erase(g->second, uid);
    if (g->second.empty()) gang_running_.erase(g);
  }
  running_by_ns_[it->second.ns].erase(uid);
  if (auto p = priorities_.find(it->second.priority); --p->second == 0) priorities_.erase(p);
  running_.erase(it);
}

// The pods `rule` may take from as step `step` began, per node, cheapest
// first (see Victims).
const Simulation::Victims& Simulation::StepVictims(Rule rule, int32_t step) {
  RoomCache& c = cache_[rule];
  if (c.step == step) return c.victims;
  c.step = step;
  c.victims.clear();
  for (const auto& [ns, uids] : running_by_ns_) {
    if (rule == kReclaim && ledger_.Usage(ns) <= ledger_.Guaranteed(ns)) continue;
    for (const std::string& uid : uids) {
      const Running& r = running_.at(uid);
      c.victims[r.node].push_back({uid, r.priority, r.start_s, r.milli});
    }
  }
  for (auto& [node, list] : c.victims) {
    std::sort(list.begin(), list.end(), [](const Victim& x, const Victim& y) {
      return std::tie(x.priority, y.start_s, x.uid) < std::tie(y.priority, x.start_s, y.uid);
    });
  }
  return c.victims;
}

// The pod `uid` if `tk` may take it now: still running and not already
// taken; for reclaim, of another namespace that borrows now (and of lower
// priority when so configured); for preemption, of lower priority, and of a
// borrowing namespace when it is another's and the head would borrow.
const Running* Simulation::Usable(const Taker& tk, const std::string& uid) const {
  auto it = running_.find(uid);
  if (it == running_.end() || evicting_.contains(uid)) return nullptr;
  const Running& r = it->second;
  const bool other = r.ns != tk.head->ns;
  const bool borrowing = ledger_.Usage(r.ns) > ledger_.Guaranteed(r.ns);
  if (tk.rule == kReclaim) {
    if (!other || !borrowing) return nullptr;
    if (!tk.loan_cohort.empty() && ledger_.Quota(r.ns).cohort == tk.loan_cohort) return nullptr;
    if (in_.reclaim_lower_priority_only && r.priority >= tk.head->priority) return nullptr;
    return &r;
  }
  if (r.priority >= tk.head->priority || (other && tk.borrows && !borrowing)) return nullptr;
  return &r;
}

// Whether taking `milli` of `r`'s namespace leaves it at or above its
// guarantee where the rule requires it: always for reclaim; for
// preemption, when the pod is another namespace's and the head would only
// borrow.
bool Simulation::KeepsGuarantee(const Taker& tk, const Running& r, int64_t milli) const {
  if (tk.rule == kPreempt && (r.ns == tk.head->ns || !tk.borrows)) return true;
  return ledger_.Usage(r.ns) - milli >= ledger_.Guaranteed(r.ns);
}

std::vector<std::string> Simulation::WithGang(const std::string& uid, const Running& r,
                                              int64_t* milli) const {
  std::vector<std::string> out{uid};
  *milli = r.milli;
  auto g = gang_running_.find(r.gang);
  if (r.gang.empty() || g == gang_running_.end()) return out;
  for (const std::string& m : g->second) {
    if (m == uid || evicting_.contains(m)) continue;
    out.push_back(m);
    *milli += running_.at(m).milli;
  }
  return out;
}

void Simulation::Take(const std::string& uid, std::vector<Taken>* taken) {
  const Running& r = running_.at(uid);
  const NodeInfo& n = nodes_.View(r.node);
  taken->push_back({uid, r.node, n, r.ns, in_.snapshot->product(n), r.milli});
  evicting_.insert(uid);
  nodes_.Set(r.node, policy::WithoutPods(n, {uid}));
  ledger_.Add(taken->back().ns, taken->back().product, -taken->back().milli);
}

// How many of `victims` (in order) must go before node `n` has `need`
// whole GPUs, counting only those `usable` accepts; -1 if they never make
// it.
template <typename Victim, typename Accept>
int32_t VictimsNeeded(const NodeInfo& n, int32_t need, const std::vector<Victim>& victims,
                      Accept usable) {
  int32_t room = static_cast<int32_t>(std::popcount(n.whole_free & n.healthy)), count = 0;
  for (const Victim& v : victims) {
    if (room >= need) break;
    if (usable(v)) {
      room += static_cast<int32_t>(v.milli / 1000);
      ++count;
    }
  }
  return room >= need && count > 0 ? count : -1;
}

// The nodes where taking victims could make room for `ctx`'s pod, fewest
// victims needed first (counting whole GPUs; devices are checked when they
// are taken), at most kReclaimNodes of them. Nodes are looked at in the
// order made once per step and GPU count (victims needed by anyone), so a
// head looks at a few nodes, not every node.
std::vector<std::pair<int32_t, size_t>> Simulation::RoomNodes(const Taker& tk,
                                                              const policy::PodContext& ctx) {
  RoomCache& c = cache_[tk.rule];
  const int32_t need = std::clamp(ctx.pod->gpu.count, 1, kMaxGpusPerNode);
  std::vector<std::pair<int32_t, size_t>>& order = c.by_need[need];
  if (c.by_need_step[need] != c.step) {
    c.by_need_step[need] = c.step;
    order.clear();
    for (const auto& [k, list] : c.victims) {
      const int32_t count =
          VictimsNeeded(nodes_.View(k), need, list, [](const Victim&) { return true; });
      if (count > 0) order.emplace_back(count, k);
    }
    std::sort(order.begin(), order.end());
  }
  std::vector<std::pair<int32_t, size_t>> out;  // (victims needed by this pod, node)
  size_t looked = 0;
  for (const auto& [any, k] : order) {
    if (out.size() >= kReclaimNodes || ++looked > 4 * kReclaimNodes) break;
    const NodeInfo& n = nodes_.View(k);
    if (!ctx.ProductAllowed(n.product_id)) continue;
    const int32_t count = VictimsNeeded(
        n, need, c.victims.at(k), [&](const Victim& v) { return Usable(tk, v.uid) != nullptr; });
    if (count > 0) out.emplace_back(count, k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Takes victims on node `k`, cheapest first and within the rule's
// guarantee floor, until `ctx`'s pod fits there; false (and nothing taken)
// if it never does.
bool Simulation::TakeOnNode(const Taker& tk, size_t k, const policy::PodContext& ctx,
                            std::vector<Taken>* taken) {
  const size_t before = taken->size();
  for (const Victim& v : cache_[tk.rule].victims.at(k)) {
    const std::string& uid = v.uid;
    const Running* r = Usable(tk, uid);
    if (r == nullptr) continue;
    int64_t milli = 0;
    const std::vector<std::string> uids = WithGang(uid, *r, &milli);
    if (!KeepsGuarantee(tk, *r, milli)) continue;
    for (const std::string& u : uids) Take(u, taken);
    if (policy::FitsWithDevices(*in_.fw, ctx, nodes_.View(k))) return true;
  }
  Undo(taken, before);
  return false;
}

void Simulation::Undo(std::vector<Taken>* taken, size_t keep) {
  while (taken->size() > keep) {
    Taken& v = taken->back();
    nodes_.Set(v.node, std::move(v.before));
    ledger_.Add(v.ns, v.product, v.milli);
    evicting_.erase(v.uid);
    taken->pop_back();
  }
}

// Room for a namespace's head that no node has room for, by guarantee
// reclaim or by preemption (see the header): for each member without room,
// the victims of the node that needs the fewest are taken, then the unit
// starts reclaim_delay_s later; all undone if it still does not. Returns the
// pods taken (0: no start).
int32_t Simulation::TryTakeRoom(Rule rule, const EstimateUnit& unit, int64_t t, int32_t step) {
  const PodRequest& head = *unit.members.front();
  int64_t demand = 0;
  for (const auto& m : unit.members) demand += DemandMilli(m->gpu);
  const bool borrows =
      ledger_.enabled() && ledger_.Usage(head.ns) + demand > ledger_.Guaranteed(head.ns);
  const Taker tk{rule, &head, borrows,
                 rule == kReclaim && borrows ? LoanCohort(head.ns, demand) : std::string()};
  const bool allowed =
      rule == kReclaim ? in_.reclaim && ledger_.enabled() && (!borrows || !tk.loan_cohort.empty())
                       : in_.preempt && !head.preempt_never;
  // Preemption needs a pod of lower priority: none runs, nothing to look at.
  if (rule == kPreempt && (priorities_.empty() || priorities_.begin()->first >= head.priority)) {
    return 0;
  }
  if (!allowed || StepVictims(rule, step).empty()) return 0;
  std::vector<Taken> taken;
  for (const auto& member : unit.members) {
    const policy::PodContext ctx = in_.fw->Prepare(*member, *in_.snapshot);
    if (nodes_.Find(*in_.fw, ctx) != SIZE_MAX) continue;  // room as it is
    bool made = false;
    for (const auto& [count, k] : RoomNodes(tk, ctx)) {
      if ((made = TakeOnNode(tk, k, ctx, &taken))) break;
    }
    if (!made) break;
  }
  if (taken.empty() || !TryStart(unit, t + in_.reclaim_delay_s)) {
    Undo(&taken, 0);
    return 0;
  }
  for (const Taken& v : taken) {
    evicting_.erase(v.uid);
    evicted_.insert(v.uid);
    RemoveRunning(v.uid);
  }
  return static_cast<int32_t>(taken.size());
}

// The cohort whose loan lets ns's head (asking `demand`, which borrows)
// reclaim: ns's own, when the demand stays within ns's limit and what it
// borrows within what the cohort's other members lend; "" if none.
std::string Simulation::LoanCohort(const std::string& ns, int64_t demand) const {
  const std::string& cohort = ledger_.Quota(ns).cohort;
  const int64_t after = ledger_.Usage(ns) + demand;
  if (cohort.empty() || after > ledger_.Limit(ns)) return "";
  return after - ledger_.Guaranteed(ns) <= ledger_.CohortLendable(ns) ? cohort : "";
}

// Guarantee reclaim (or a cohort's loan), else preemption, for the head
// `unit`; true (and answered) if it starts by either.
bool Simulation::TakeRoom(const EstimateUnit& unit, int64_t t, int32_t step) {
  if (const int32_t taken = TryTakeRoom(kReclaim, unit, t, step); taken > 0) {
    const std::string& ns = unit.members.front()->ns;
    const std::string pods = StrCat(taken, " borrowed pod", taken == 1 ? "" : "s");
    // The unit has started: it was a cohort's loan if its namespace is now
    // above its guarantee.
    const bool loan = ledger_.Usage(ns) > ledger_.Guaranteed(ns);
    Answer(unit, t + in_.reclaim_delay_s,
           loan ? StrCat("after cohort ", ledger_.Quota(ns).cohort, "'s loan reclaims ", pods,
                         " outside it for it")
                : StrCat("after guarantee reclaim takes ", pods, " for it"));
    return true;
  }
  if (const int32_t taken = TryTakeRoom(kPreempt, unit, t, step); taken > 0) {
    Answer(unit, t + in_.reclaim_delay_s,
           StrCat("after preempting ", taken, " lower-priority pod", taken == 1 ? "" : "s",
                  " for it"));
    return true;
  }
  return false;
}

void Simulation::Answer(const EstimateUnit& unit, int64_t start_s, std::string basis) {
  for (const auto& m : unit.members) {
    StartEstimate& e = out_.by_uid[m->uid];
    e.start_s = start_s;
    e.basis = basis;
  }
}

void Simulation::Step(int64_t t) {
  const int32_t step = out_.steps++;
  std::vector<Ref> still;
  still.reserve(waiting_.size());
  for (const Ref& r : waiting_) {
    if (in_.yield != nullptr) in_.yield->Pass();
    const EstimateUnit& unit = in_.queues[r.queue].units[r.unit];
    const bool head = head_at_[r.queue] != step;
    head_at_[r.queue] = step;
    bool started = false;
    const bool cohort = cohort_of_[r.queue] >= 0;
    const int64_t demand = cohort ? Demand(unit) : 0;
    const int64_t over = cohort ? WouldBorrow(r, demand, step) : 0;
    const bool held = blocked_at_[r.queue] == step || (over > 0 && CohortHeld(r, over, step));
    // Capacity only shrinks within a step and quota is per namespace: a unit
    // of the same namespace and shape as one that failed fails too.
    if (nodes_.free_total() > 0 && !held && failed_at_[r.shape] != step) {
      started = TryStart(unit, t);
      if (!started) failed_at_[r.shape] = step;
    }
    if (!started && head && !held && TakeRoom(unit, t, step)) continue;
    if (started) {
      Answer(unit, t,
             t == in_.now_s ? std::string("now")
                            : StrCat("when ", ended_, " running or earlier pods end (",
                                     ended_default_, " of them on the default runtime ",
                                     FormatRuntime(in_.default_runtime_s), ")"));
      continue;
    }
    if (strict_[r.queue]) blocked_at_[r.queue] = step;
    if (cohort) NoteNotStarted(r, demand, over, step);
    still.push_back(r);
  }
  waiting_ = std::move(still);
}

void Simulation::EndUntil(int64_t t) {
  while (!ends_.empty() && ends_.top().end_s <= t) {
    End e = ends_.top();
    ends_.pop();
    if (evicted_.erase(e.uid) > 0) continue;  // reclaimed before its end
    RemoveRunning(e.uid);
    nodes_.Set(e.node, policy::WithoutPods(nodes_.View(e.node), {e.uid}));
    ledger_.Add(e.ns, in_.snapshot->product(nodes_.View(e.node)), -e.milli);
    ++ended_;
    if (e.by_default) ++ended_default_;
  }
}

StartEstimates Simulation::Run() {
  out_.made_at_s = in_.now_s;
  Init();
  Order();
  int64_t t = in_.now_s;
  std::string why;
  while (!waiting_.empty()) {
    Step(t);
    if (waiting_.empty()) break;
    if (ends_.empty()) {
      why = "no estimate: it does not fit even when every running pod has ended";
      break;
    }
    t = ends_.top().end_s;
    if (t - in_.now_s > in_.horizon_s) {
      why = StrCat("no estimate: not within ", FormatRuntime(in_.horizon_s), " of simulated time");
      break;
    }
    if (in_.deadline && std::chrono::steady_clock::now() > *in_.deadline) {
      out_.truncated = true;
      why = "no estimate: the estimate's time budget ran out before it";
      break;
    }
    // Ends within one step of t are taken as at t: steps are at least
    // max(1 min, 1 % of the time simulated) apart, and an estimate is early
    // by at most that.
    const auto share = static_cast<int64_t>(in_.step_share * static_cast<double>(t - in_.now_s));
    EndUntil(t + std::max(in_.min_step_s, share));
  }
  for (const Ref& r : waiting_) Answer(in_.queues[r.queue].units[r.unit], -1, why);
  return std::move(out_);
}

}  // namespace

StartEstimates EstimateStarts(const StartEstimatorInput& in) {
  if (in.snapshot == nullptr || in.fw == nullptr || in.ledger == nullptr) return {};
  Simulation sim(in);
  return sim.Run();
}

}  // namespace gpusched::queue
