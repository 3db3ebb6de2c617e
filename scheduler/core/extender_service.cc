#include "gpusched/core/extender_service.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"

namespace gpusched {
namespace {

// How many nodes ahead the verbs' loops prefetch packed node fields.
constexpr int32_t kPrefetchAhead = 8;
// An index for a position whose name an earlier position already names.
constexpr int32_t kRepeated = -2;

// a[0, n) == b[0, n), eight bytes at a time: node names are short, and a
// call to memcmp per name would cost more than the comparison.
bool SameBytes(const char* a, const char* b, size_t n) {
  for (; n >= 8; a += 8, b += 8, n -= 8) {
    uint64_t x, y;
    std::memcpy(&x, a, 8);
    std::memcpy(&y, b, 8);
    if (x != y) return false;
  }
  for (; n > 0; ++a, ++b, --n) {
    if (*a != *b) return false;
  }
  return true;
}

// The last node-name list one thread resolved, with its answer.
// kube-scheduler sends the same list cycle after cycle (the simulator the
// very same one), so a list equal to it on the same node set is answered by
// comparing names, without a hash lookup per name.
class LastNames {
 public:
  bool Matches(const ClusterSnapshot& snapshot, const std::vector<std::string_view>& names) const {
    if (node_set_.get() != snapshot.node_set_identity() || sizes_.size() != names.size()) {
      return false;
    }
    if (names.empty()) return true;
    // A decoder keeps a list's names one after another with a fixed gap: the
    // lengths and the gap are compared first, then the whole span at once.
    if (gap_ >= 0 && SameLayout(names, gap_)) {
      return std::memcmp(span_.data(), names.front().data(), span_.size()) == 0;
    }
    uint32_t begin = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      if (sizes_[i] != names[i].size() ||
          !SameBytes(arena_.data() + begin, names[i].data(), sizes_[i])) {
        return false;
      }
      begin += sizes_[i];
    }
    return true;
  }
  void Remember(const ClusterSnapshot& snapshot, const std::vector<std::string_view>& names,
                std::vector<int32_t> answer) {
    node_set_ = snapshot.node_set();
    arena_.clear();
    sizes_.clear();
    for (std::string_view n : names) {
      arena_.append(n);
      sizes_.push_back(static_cast<uint32_t>(n.size()));
    }
    gap_ = -1;
    span_.clear();
    if (names.size() >= 2) {
      const std::ptrdiff_t gap = names[1].data() - (names[0].data() + names[0].size());
      if (gap >= 0 && gap <= kMaxGap && SameLayout(names, gap)) {
        gap_ = gap;
        span_.assign(names.front().data(), names.back().data() + names.back().size());
      }
    }
    indices_ = std::move(answer);
  }
  const std::vector<int32_t>& indices() const { return indices_; }

 private:
  static constexpr std::ptrdiff_t kMaxGap = 64;
  // Whether names[i] has the remembered length and starts `gap` bytes after
  // names[i-1] ends, for every i.
  bool SameLayout(const std::vector<std::string_view>& names, std::ptrdiff_t gap) const {
    const char* next = names.front().data();
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i].data() != next || names[i].size() != sizes_[i]) return false;
      next = names[i].data() + names[i].size() + gap;
    }
    return true;
  }

  std::shared_ptr<const void> node_set_;  // ClusterSnapshot::node_set()
  std::string arena_;                     // the names, one after another
  std::vector<uint32_t> sizes_;           // each name's length
  std::ptrdiff_t gap_ = -1;               // bytes between names in the request; -1: none
  std::string span_;                      // first name to last, gaps included
  std::vector<int32_t> indices_;
};

std::vector<int32_t> ResolveNames(const ClusterSnapshot& snapshot,
                                  const std::vector<std::string_view>& names);

// Whose list a thread's memory of names is: the filter's and prioritize's
// are kept apart. Prioritize names the filter's survivors, a list of its
// own (the same from cycle to cycle while pods of one shape find the same
// nodes free), which would otherwise replace the filter's every cycle.
enum class NameListUse { kFilter, kPrioritize };

// ResolveNames, remembered per thread and use for the next request's list.
// The answer is the thread's memory: valid until its next call.
const std::vector<int32_t>& IndicesOnce(const ClusterSnapshot& snapshot,
                                        const std::vector<std::string_view>& names,
                                        NameListUse use) {
  thread_local LastNames filter_last, prioritize_last;
  LastNames& last = use == NameListUse::kFilter ? filter_last : prioritize_last;
  if (!last.Matches(snapshot, names)) last.Remember(snapshot, names, ResolveNames(snapshot, names));
  return last.indices();
}

// The request's node indices: resolved in advance by an in-process caller
// for this node set, or by IndicesOnce.
const std::vector<int32_t>& IndicesFor(const ExtenderArgs& args, const ClusterSnapshot& snapshot,
                                       NameListUse use) {
  const bool prepared = args.resolved != nullptr &&
                        args.resolved->node_set.get() == snapshot.node_set_identity() &&
                        args.resolved->indices.size() == args.node_names.size();
  return prepared ? args.resolved->indices : IndicesOnce(snapshot, args.node_names, use);
}

// The node index of every name (-1: not in the view), and kRepeated where
// an earlier position names the same node: a bit per node, plus a set of
// the unknown names only when there are two of them.
std::vector<int32_t> ResolveNames(const ClusterSnapshot& snapshot,
                                  const std::vector<std::string_view>& names) {
  std::vector<int32_t> indices;
  snapshot.FindIndices(names, &indices);
  std::vector<uint64_t> seen((snapshot.nodes().size() + 63) / 64, 0);
  std::optional<absl::flat_hash_set<std::string_view>> unknown;
  size_t unknowns = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    const int32_t idx = indices[i];
    if (idx < 0) {
      if (++unknowns < 2) continue;
      if (!unknown) {
        unknown.emplace();
        for (size_t j = 0; j < i; ++j) {
          if (indices[j] == -1) unknown->insert(names[j]);
        }
      }
      if (!unknown->insert(names[i]).second) indices[i] = kRepeated;
      continue;
    }
    uint64_t& word = seen[static_cast<size_t>(idx) / 64];
    const uint64_t bit = uint64_t{1} << (idx % 64);
    if (word & bit) indices[i] = kRepeated;
    word |= bit;
  }
  return indices;
}

}  // namespace

ExtenderService::ExtenderService(ClusterState* state,
                                 std::shared_ptr<const policy::Framework> framework)
    : state_(state), framework_(std::move(framework)) {}

void ExtenderService::SetFramework(std::shared_ptr<const policy::Framework> framework) {
  absl::MutexLock l(&mu_);
  framework_ = std::move(framework);
}

std::shared_ptr<const policy::Framework> ExtenderService::framework() const {
  absl::MutexLock l(&mu_);
  return framework_;
}

void ExtenderService::SetGate(PodGate* gate) { gate_ = gate; }

std::shared_ptr<const ResolvedNodeNames> ExtenderService::Resolve(
    const std::vector<std::string_view>& names) const {
  auto snapshot = state_->Snapshot();
  auto out = std::make_shared<ResolvedNodeNames>();
  out->node_set = snapshot->node_set();
  out->indices = ResolveNames(*snapshot, names);
  return out;
}

namespace {

// Filter's steps. Filter reads one cluster snapshot, resolves the request's
// names once (node indices) and calls the gate once; every step below works
// on indices and the gate's answer.

// Every node of the request passes (a pod asking for no GPU).
void PassAll(const std::vector<int32_t>& indices, FilterOutcome* out) {
  out->passed.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] != kRepeated) out->passed.push_back(static_cast<int32_t>(i));
  }
}

// Every node fails with `reason` (the gate holds the pod back: freeing GPUs
// does not help, but FailedNodes keeps kube-scheduler retrying on cluster
// events until the queue admits it).
void FailAll(const std::vector<int32_t>& indices, std::string reason, FilterOutcome* out) {
  const int32_t r = out->AddReason(std::move(reason));
  out->failed.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] != kRepeated) out->failed.push_back({static_cast<int32_t>(i), r});
  }
}

// A gang member whose devices are reserved: only the reserved node passes.
void OnlyReserved(const std::vector<int32_t>& indices, int32_t reserved, std::string reason,
                  FilterOutcome* out) {
  int32_t r = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    const int32_t idx = indices[i];
    if (idx == kRepeated) continue;
    if (idx >= 0 && idx == reserved) {
      out->passed.push_back(static_cast<int32_t>(i));
      continue;
    }
    if (r < 0) r = out->AddReason(reason);
    out->failed.push_back({static_cast<int32_t>(i), r});
  }
}

constexpr int32_t kNotYet = -2, kAdmits = -1;

// What the gate's admission says about single nodes, as reason indices of
// the outcome: nodes held for another pod, products the pod may not use.
class NodeGuards {
 public:
  NodeGuards(Admission& admission, const ClusterSnapshot& snapshot, FilterOutcome* out) {
    for (const std::shared_ptr<const HeldNodeList>& list : admission.held_nodes) {
      for (const auto& [name, why] : *list) {
        const int32_t idx = snapshot.FindIndex(name);
        if (idx >= 0) held_.emplace_back(idx, out->AddReason(why));
      }
    }
    std::sort(held_.begin(), held_.end());
    product_.reserve(admission.product_refusals.size());
    for (std::string& why : admission.product_refusals) {
      product_.push_back(why.empty() ? kAdmits : out->AddReason(std::move(why)));
    }
  }
  // kAdmits, or the reason index node `idx` fails with.
  int32_t For(int32_t idx, const NodeHot& hot) const {
    if (!held_.empty()) {
      auto h = std::lower_bound(held_.begin(), held_.end(), std::make_pair(idx, INT32_MIN));
      if (h != held_.end() && h->first == idx) return h->second;
    }
    return hot.product_id < product_.size() ? product_[hot.product_id] : kAdmits;
  }

 private:
  std::vector<std::pair<int32_t, int32_t>> held_;  // (node index, reason), sorted
  std::vector<int32_t> product_;                   // per product id
};

// The policy filter over every resolved node, then the gate's guards.
// Reason indices are made once per distinct reason (per memo entry, and
// for unknown nodes).
void FilterNodes(const std::vector<int32_t>& indices, const ClusterSnapshot& snapshot,
                 policy::FilterMemo& memo, const NodeGuards& guards, FilterOutcome* out) {
  const int32_t n = static_cast<int32_t>(indices.size());
  std::vector<int32_t> entry_reason;
  int32_t unknown_reason = kNotYet;
  out->passed.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n && indices[i + kPrefetchAhead] >= 0) {
      snapshot.PrefetchHot(indices[i + kPrefetchAhead]);
    }
    const int32_t idx = indices[i];
    if (idx == kRepeated) continue;
    if (idx < 0) {
      if (unknown_reason == kNotYet) {
        unknown_reason = out->AddReason("gpusched: node is not in gpusched's cluster view");
      }
      out->unresolvable.push_back({i, unknown_reason});
      continue;
    }
    const NodeHot& hot = snapshot.hot(idx);
    const policy::FilterMemo::Entry e = memo.FilterEntry(hot);
    if (e.result->fits()) {
      const int32_t guard = guards.For(idx, hot);
      if (guard == kAdmits) {
        out->passed.push_back(i);
      } else {
        out->failed.push_back({i, guard});
      }
      continue;
    }
    int32_t r;
    if (e.id < 0) {
      r = out->AddReason(e.result->reason);
    } else {
      if (static_cast<size_t>(e.id) >= entry_reason.size()) entry_reason.resize(e.id + 1, kNotYet);
      r = entry_reason[e.id];
      if (r == kNotYet) r = entry_reason[e.id] = out->AddReason(e.result->reason);
    }
    if (e.result->verdict == policy::Verdict::kUnresolvable) {
      out->unresolvable.push_back({i, r});
    } else {
      out->failed.push_back({i, r});
    }
  }
}

}  // namespace

FilterOutcome ExtenderService::Filter(const ExtenderArgs& args) const {
  FilterOutcome out;
  if (!ready_) {
    out.error = "gpusched: cluster state not synced yet";
    return out;
  }
  const PodRequest& pod = args.pod;
  auto snapshot = state_->Snapshot();
  const std::vector<int32_t>& indices = IndicesFor(args, *snapshot, NameListUse::kFilter);
  if (pod.gpu.count == 0) {
    PassAll(indices, &out);
    return out;
  }
  // The request names a pod; it never adds one to the cluster view (only the
  // cluster source does). The gate reads the source's pod by UID.
  auto fw = framework();
  Admission admission;
  if (PodGate* gate = gate_.load(); gate != nullptr) admission = gate->Admit(pod, snapshot, *fw);
  if (!admission.admitted) {
    FailAll(indices, std::move(admission.reason), &out);
    return out;
  }
  if (!admission.reserved_node.empty()) {
    OnlyReserved(indices, snapshot->FindIndex(admission.reserved_node),
                 StrCat("gpusched: gang ", pod.gang, " reserved GPUs for this pod on ",
                        admission.reserved_node),
                 &out);
    return out;
  }
  const NodeGuards guards(admission, *snapshot, &out);
  policy::PodContext ctx = fw->Prepare(pod, *snapshot);
  policy::FilterMemo memo(*fw, ctx);
  FilterNodes(indices, *snapshot, memo, guards, &out);
  return out;
}

std::vector<int64_t> ExtenderService::Prioritize(const ExtenderArgs& args) const {
  std::vector<int64_t> scores(args.node_names.size(), 0);
  auto snapshot = state_->Snapshot();
  auto fw = framework();
  policy::PodContext ctx = fw->Prepare(args.pod, *snapshot);
  policy::FilterMemo memo(*fw, ctx);
  const std::vector<int32_t>& indices = IndicesFor(args, *snapshot, NameListUse::kPrioritize);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i + kPrefetchAhead < indices.size() && indices[i + kPrefetchAhead] >= 0) {
      snapshot->PrefetchHot(indices[i + kPrefetchAhead]);
    }
    if (indices[i] == kRepeated) scores[i] = kRepeatedNodeScore;
    if (indices[i] < 0) continue;
    const NodeHot& hot = snapshot->hot(indices[i]);
    if (!memo.Filter(hot).fits()) continue;
    scores[i] = policy::ExtenderScore(memo.Score(hot));  // 0..100 -> 0..10, rounded
  }
  return scores;
}

std::string ExtenderService::Bind(const BindingArgs& args, DeviceMask* devices) {
  if (!ready_) return "gpusched: cluster state not synced yet";
  // Only ever the pod the cluster source shows: by UID when the request
  // names one (kube-scheduler always does), and with the requested name.
  auto pod = args.pod_uid.empty() ? state_->FindPodByName(args.pod_namespace, args.pod_name)
                                  : state_->FindPod(args.pod_uid);
  if (!pod.has_value() || pod->ns != args.pod_namespace || pod->name != args.pod_name) {
    auto named = state_->FindPodByName(args.pod_namespace, args.pod_name);
    if (named.has_value() && !args.pod_uid.empty() && named->uid != args.pod_uid) {
      return StrCat("gpusched: pod ", args.pod_namespace, "/", args.pod_name, " has UID ",
                    named->uid, ", bind asked for ", args.pod_uid);
    }
    return StrCat("gpusched: pod ", args.pod_namespace, "/", args.pod_name,
                  args.pod_uid.empty() ? "" : StrCat(" (uid ", args.pod_uid, ")"),
                  " is not in the cluster view (the cluster source has not shown it)");
  }
  if (pod->HoldsGpus()) {
    if (pod->node_name == args.node) return "";  // idempotent: already bound there
    return StrCat("gpusched: pod ", pod->Key(), " is already bound to ", pod->node_name);
  }
  PodGate* gate = gate_.load();
  if (gate != nullptr && !gate->ReservedNode(*pod).empty()) {
    // Gang member: its devices were chosen when the gang was reserved.
    DeviceMask reserved = 0;
    std::string err = gate->AssumeForBind(*state_, *pod, args.node, &reserved);
    if (!err.empty()) return err;
    return Committed(*pod, args, reserved, devices);
  }
  auto snapshot = state_->Snapshot();
  const NodeInfo* node = snapshot->Find(args.node);
  if (node == nullptr)
    return StrCat("gpusched: node ", args.node, " is not in gpusched's cluster view");
  auto fw = framework();
  policy::PodContext ctx = fw->Prepare(*pod, *snapshot);
  policy::FilterResult fit = fw->Filter(ctx, *node);
  if (!fit.fits()) return StrCat(fit.reason, " (bind to ", args.node, ")");
  auto placement = policy::ChoosePlacement(pod->gpu, *node);
  if (!placement.has_value())
    return StrCat("gpusched: no devices for ", pod->Key(), " on ", args.node);
  DeviceMask chosen = placement->devices;
  if (gate != nullptr) {
    std::string err = gate->AssumeForBind(*state_, *pod, args.node, &chosen);
    if (!err.empty()) return err;
  } else {
    absl::Status s = state_->Assume(*pod, args.node, chosen);
    if (!s.ok()) return StrCat("gpusched: ", FromAbsl(s.message()));
  }
  return Committed(*pod, args, chosen, devices);
}

std::string ExtenderService::Committed(const PodRequest& pod, const BindingArgs& args,
                                       DeviceMask chosen, DeviceMask* devices) {
  if (write_back_) {
    std::string err = write_back_(args, chosen);
    if (!err.empty()) {
      state_->Forget(pod.uid);  // pending again, its devices free
      return err;
    }
  }
  if (devices != nullptr) *devices = chosen;
  if (PodGate* gate = gate_.load()) gate->OnBound(pod);
  return "";
}

PreemptionOutcome ExtenderService::Preempt(const PreemptionArgs& args) const {
  auto snapshot = state_->Snapshot();
  auto fw = framework();
  if (PodGate* gate = gate_.load()) return gate->Preempt(args, *snapshot, *fw);
  return DefaultPreempt(args, *snapshot, *fw);
}

PreemptionOutcome PodGate::Preempt(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                   const policy::Framework& framework) {
  return DefaultPreempt(args, snapshot, framework);
}

PreemptionOutcome DefaultPreempt(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                 const policy::Framework& framework) {
  PreemptionOutcome out;
  if (args.pod.preempt_never) return out;
  policy::PodContext ctx = framework.Prepare(args.pod, snapshot);
  for (const PreemptionArgs::Candidate& c : args.candidates) {
    const NodeInfo* node = snapshot.Find(c.node);
    if (node == nullptr) continue;
    std::vector<const PodOnNode*> gpu_victims;
    std::vector<std::string> others;  // victims without GPUs: kube's CPU/memory choice
    for (const std::string& uid : c.victim_uids) {
      auto it = std::find_if(node->pods.begin(), node->pods.end(),
                             [&](const PodOnNode& p) { return p.uid == uid; });
      if (it == node->pods.end()) {
        others.push_back(uid);
      } else if (it->priority < args.pod.priority) {
        gpu_victims.push_back(&*it);
      }
    }
    std::stable_sort(gpu_victims.begin(), gpu_victims.end(),
                     [](const PodOnNode* a, const PodOnNode* b) {
                       if (a->priority != b->priority) return a->priority < b->priority;
                       return a->start_unix > b->start_unix;
                     });
    std::vector<policy::VictimUnit> units;
    for (const PodOnNode* p : gpu_victims) units.push_back({{p->uid}});
    auto plan = policy::PlanVictims(framework, ctx, *node, units);
    if (!plan.has_value()) continue;
    PreemptionOutcome::NodeVictims nv{c.node, {}, c.pdb_violations};
    // Highest priority first, as kube-scheduler expects.
    for (auto it = plan->rbegin(); it != plan->rend(); ++it) {
      nv.victim_uids.push_back(units[*it].uids.front());
    }
    nv.victim_uids.insert(nv.victim_uids.end(), others.begin(), others.end());
    if (nv.victim_uids.empty() && !c.victim_uids.empty()) {
      // kube-scheduler rejects an empty list it did not send: nothing to evict
      // for GPUs, keep its own (non-GPU) choice.
      continue;
    }
    out.nodes.push_back(std::move(nv));
  }
  return out;
}

}  // namespace gpusched
