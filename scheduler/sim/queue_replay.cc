// The replay protocol's gpusched policy on the real queue manager (see
// queue_replay.h): event loop, job and pod bookkeeping, eviction handling.
#include "scheduler/sim/queue_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/queue_wiring.h"
#include "scheduler/queue/quota_ledger.h"
#include "scheduler/sim/backfill_slips.h"
#include "scheduler/sim/estimate_samples.h"
#include "scheduler/sim/kube_cycle.h"
#include "scheduler/sim/priority_classes.h"

namespace gpusched::sim {
namespace {

constexpr char kCohort[] = "vcs";
// kube-scheduler moves unschedulable pods back to its active queue at least
// this often (podMaxInUnschedulablePodsDuration).
constexpr double kUnschedulableFlushSeconds = 300;
// kube-scheduler's pod backoff (with ReplayOptions::kube_backoff): 1 s after
// the first failed attempt, doubling, at most 10 s; the backoff queue is
// flushed once a second.
constexpr double kInitialBackoffSeconds = 1;
constexpr double kMaxBackoffSeconds = 10;
// Passes over the pending pods per event while binds or evictions happen.
constexpr int kMaxPasses = 16;
// An evicted pod terminates and its Job controller creates the replacement
// this much later; meanwhile the pod the eviction was for gets its turn.
constexpr double kRecreateSeconds = 1;
// Pods evicted through the Eviction API (reclaim) keep their GPUs while they
// terminate (Kubernetes' default terminationGracePeriodSeconds).
constexpr double kTerminationSeconds = 30;

// Restart cost after an eviction, as the SRTF baseline (Helios).
double Penalty(int64_t gpus) { return gpus == 1 ? 7 : gpus <= 8 ? 30 : 60; }

// Pods of one Philly job larger than a node: the fewest equal pods that fit.
int32_t PodsFor(int32_t gpus, int32_t per_node) {
  int32_t k = (gpus + per_node - 1) / per_node;
  while (gpus % k != 0) ++k;
  return k;
}

// Receives the evictions the queue manager decides (reclaim), as the
// Eviction API would; the replay then terminates those pods gracefully.
class EvictionLog final : public ClusterWriter {
 public:
  absl::Status Evict(const PodRequest& pod, const std::string&) override {
    evicted.push_back(pod.uid);
    return absl::OkStatus();
  }
  std::vector<std::string> evicted;
};

// One thing that runs: a gang job (all pods), or one pod of a job whose
// pods run independently.
struct Unit {
  int job = 0;
  std::string name;  // pod name stem, also the gang name
  bool gang = false;
  int32_t pods = 1, gpus_per_pod = 1;
  std::vector<std::string> uids;  // current pods
  int32_t bound = 0;
  double remaining = 0, run_start = 0, pending_since = 0, queue_time = 0, end = -1;
  bool running = false, done = false, terminating = false;
  int epoch = 0, restarts = 0;
  int64_t gpus() const { return int64_t{pods} * gpus_per_pod; }
};

struct JobRec {
  int ns = 0;
  double submit = 0, duration = 0;
  int32_t priority = 0;
  bool preempt_never = false;
  int64_t cpu_milli = 0, memory_mib = 0;
  int first_unit = 0, units = 0, units_done = 0;
  int source = 0;  // index in the input jobs
};

struct Completion {
  double time;
  int unit;
  int epoch;
  bool operator<(const Completion& o) const {
    return time != o.time ? time > o.time : unit > o.unit;
  }
};

// kube-scheduler's queue order: priority, then when the pod was created.
using PendingKey = std::tuple<int64_t, int64_t, int64_t>;  // -priority, creation, sequence

class QueueReplay {
 public:
  QueueReplay(const ReplayOptions& o, std::vector<std::string> names, QuotaConfig quotas)
      : o_(o),
        names_(std::move(names)),
        quotas_(std::move(quotas)),
        state_(o.config.topology_templates) {}

  absl::Status Init(int64_t nodes, std::vector<JobRec> jobs, std::vector<Unit> units) {
    jobs_ = std::move(jobs);
    units_ = std::move(units);
    for (const NodeSpec& s : o_.nodes) {
      node_names_.push_back(s.name);
      state_.UpsertNode(s);
    }
    for (int64_t i = 0; o_.nodes.empty() && i < nodes; ++i) {
      NodeSpec s;
      s.name = StrCat("node-", absl::Dec(i, absl::kZeroPad4));
      s.product = "Tesla-P100-PCIE-16GB";
      s.gpu_memory_mib = 16384;
      s.gpu_count = s.gpu_allocatable = o_.gpus_per_node;
      s.cpu_milli = int64_t{1} << 40;
      s.memory_mib = int64_t{1} << 40;
      node_names_.push_back(s.name);
      state_.UpsertNode(std::move(s));
    }
    state_.Commit();
    capacity_ = nodes * o_.gpus_per_node;
    auto fw = policy::Framework::Create(o_.config.scoring);
    if (!fw.ok()) return fw.status();
    service_ = std::make_unique<ExtenderService>(
        &state_, std::shared_ptr<const policy::Framework>(std::move(*fw)));
    service_->SetReady(true);
    queue::QueueDeps deps;
    deps.state = &state_;
    deps.writer = &log_;
    deps.framework = [svc = service_.get()] { return svc->framework(); };
    deps.now_ms = [this] { return now_ms_; };
    deps.log = [](const std::string&) {};  // wall-clock log lines mean nothing here
    queue::QueueOptions qo = queue::QueueOptionsFrom(o_.config);
    qo.quotas = quotas_;
    queue_ = std::make_unique<queue::QueueManager>(std::move(deps), std::move(qo));
    service_->SetGate(queue_.get());
    cycle_ = std::make_unique<KubeCycle>(service_.get(), &state_, node_names_, o_.tie_seed);
    run_.max_borrowed.assign(names_.size(), 0);
    waiting_gpus_.assign(names_.size(), 0);
    CohortsOfBackfill();
    std::vector<std::pair<std::string, int>> pools;
    for (const std::string& ns : names_) pools.push_back({ns, 0});
    metrics_.emplace(ReplayShares(quotas_, pools), capacity_);
    return absl::OkStatus();
  }

  QueueReplayRun Run() {
    std::vector<int> arrivals(jobs_.size());
    std::iota(arrivals.begin(), arrivals.end(), 0);
    std::stable_sort(arrivals.begin(), arrivals.end(),
                     [&](int a, int b) { return jobs_[a].submit < jobs_[b].submit; });
    size_t next = 0;
    double next_sample = 0;
    while (next < arrivals.size() || !done_.empty() || !recreate_.empty() || !terminate_.empty() ||
           !wake_.empty()) {
      double t = next < arrivals.size() ? jobs_[arrivals[next]].submit : 1e300;
      if (!done_.empty()) t = std::min(t, done_.top().time);
      if (!recreate_.empty()) t = std::min(t, recreate_.top().time);
      if (!terminate_.empty()) t = std::min(t, terminate_.top().time);
      if (!wake_.empty()) t = std::min(t, *wake_.begin());
      while (next_sample <= t) Sample(next_sample), next_sample += o_.sample_every;
      now_ms_ = std::llround(t * 1000);
      bool released = false, flush = false;
      while (!wake_.empty() && *wake_.begin() <= t) {
        wake_.erase(wake_.begin());
        flush = true;  // the backoff queue's flush: moved pods whose backoff passed
      }
      while (!done_.empty() && done_.top().time <= t) {
        Completion c = done_.top();
        done_.pop();
        if (c.epoch != units_[c.unit].epoch || !units_[c.unit].running) continue;
        Complete(c.unit, c.time);
        released = true;
      }
      while (!terminate_.empty() && terminate_.top().time <= t) {
        Completion c = terminate_.top();
        terminate_.pop();
        Unit& x = units_[c.unit];
        if (c.epoch != x.epoch || !x.terminating || x.uids.empty()) continue;
        Evict({x.uids.front()}, t, /*reclaim=*/true);
        released = true;
      }
      std::vector<std::string> fresh;
      while (!recreate_.empty() && recreate_.top().time <= t) {
        const int u = recreate_.top().unit;
        recreate_.pop();
        CreatePods(u, t, &fresh);
      }
      while (next < arrivals.size() && jobs_[arrivals[next]].submit <= t) {
        const JobRec& j = jobs_[arrivals[next++]];
        for (int u = j.first_unit; u < j.first_unit + j.units; ++u) {
          units_[u].pending_since = t;
          CreatePods(u, t, &fresh);
        }
      }
      Pass(t, released, fresh, flush);
      Ticks(t);
      Check(t);
    }
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const JobRec& j = jobs_[i];
      QueueReplayJob out;
      out.ns = j.ns;
      out.submit = j.submit;
      out.duration = j.duration;
      out.done = j.units_done == j.units;
      out.gang = j.units == 1 && units_[j.first_unit].gang;
      double queue = 0;
      for (int u = j.first_unit; u < j.first_unit + j.units; ++u) {
        out.end = std::max(out.end, units_[u].end);
        queue += units_[u].queue_time;
      }
      out.queue_time = j.units > 0 ? queue / j.units : 0;
      run_.jobs.push_back(out);
    }
    metrics_->Finish(run_.makespan);
    run_.guarantee_waits = metrics_->GuaranteeWaits();
    run_.util_while_waiting = metrics_->UtilisationWhileWaiting();
    run_.estimates = sampler_.Summary();
    run_.estimates.backfill_overruns = queue_->backfill_overruns();
    run_.estimates.backfill_heads_passed = slips_.heads_passed();
    run_.estimates.backfill_head_slips = slips_.slips();
    run_.surplus_jain = metrics_->MeanSurplusJain();
    return std::move(run_);
  }

 private:
  void CreatePods(int u, double t, std::vector<std::string>* fresh) {
    Unit& x = units_[u];
    const JobRec& j = jobs_[x.job];
    x.uids.clear();
    for (int32_t m = 0; m < x.pods; ++m) {
      PodRequest p;
      p.ns = names_[j.ns];
      p.name = x.pods > 1 ? StrCat(x.name, "-", m) : x.name;
      if (x.restarts > 0) StrAppend(&p.name, "-r", x.restarts);
      p.uid = StrCat("uid-", p.name);
      p.workload = x.name;  // its replacements after an eviction are the same workload
      p.priority = j.priority;
      p.preempt_never = j.preempt_never;
      p.creation_unix = static_cast<int64_t>(std::floor(t));
      p.cpu_milli = j.cpu_milli;
      p.memory_mib = j.memory_mib;
      p.gpu.count = x.gpus_per_pod;
      if (x.gang) {
        p.gang = x.name;
        p.gang_size = x.pods;
      }
      if (o_.decorate_pod) o_.decorate_pod(j.source, &p);
      x.uids.push_back(p.uid);
      unit_of_[p.uid] = u;
      const PendingKey key{-int64_t{p.priority}, p.creation_unix, ++created_};
      key_of_[p.uid] = key;
      pending_[key] = p.uid;
      waiting_gpus_[j.ns] += x.gpus_per_pod;
      fresh->push_back(p.uid);
      state_.UpsertPod(p);
      pods_[p.uid] = std::move(p);
    }
    state_.Commit();
  }

  // kube-scheduler: pods whose turn it is, in its queue order (priority,
  // then creation time); after a bind or an eviction every pending pod.
  void Pass(double t, bool all, const std::vector<std::string>& fresh, bool flush = false) {
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      std::vector<std::string> order;
      for (const auto& [key, uid] : pending_) {
        const bool due = t - last_try_[uid] >= kUnschedulableFlushSeconds;
        const bool is_new = std::find(fresh.begin(), fresh.end(), uid) != fresh.end();
        const bool flushed = flush && moved_.contains(uid);
        if (!(all || pass > 0 || due || is_new || flushed)) continue;
        if (o_.kube_backoff && !due && !is_new && BackingOff(uid, t)) continue;
        moved_.erase(uid);
        order.push_back(uid);
      }
      bool progress = false;
      for (const std::string& uid : order) {
        auto it = pods_.find(uid);
        auto key = key_of_.find(uid);
        if (it == pods_.end() || key == key_of_.end() || !pending_.contains(key->second)) continue;
        PodRequest pod = it->second;
        pod.start_unix = static_cast<int64_t>(std::floor(t));  // read only once bound
        last_try_[uid] = t;
        CycleResult r = cycle_->Schedule(pod);
        if (r.node.empty() && !r.victims.empty()) {
          Evict(r.victims, t, /*reclaim=*/false);
          progress = true;
          r = cycle_->Schedule(pod);
        }
        if (!r.node.empty()) {
          Bound(uid, t);
          progress = true;
        } else {
          ++attempts_[uid];
        }
      }
      if (!progress) break;
    }
  }

  // With kube_backoff: true if `uid` failed a cycle whose backoff has not
  // passed at `t`: an event moved it to the backoff queue, and it is
  // retried at the first flush after its backoff passes.
  bool BackingOff(const std::string& uid, double t) {
    auto a = attempts_.find(uid);
    if (a == attempts_.end() || a->second == 0) return false;
    const double backoff = std::min(
        kMaxBackoffSeconds, kInitialBackoffSeconds * std::ldexp(1.0, std::min(a->second - 1, 8)));
    const double until = last_try_[uid] + backoff;
    if (t >= until) return false;
    moved_.insert(uid);
    wake_.insert(std::ceil(until));
    return true;
  }

  // The queue manager's periodic work; its reclaim victims start
  // terminating (still holding their GPUs) and go kTerminationSeconds later.
  void Ticks(double t) {
    log_.evicted.clear();
    queue_->Tick();
    if (t >= next_estimate_) {
      next_estimate_ = t + kEstimateEverySeconds;
      RefreshEstimates(t);
    }
    for (const std::string& uid : log_.evicted) {
      auto it = unit_of_.find(uid);
      if (it == unit_of_.end()) continue;
      Unit& x = units_[it->second];
      if (x.terminating) continue;
      x.terminating = true;
      for (const std::string& member : x.uids) {
        auto pod = state_.FindPod(member);
        if (!pod.has_value()) continue;
        pod->deleting = true;
        state_.UpsertPod(std::move(*pod));
      }
      terminate_.push({t + kTerminationSeconds, it->second, x.epoch});
    }
    state_.Commit();
    log_.evicted.clear();
  }

  // Per namespace, its cohort (an index) if it queues by Backfill in one,
  // else -1: the slip count's passes across namespaces.
  void CohortsOfBackfill() {
    std::map<std::string, int> ids;
    for (const std::string& ns : names_) {
      auto q = quotas_.namespaces.find(ns);
      const NamespaceQuota& quota =
          q == quotas_.namespaces.end() ? quotas_.default_quota : q->second;
      int id = -1;
      if (!quota.cohort.empty() && quota.queueing == QueueingStrategy::kBackfill) {
        id = ids.try_emplace(quota.cohort, static_cast<int>(ids.size())).first->second;
      }
      backfill_cohort_.push_back(id);
    }
  }

  // The queue manager's estimate refresh (as serve's EstimateThread, on the
  // virtual clock, with no wall-clock budget), sampled for accuracy.
  void RefreshEstimates(double t) {
    queue_->RefreshEstimates(std::chrono::hours(1));
    std::vector<BackfillSlips::Waiting> waiting;
    for (const queue::QueuedPod& q : queue_->Positions(0)) {
      auto it = unit_of_.find(q.uid);
      if (it == unit_of_.end()) continue;
      const Unit& x = units_[it->second];
      sampler_.Offer(it->second, t, x.pending_since, q.position,
                     static_cast<double>(q.estimated_start_unix));
      const int ns = jobs_[x.job].ns;
      auto e = queue_->EstimateOf(q.uid);
      waiting.push_back({it->second, ns, q.position, static_cast<double>(q.estimated_start_unix),
                         e.has_value() ? e->start.order : -1, backfill_cohort_[ns]});
    }
    slips_.Refreshed(std::move(waiting));
  }

  void Bound(const std::string& uid, double t) {
    Unit& x = units_[unit_of_[uid]];
    const int left = static_cast<int>(pending_.erase(key_of_[uid]));
    waiting_gpus_[jobs_[x.job].ns] -= int64_t{left} * x.gpus_per_pod;
    if (++x.bound < x.pods) return;
    x.running = true;
    x.run_start = t;
    sampler_.Started(unit_of_[uid], t);
    const bool backfilled = std::any_of(
        x.uids.begin(), x.uids.end(), [&](const std::string& m) { return queue_->Backfilled(m); });
    slips_.Started(unit_of_[uid], jobs_[x.job].ns, t, UnitNodes(x), backfilled);
    x.queue_time += t - x.pending_since;
    if (o_.on_start) x.remaining *= o_.on_start(jobs_[x.job].source, t, UnitNodes(x));
    done_.push({t + x.remaining, unit_of_[uid], x.epoch});
  }

  std::vector<std::string> UnitNodes(const Unit& x) const {
    std::vector<std::string> out;
    for (const std::string& uid : x.uids) {
      auto pod = state_.FindPod(uid);
      if (pod.has_value()) out.push_back(pod->node_name);
    }
    return out;
  }

  void RemovePods(Unit& x) {
    for (const std::string& uid : x.uids) {
      auto key = key_of_.find(uid);
      if (key != key_of_.end()) {
        const int left = static_cast<int>(pending_.erase(key->second));
        waiting_gpus_[jobs_[x.job].ns] -= int64_t{left} * x.gpus_per_pod;
        key_of_.erase(key);
      }
      pods_.erase(uid);
      state_.RemovePod(uid);
      unit_of_.erase(uid);
      last_try_.erase(uid);
      attempts_.erase(uid);
      moved_.erase(uid);
    }
    x.uids.clear();
    x.bound = 0;
    state_.Commit();
  }

  void Complete(int u, double t) {
    Unit& x = units_[u];
    RemovePods(x);
    run_.busy_gpu_seconds += (t - x.run_start) * x.gpus();
    sampler_.Completed(t - x.run_start);
    slips_.Stopped(u, t);
    x.running = false;
    x.done = true;
    x.end = t;
    ++jobs_[x.job].units_done;
    run_.makespan = std::max(run_.makespan, t);
  }

  // Stops the units of `uids` (a gang whole); their pods are recreated
  // kRecreateSeconds later.
  void Evict(const std::vector<std::string>& uids, double t, bool reclaim) {
    std::vector<int> stopped;
    for (const std::string& uid : uids) {
      auto it = unit_of_.find(uid);
      if (it == unit_of_.end()) continue;
      const int u = it->second;
      if (std::find(stopped.begin(), stopped.end(), u) != stopped.end()) continue;
      stopped.push_back(u);
      Unit& x = units_[u];
      const bool held = x.bound > 0;
      sampler_.Forget(u);
      RemovePods(x);
      if (x.running) {
        slips_.Stopped(u, t);
        const double ran = t - x.run_start;
        run_.busy_gpu_seconds += ran * x.gpus();
        x.remaining = std::max(0.0, x.remaining - ran) + Penalty(x.gpus());
        run_.lost_gpu_seconds += Penalty(x.gpus()) * x.gpus();
        x.pending_since = t;
      }
      x.running = false;
      x.terminating = false;
      ++x.epoch;
      ++x.restarts;
      if (held) {
        ++run_.preemptions;
        if (reclaim) ++run_.reclaim_evictions;
      }
      recreate_.push({t + (reclaim ? 0 : kRecreateSeconds), u, x.epoch});
    }
  }

  void Check(double t) {
    auto snapshot = state_.Snapshot();
    // Usage summed over the snapshot by an index of the check's own (not the
    // queue's), re-reading only the nodes that changed.
    checked_usage_.Update(snapshot);
    queue::QuotaLedger ledger(quotas_, checked_usage_.Table());
    std::vector<int64_t> used(names_.size(), 0);
    for (size_t n = 0; n < names_.size(); ++n) {
      const int64_t usage = ledger.Usage(names_[n]);
      if (usage > ledger.Limit(names_[n])) ++run_.quota_violations;
      run_.max_borrowed[n] =
          std::max(run_.max_borrowed[n], (usage - ledger.Guaranteed(names_[n])) / 1000);
      used[n] = usage / 1000;
    }
    metrics_->Observe(t, used, waiting_gpus_);  // time to guarantee and the rest
    if (o_.on_step) o_.on_step(t, *snapshot);
  }

  void Sample(double t) {
    TimelinePoint p;
    p.t = t;
    auto snapshot = state_.Snapshot();
    p.utilisation = capacity_ > 0
                        ? static_cast<double>(snapshot->AllocatedGpuMilli()) / (1000.0 * capacity_)
                        : 0;
    const queue::QuotaLedger ledger(quotas_, *snapshot);
    for (const std::string& ns : names_) p.used_gpus[ns] = ledger.Usage(ns) / 1000.0;
    std::vector<double> sum(names_.size(), 0);
    std::vector<int> cnt(names_.size(), 0);
    for (const auto& [key, uid] : pending_) {
      const JobRec& j = jobs_[units_[unit_of_[uid]].job];
      sum[j.ns] += t - j.submit;
      ++cnt[j.ns];
    }
    for (size_t n = 0; n < names_.size(); ++n) {
      p.queue_wait[names_[n]] = cnt[n] ? sum[n] / cnt[n] : 0;
    }
    run_.timeline.push_back(std::move(p));
  }

  const ReplayOptions& o_;
  std::vector<std::string> names_;
  QuotaConfig quotas_;
  std::vector<int> backfill_cohort_;  // per namespace (CohortsOfBackfill)
  ClusterState state_;
  EvictionLog log_;
  std::unique_ptr<ExtenderService> service_;
  std::unique_ptr<queue::QueueManager> queue_;
  std::unique_ptr<KubeCycle> cycle_;
  std::vector<std::string> node_names_;
  int64_t capacity_ = 0;
  int64_t now_ms_ = 0;
  static constexpr double kEstimateEverySeconds = 60;
  double next_estimate_ = 0;
  EstimateSampler sampler_;
  BackfillSlips slips_;
  std::vector<JobRec> jobs_;
  std::vector<Unit> units_;
  absl::flat_hash_map<std::string, PodRequest> pods_;  // live pods by uid
  absl::flat_hash_map<std::string, int> unit_of_;
  absl::flat_hash_map<std::string, double> last_try_;
  absl::flat_hash_map<std::string, int> attempts_;  // failed cycles (kube_backoff)
  queue::UsageIndex checked_usage_;                 // Check's own usage sums
  std::set<double> wake_;                           // backoff flushes due (kube_backoff)
  absl::flat_hash_set<std::string> moved_;          // in the backoff queue (kube_backoff)
  std::map<PendingKey, std::string> pending_;       // kube-scheduler's queue order
  absl::flat_hash_map<std::string, PendingKey> key_of_;
  int64_t created_ = 0;
  std::priority_queue<Completion> done_;
  std::priority_queue<Completion> recreate_;   // evicted units' new pods
  std::priority_queue<Completion> terminate_;  // reclaim victims going away
  QueueReplayRun run_;
  std::vector<int64_t> waiting_gpus_;  // GPUs of pending pods per pool (namespace)
  std::optional<ShareMetrics> metrics_;
};

}  // namespace

QuotaConfig ReplayQuotas(const QuotaConfig& configured,
                         const std::vector<std::pair<std::string, int>>& pools, int gpus_per_node) {
  QuotaConfig q = configured;
  if (!q.enabled) {
    q = QuotaConfig{};
    q.enabled = true;
  }
  int64_t total = 0;
  for (const auto& [ns, nodes] : pools) total += int64_t{nodes} * gpus_per_node;
  for (const auto& [ns, nodes] : pools) {
    if (q.namespaces.contains(ns)) continue;
    NamespaceQuota nq;
    nq.gpus.guaranteed = int64_t{nodes} * gpus_per_node;
    nq.gpus.limit = total;
    nq.cohort = kCohort;
    nq.queueing = q.default_quota.queueing;  // the configured default's strategy
    nq.attained = q.default_quota.attained;  // and ordering
    q.namespaces[ns] = std::move(nq);
  }
  return q;
}

std::vector<ShareSpec> ReplayShares(const QuotaConfig& quotas,
                                    const std::vector<std::pair<std::string, int>>& pools) {
  std::vector<ShareSpec> out;
  for (const auto& [ns, nodes] : pools) {
    const NamespaceQuota& q = quotas.namespaces.at(ns);
    out.push_back({.guarantee = q.gpus.guaranteed, .weight = q.weight, .limit = q.gpus.limit});
  }
  return out;
}

absl::StatusOr<QueueReplayRun> RunQueueReplay(const std::vector<Job>& jobs,
                                              const std::vector<std::pair<std::string, int>>& pools,
                                              const ReplayOptions& o) {
  std::vector<std::string> names;
  int64_t nodes = 0;
  for (const auto& [ns, n] : pools) {
    names.push_back(ns);
    nodes += n;
  }
  QuotaConfig quotas = ReplayQuotas(o.config.quotas, pools, o.gpus_per_node);
  std::vector<JobRec> recs;
  std::vector<Unit> units;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    const int ns = static_cast<int>(std::find(names.begin(), names.end(), j.ns) - names.begin());
    if (ns >= static_cast<int>(names.size()) || j.total_gpus() <= 0) continue;
    JobRec r;
    r.ns = ns;
    r.submit = j.submit;
    r.duration = j.duration * o.load;
    r.source = static_cast<int>(i);
    r.cpu_milli = j.cpu_milli_per_pod;
    r.memory_mib = j.memory_mib_per_pod;
    auto pc = LookupPriorityClass(j.priority_class);
    if (!pc.ok()) return absl::InvalidArgumentError(StrCat(j.id, ": ", pc.status().message()));
    r.priority = j.priority_class.empty() ? j.priority : pc->value;
    r.preempt_never = pc->preempt_never;
    int32_t pods = j.pods, per_pod = j.gpus_per_pod;
    bool gang = j.gang && pods > 1;
    if (pods == 1 && per_pod > o.gpus_per_node) {
      pods = PodsFor(per_pod, o.gpus_per_node);
      per_pod /= pods;
      gang = true;
    }
    if (per_pod > o.gpus_per_node) {
      return absl::InvalidArgumentError(
          StrCat(j.id, ": ", per_pod, " GPUs per pod, nodes have ", o.gpus_per_node));
    }
    const NamespaceQuota& q = quotas.namespaces.at(j.ns);
    if (int64_t{pods} * per_pod > q.gpus.limit) {
      return absl::InvalidArgumentError(StrCat(j.id, " needs ", int64_t{pods} * per_pod,
                                               " GPUs, above the limit of ", j.ns, " (",
                                               q.gpus.limit, ")"));
    }
    r.first_unit = static_cast<int>(units.size());
    const std::string stem = StrCat("j", absl::Dec(recs.size(), absl::kZeroPad7));
    const int32_t n_units = gang ? 1 : pods;
    for (int32_t k = 0; k < n_units; ++k) {
      Unit u;
      u.job = static_cast<int>(recs.size());
      u.name = gang || pods == 1 ? stem : StrCat(stem, "-", k);
      u.gang = gang;
      u.pods = gang ? pods : 1;
      u.gpus_per_pod = per_pod;
      u.remaining = r.duration;
      units.push_back(std::move(u));
    }
    r.units = n_units;
    recs.push_back(r);
  }
  QueueReplay replay(o, names, std::move(quotas));
  absl::Status s = replay.Init(nodes, std::move(recs), std::move(units));
  if (!s.ok()) return s;
  QueueReplayRun run = replay.Run();
  for (const auto& [ns, n] : pools) {
    run.guaranteed.push_back(
        ReplayQuotas(o.config.quotas, pools, o.gpus_per_node).namespaces.at(ns).gpus.guaranteed);
  }
  return run;
}

}  // namespace gpusched::sim
