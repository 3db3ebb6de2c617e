#include "scheduler/queue/what_if.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/time/time.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"

namespace gpusched::queue {
namespace {

// Nodes (as `view` shows node k) where `pod` passes the filters, gets
// devices and the per-model quota of `ledger`; the first one's name.
int FitsCount(const WhatIfInputs& in, const PodRequest& pod, const QuotaLedger& ledger,
              std::string* first,
              const std::map<size_t, std::vector<std::string>>* removed = nullptr) {
  const policy::PodContext ctx = in.fw->Prepare(pod, *in.snapshot);
  const auto& nodes = in.snapshot->nodes();
  int fits = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    std::optional<NodeInfo> changed;
    if (removed != nullptr) {
      if (auto it = removed->find(k); it != removed->end()) {
        changed = policy::WithoutPods(*nodes[k], it->second);
      }
    }
    const NodeInfo& n = changed ? *changed : *nodes[k];
    if (!ledger.CheckModels(pod.ns, in.snapshot->product(n), DemandMilli(pod.gpu)).empty()) {
      continue;
    }
    if (!policy::FitsWithDevices(*in.fw, ctx, n)) continue;
    if (fits++ == 0 && first != nullptr) *first = n.name;
  }
  return fits;
}

std::string Outcome(bool quota_ok, int fits, const std::string& node) {
  if (!quota_ok) return "it would still wait: its namespace's quota does not admit it now";
  if (fits == 0) return "it would still wait: no node has room for it now";
  return StrCat("it would start now (fits on ", fits, fits == 1 ? " node, " : " nodes, e.g. ", node,
                ")");
}

std::string Reclaimed(const WhatIfInputs& in, const std::string& x, int64_t borrowed) {
  struct Candidate {
    size_t node;
    const PodOnNode* pod;
  };
  std::vector<Candidate> candidates;
  const auto& nodes = in.snapshot->nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (const PodOnNode& p : nodes[k]->pods) {
      if (p.ns == x && !p.reservation && p.gpus > 0) candidates.push_back({k, &p});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.pod->priority != b.pod->priority) return a.pod->priority < b.pod->priority;
    return a.pod->start_unix > b.pod->start_unix;
  });
  QuotaLedger ledger = *in.ledger;
  std::map<size_t, std::vector<std::string>> removed;
  int64_t freed = 0;
  for (const Candidate& c : candidates) {
    if (freed >= borrowed) break;
    const int64_t milli = int64_t{c.pod->gpus} * c.pod->milli_per_gpu;
    removed[c.node].push_back(c.pod->uid);
    ledger.Add(x, in.snapshot->product(*nodes[c.node]), -milli);
    freed += milli;
  }
  std::string node;
  const int fits = FitsCount(in, *in.pod, ledger, &node, &removed);
  const bool quota = ledger.Check(in.pod->ns, DemandMilli(in.pod->gpu)).ok;
  return StrCat("if namespace ", x, "'s ", FormatGpus(borrowed),
                " borrowed GPUs were reclaimed: ", Outcome(quota, fits, node));
}

void ReclaimAnswers(const WhatIfInputs& in, std::vector<std::string>* out) {
  std::vector<std::pair<int64_t, std::string>> borrowers;
  for (const std::string& ns : in.ledger->Namespaces()) {
    if (ns == in.pod->ns) continue;
    const int64_t b = in.ledger->Borrowed(ns);
    if (b > 0) borrowers.emplace_back(-b, ns);
  }
  std::sort(borrowers.begin(), borrowers.end());
  if (borrowers.size() > kWhatIfNamespaces) borrowers.resize(kWhatIfNamespaces);
  for (const auto& [b, ns] : borrowers) out->push_back(Reclaimed(in, ns, -b));
}

void ShapeAnswers(const WhatIfInputs& in, bool quota, int fits, std::vector<std::string>* out) {
  const PodRequest& pod = *in.pod;
  if (!pod.gpu.models.empty()) {
    const policy::PodContext ctx = in.fw->Prepare(pod, *in.snapshot);
    const auto& products = in.snapshot->products();
    for (size_t id = 0; id < products.size(); ++id) {
      if (ctx.ProductAllowed(static_cast<uint16_t>(id)) || products[id].empty()) continue;
      PodRequest alt = pod;
      alt.gpu.models = {products[id]};
      std::string node;
      const int n = FitsCount(in, alt, *in.ledger, &node);
      out->push_back(StrCat("if ", products[id], " were allowed: ", Outcome(quota, n, node)));
    }
  }
  if (fits == 0 && pod.gpu.count > 1 && !pod.gpu.shared()) {
    std::string line = "with fewer GPUs: it would not fit on any node now";
    for (int32_t c = pod.gpu.count - 1; c >= 1; --c) {
      PodRequest alt = pod;
      alt.gpu.count = c;
      std::string node;
      const int n = FitsCount(in, alt, *in.ledger, &node);
      if (n == 0) continue;
      const bool q = in.ledger->Check(pod.ns, DemandMilli(alt.gpu)).ok;
      line = StrCat("with ", pod.gpu.count - c, " fewer GPUs (", c, "): ", Outcome(q, n, node));
      break;
    }
    out->push_back(std::move(line));
  }
}

// The node where the pod fits soonest as its pods end at their estimates.
void AfterAnswer(const WhatIfInputs& in, std::vector<std::string>* out) {
  if (in.running_end == nullptr) return;
  const policy::PodContext ctx = in.fw->Prepare(*in.pod, *in.snapshot);
  int64_t best = INT64_MAX;
  std::string best_node, best_pod;
  for (const auto& node : in.snapshot->nodes()) {
    if (in.fw->Filter(ctx, *node).verdict == policy::Verdict::kUnresolvable) continue;
    std::vector<std::pair<int64_t, const PodOnNode*>> ends;
    for (const PodOnNode& p : node->pods) {
      auto e = in.running_end->find(p.uid);
      if (e != in.running_end->end()) ends.emplace_back(e->second, &p);
    }
    std::sort(ends.begin(), ends.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> gone;
    for (const auto& [end, p] : ends) {
      if (end >= best) break;
      gone.push_back(p->uid);
      if (!policy::FitsWithDevices(*in.fw, ctx, policy::WithoutPods(*node, gone))) continue;
      best = end;
      best_node = node->name;
      best_pod = StrCat(p->ns, "/", p->name);
      break;
    }
  }
  if (best_node.empty()) return;
  out->push_back(StrCat(
      "after ", best_pod, " ends (estimated ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(best), absl::UTCTimeZone()),
      "): it would have room on ", best_node));
}

}  // namespace

std::vector<std::string> WhatIfs(const WhatIfInputs& in) {
  std::vector<std::string> out;
  if (in.pod == nullptr || in.snapshot == nullptr || in.fw == nullptr || in.ledger == nullptr) {
    return out;
  }
  const PodRequest& pod = *in.pod;
  std::string node;
  const int fits = FitsCount(in, pod, *in.ledger, &node);
  const bool quota = in.ledger->Check(pod.ns, DemandMilli(pod.gpu)).ok;
  if (in.earlier_units > 0) {
    out.push_back(StrCat("with priority >= ", int64_t{in.earlier_max_priority} + 1,
                         ": it would head its queue; ", Outcome(quota, fits, node)));
  }
  if (in.ledger->enabled()) ReclaimAnswers(in, &out);
  ShapeAnswers(in, quota, fits, &out);
  AfterAnswer(in, &out);
  return out;
}

}  // namespace gpusched::queue
