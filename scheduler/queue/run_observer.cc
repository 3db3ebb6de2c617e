#include "scheduler/queue/run_observer.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "gpusched/util/strings.h"
#include "scheduler/queue/snapshot_delta.h"

namespace gpusched::queue {

void RunObserver::Observe(const std::shared_ptr<const ClusterSnapshot>& snapshot, int64_t now_s,
                          const EndOf& end_of, RuntimeHistory* history) {
  if (snapshot == nullptr || snapshot == last_) return;
  SnapshotDelta delta = DiffSnapshots(last_.get(), *snapshot, running_);
  for (const PodOnNode* p : delta.present) {
    if (running_.contains(p->uid)) continue;
    const int64_t start = p->start_unix > 0 ? std::min(p->start_unix, now_s) : now_s;
    running_[p->uid] = {p->ns, p->workload, p->gpus, start};
  }
  // Recorded oldest end first (then by UID), as Seed does: a history ring
  // that is full keeps the same runs whatever order the pods were found in.
  std::vector<std::tuple<int64_t, std::string, Running>> ended;
  for (const std::string& uid : delta.maybe_gone) {
    auto it = running_.find(uid);
    if (it == running_.end()) continue;
    if (std::optional<int64_t> end = end_of(uid, now_s)) ended.emplace_back(*end, uid, it->second);
    running_.erase(it);
  }
  std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  for (const auto& [end, uid, r] : ended) {
    history->Record(r.ns, r.workload, r.gpus, end - r.start_s, RunTag(uid));
  }
  last_ = snapshot;
}

bool RunObserver::Finished(const PodRequest& p) {
  return p.phase == PodPhase::kSucceeded && p.finish_unix > 0 && p.start_unix > 0 &&
         p.gpu.count > 0;
}

void RunObserver::Seed(std::vector<PodRequest> pods, RuntimeHistory* history) {
  // Oldest first, so that each key's ring keeps its most recent runs.
  std::sort(pods.begin(), pods.end(), [](const PodRequest& a, const PodRequest& b) {
    return std::tie(a.finish_unix, a.uid) < std::tie(b.finish_unix, b.uid);
  });
  for (const PodRequest& p : pods) {
    if (!Finished(p)) continue;
    const uint32_t tag = RunTag(p.uid);
    if (!known_.insert(StrCat(p.ns, "/", p.WorkloadKey(), "/", tag)).second) continue;
    history->Record(p.ns, p.WorkloadKey(), p.gpu.count, p.finish_unix - p.start_unix, tag);
  }
  seeded_ = true;
  if (loaded_) known_ = {};
}

void RunObserver::Load(const std::vector<PersistedWorkload>& saved, RuntimeHistory* history) {
  // The least recently run first, so that the history drops the same keys
  // first as before the restart.
  for (auto w = saved.rbegin(); w != saved.rend(); ++w) {
    for (const PersistedRun& r : w->runs) {
      if (!known_.insert(StrCat(w->ns, "/", w->workload, "/", r.tag)).second) continue;
      history->Record(w->ns, w->workload, w->gpus, r.seconds, r.tag);
    }
  }
  loaded_ = true;
  if (seeded_) known_ = {};
}

}  // namespace gpusched::queue
