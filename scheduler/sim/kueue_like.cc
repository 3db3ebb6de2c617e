#include "scheduler/sim/kueue_like.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "scheduler/sim/block_world.h"

namespace gpusched::sim {
namespace {

class KueueWorld : public BlockWorld {
 public:
  KueueWorld(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns,
             const KueueOptions& o)
      : BlockWorld(jobs, ns, o.capacity, o.gpus_per_node, o.sample_every), o_(o) {}

 private:
  // Quota with `usage`: within the namespace's limit and the cohort's
  // unused quota (every GPU of the pool is some ClusterQueue's or the
  // cohort's nominal quota, all lendable).
  bool QuotaFits(const KueueJob& j, const std::vector<int64_t>& usage) const {
    if (usage[j.ns] + j.gpus > ns()[j.ns].limit) return false;
    return std::accumulate(usage.begin(), usage.end(), int64_t{0}) + j.gpus <= pool().capacity;
  }

  bool Borrows(const KueueJob& j) const { return usage()[j.ns] + j.gpus > ns()[j.ns].guarantee; }

  // Starts `id` if it fits, else if preemption makes room.
  bool TryAdmit(int id, double t) {
    Alloc a;
    if (QuotaFits(jobs()[id], usage()) && Consolidate(pool(), jobs()[id].gpus, &a)) {
      Start(id, t, a);
      return true;
    }
    if (Preempt(id, t) && QuotaFits(jobs()[id], usage()) &&
        Consolidate(pool(), jobs()[id].gpus, &a)) {
      Start(id, t, a);
      return true;
    }
    return false;
  }

  // A ClusterQueue's order (BestEffortFIFO): priority, then creation.
  bool QueueOrder(int a, int b) const {
    if (jobs()[a].priority != jobs()[b].priority) return jobs()[a].priority > jobs()[b].priority;
    return jobs()[a].submit < jobs()[b].submit;
  }

  void Schedule(double t) override {
    if (!o_.nominal_first) return AdmitInOrder(t);
    std::vector<std::vector<int>> queues(ns().size());
    for (size_t i = 0; i < jobs().size(); ++i) {
      if (state(i).pending) queues[jobs()[i].ns].push_back(static_cast<int>(i));
    }
    for (auto& q : queues) {
      std::stable_sort(q.begin(), q.end(), [&](int a, int b) { return QueueOrder(a, b); });
    }
    std::vector<size_t> cursor(queues.size(), 0);
    for (;;) {
      // One cycle: every ClusterQueue's head, those within nominal quota
      // (as nominated at the cycle's start) first, then priority, creation.
      std::vector<std::pair<bool, int>> heads;
      for (size_t n = 0; n < queues.size(); ++n) {
        if (cursor[n] < queues[n].size()) {
          const int id = queues[n][cursor[n]++];
          heads.push_back({Borrows(jobs()[id]), id});
        }
      }
      if (heads.empty()) return;
      std::stable_sort(heads.begin(), heads.end(), [&](const auto& a, const auto& b) {
        if (a.first != b.first) return !a.first;
        return QueueOrder(a.second, b.second);
      });
      // A head not admitted is set aside until the next event.
      for (const auto& [borrows, id] : heads) TryAdmit(id, t);
    }
  }

  // The earlier baseline's order: every pending workload by priority, then
  // creation time, each tried in turn.
  void AdmitInOrder(double t) {
    std::vector<int> order;
    for (size_t i = 0; i < jobs().size(); ++i) {
      if (state(i).pending) order.push_back(static_cast<int>(i));
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return QueueOrder(a, b); });
    for (int id : order) TryAdmit(id, t);
  }

  // Kueue's preemption candidates for `id`, in its order: other
  // ClusterQueues' (borrowing, if `id` fits within nominal quota) first,
  // then lowest priority, then most recently admitted (then input order).
  std::vector<int> Candidates(int id) const {
    const KueueJob& j = jobs()[id];
    const bool within_nominal = usage()[j.ns] + j.gpus <= ns()[j.ns].guarantee;
    std::vector<int> cands;
    for (int i : running()) {
      const KueueJob& v = jobs()[i];
      const bool own = v.ns == j.ns && v.priority < j.priority;
      const bool reclaim = v.ns != j.ns && within_nominal && usage()[v.ns] > ns()[v.ns].guarantee;
      if (own || reclaim) cands.push_back(i);
    }
    std::sort(cands.begin(), cands.end(), [&](int a, int b) {
      const bool oa = jobs()[a].ns != j.ns, ob = jobs()[b].ns != j.ns;
      if (oa != ob) return oa;
      if (jobs()[a].priority != jobs()[b].priority) return jobs()[a].priority < jobs()[b].priority;
      if (state(a).admitted_at != state(b).admitted_at) {
        return state(a).admitted_at > state(b).admitted_at;
      }
      return a < b;
    });
    return cands;
  }

  // Puts back, in reverse order, every victim but the last whose removal
  // `j` does not need (Kueue's fill-back); `pool` and `usage` are the
  // state without all of `chosen`.
  void FillBack(const KueueJob& j, Pool& pool, std::vector<int64_t>& usage,
                std::vector<int>& chosen) const {
    for (int i = static_cast<int>(chosen.size()) - 2; i >= 0; --i) {
      const int v = chosen[i];
      Take(pool, state(v).alloc);
      usage[jobs()[v].ns] += jobs()[v].gpus;
      Alloc a;
      if (QuotaFits(j, usage) && Consolidate(pool, j.gpus, &a)) {
        chosen.erase(chosen.begin() + i);  // not needed: it keeps running
      } else {
        Give(pool, state(v).alloc);
        usage[jobs()[v].ns] -= jobs()[v].gpus;
      }
    }
  }

  // Kueue's classical preemption for `id`: removes candidates in order
  // until it fits (quota and nodes), fills back, evicts the rest; nothing
  // if no set makes room.
  bool Preempt(int id, double t) {
    const KueueJob& j = jobs()[id];
    if (o_.preempt_within_nominal_only && j.gpus > ns()[j.ns].guarantee) return false;
    Pool pool = this->pool();
    std::vector<int64_t> usage = this->usage();
    std::vector<int> chosen;
    for (int c : Candidates(id)) {
      // A borrowing ClusterQueue is reclaimed only while it still borrows.
      const int cns = jobs()[c].ns;
      if (cns != j.ns && usage[cns] <= ns()[cns].guarantee) continue;
      chosen.push_back(c);
      Give(pool, state(c).alloc);
      usage[cns] -= jobs()[c].gpus;
      Alloc a;
      if (!QuotaFits(j, usage) || !Consolidate(pool, j.gpus, &a)) continue;
      if (o_.fill_back) FillBack(j, pool, usage, chosen);
      for (int v : chosen) Evict(v, j.ns, t);
      return true;
    }
    return false;
  }

  const KueueOptions& o_;
};

}  // namespace

KueueRun RunKueueLike(const std::vector<KueueJob>& jobs, const std::vector<ShareSpec>& ns,
                      const KueueOptions& options) {
  return KueueWorld(jobs, ns, options).Run();
}

}  // namespace gpusched::sim
