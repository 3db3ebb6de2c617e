// The topology comparison (see topo_compare.h): the measurements, the
// gpusched run on the real queue manager and the Kueue-TAS-like run.
#include "scheduler/sim/topo_compare.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <queue>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gpusched/util/strings.h"
#include "scheduler/sim/kueue_tas.h"
#include "scheduler/sim/queue_replay.h"

namespace gpusched::sim {
namespace {

constexpr char kNamespace[] = "train";

// Measurements shared by every placement: fed the free GPUs per node after
// every event time, and each job's start (nodes) and end.
class TopoMeter {
 public:
  TopoMeter(const TopoCluster& c, const std::vector<TopoJob>& jobs, const SlowdownOptions& slowdown)
      : c_(c),
        jobs_(jobs),
        slowdown_(slowdown),
        start_(jobs.size(), -1),
        end_(jobs.size(), -1),
        domains_(jobs.size(), 0),
        top_domains_(jobs.size(), 0) {
    for (const TopoJob& j : jobs) window_end_ = std::max(window_end_, j.submit);
    group_ = static_cast<int>(c.levels.size()) - 2;
    free_.assign(c.nodes.size(), c.gpus_per_node);
  }

  // The state after the events at `t`; the time since the previous call is
  // credited to the previous state.
  void Observe(double t, const std::vector<int>& free) {
    const double until = std::min(t, window_end_);
    if (until > last_t_) {
      const double dt = until - last_t_;
      util_area_ += dt * Used() / static_cast<double>(c_.Capacity());
      top_area_ += dt * Whole(0);
      group_area_ += dt * Whole(group_);
      last_t_ = until;
    }
    free_ = free;
    if (t >= window_end_ && !end_seen_) {
      end_seen_ = true;
      top_end_ = Whole(0);
      group_end_ = Whole(group_);
    }
  }

  // Job `j` starts at `t` on `nodes` (one entry per pod); its runtime factor.
  double Start(int j, double t, const std::vector<int>& nodes) {
    start_[j] = t;
    const TopoJob& job = jobs_[j];
    if (!job.gang) return 1;
    domains_[j] = c_.DomainsSpanned(c_.Level(job.level), nodes);
    top_domains_[j] = c_.DomainsSpanned(0, nodes);
    return GangSlowdown(c_, job, nodes, slowdown_);
  }
  void End(int j, double t) { end_[j] = t; }

  TopoResult Result(std::string policy) const;

 private:
  double Used() const {
    int64_t used = 0;
    for (int f : free_) used += c_.gpus_per_node - f;
    return static_cast<double>(used);
  }
  double Whole(int level) const {
    return static_cast<double>(c_.WholeDomains(level, free_)) / c_.domain_count[level];
  }

  const TopoCluster& c_;
  const std::vector<TopoJob>& jobs_;
  SlowdownOptions slowdown_;
  std::vector<double> start_, end_;
  std::vector<int> domains_, top_domains_;
  std::vector<int> free_;
  int group_ = 0;
  double window_end_ = 0, last_t_ = 0;
  double util_area_ = 0, top_area_ = 0, group_area_ = 0;
  bool end_seen_ = false;
  double top_end_ = 0, group_end_ = 0;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(k, v.size() - 1)];
}

TopoResult TopoMeter::Result(std::string policy) const {
  TopoResult r;
  r.policy = std::move(policy);
  r.jobs = static_cast<int64_t>(jobs_.size());
  std::vector<double> waits;
  double jct = 0, gang_jct = 0, single_jct = 0, single_wait = 0;
  int64_t done = 0, gangs_done = 0, singles_done = 0, singles_started = 0, top_spread = 0;
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const TopoJob& job = jobs_[j];
    r.gangs += job.gang;
    if (end_[j] < 0) {
      ++r.unfinished;
    } else {
      jct += end_[j] - job.submit;
      ++done;
      r.makespan = std::max(r.makespan, end_[j]);
      if (job.gang) gang_jct += end_[j] - job.submit, ++gangs_done;
      if (!job.gang) single_jct += end_[j] - job.submit, ++singles_done;
    }
    if (!job.gang && start_[j] >= 0) single_wait += start_[j] - job.submit, ++singles_started;
    if (!job.gang || start_[j] < 0) continue;
    ++r.gangs_started;
    waits.push_back(start_[j] - job.submit);
    r.gangs_one_domain += domains_[j] == 1;
    top_spread += top_domains_[j] > 1;
    r.required_gangs += job.required;
    r.required_spread += job.required && domains_[j] > 1;
  }
  r.one_domain_share =
      r.gangs_started ? static_cast<double>(r.gangs_one_domain) / r.gangs_started : 0;
  r.top_spread_share = r.gangs_started ? static_cast<double>(top_spread) / r.gangs_started : 0;
  double wait_sum = 0;
  for (double w : waits) wait_sum += w;
  r.gang_wait_mean = waits.empty() ? 0 : wait_sum / static_cast<double>(waits.size());
  r.gang_wait_p95 = Percentile(waits, 0.95);
  r.avg_jct = done ? jct / static_cast<double>(done) : 0;
  r.avg_gang_jct = gangs_done ? gang_jct / static_cast<double>(gangs_done) : 0;
  r.avg_single_jct = singles_done ? single_jct / static_cast<double>(singles_done) : 0;
  r.single_wait_mean = singles_started ? single_wait / static_cast<double>(singles_started) : 0;
  const double window = std::max(last_t_, 1e-9);
  r.utilisation = util_area_ / window;
  r.whole_top = top_area_ / window;
  r.whole_group = group_area_ / window;
  r.whole_top_end = top_end_;
  r.whole_group_end = group_end_;
  return r;
}

// One namespace owning the cluster, its queue BestEffortFIFO as the
// Kueue-TAS-like baseline's: the placements differ, not the queueing.
QuotaConfig OneQueue(QuotaConfig q, int64_t capacity) {
  if (!q.enabled) {
    q = QuotaConfig{};
    q.enabled = true;
  }
  NamespaceQuota nq;
  nq.gpus.guaranteed = capacity;
  nq.gpus.limit = capacity;
  nq.queueing = QueueingStrategy::kBestEffortFifo;
  q.namespaces[kNamespace] = std::move(nq);
  return q;
}

// The cluster's nodes with their labels, as the node decoder keeps them
// (sorted by key).
std::vector<NodeSpec> LabelledNodes(const TopoCluster& c) {
  std::vector<NodeSpec> out = c.nodes;
  for (size_t n = 0; n < out.size(); ++n) {
    NodeLabels labels = c.labels[n];
    std::sort(labels.begin(), labels.end());
    out[n].labels = std::make_shared<const NodeLabels>(std::move(labels));
  }
  return out;
}

// A gang's request as the pod decoder reads gpusched's annotations.
void AskTopology(const TopoJob& job, PodRequest* pod) {
  if (!job.gang) return;
  TopologyRequest& t = pod->topology_request;
  t.rule = job.required ? TopologyRule::kRequired : TopologyRule::kPreferred;
  t.level = job.level;
  t.source = StrCat("annotation ",
                    job.required ? kAnnotationTopologyRequired : kAnnotationTopologyPreferred);
}

// gpusched on the real queue manager (queue_replay.h): node by node
// ("gpusched", no topology levels), or with the cluster's levels and each
// gang's request ("gpusched-topology").
absl::StatusOr<TopoResult> RunGpusched(const TopoCluster& c, const std::vector<TopoJob>& jobs,
                                       const TopoCompareOptions& o) {
  std::vector<Job> replay_jobs;
  for (const TopoJob& t : jobs) {
    Job j;
    j.id = t.id;
    j.ns = kNamespace;
    j.gpus_per_pod = t.gpus_per_pod;
    j.pods = t.pods;
    j.submit = t.submit;
    j.duration = t.duration;
    j.gang = t.gang;
    replay_jobs.push_back(std::move(j));
  }
  absl::flat_hash_map<std::string, int> index;
  for (size_t n = 0; n < c.nodes.size(); ++n) index[c.nodes[n].name] = static_cast<int>(n);
  TopoMeter meter(c, jobs, o.slowdown);
  ReplayOptions ro;
  ro.policy = "gpusched";
  ro.gpus_per_node = c.gpus_per_node;
  ro.sample_every = 1e12;  // no timeline
  ro.tie_seed = o.tie_seed;
  ro.config = o.config;
  ro.config.quotas = OneQueue(o.config.quotas, c.Capacity());
  ro.nodes = LabelledNodes(c);
  if (o.policy.starts_with("gpusched-topology")) {
    ro.config.gang.topology_levels.assign(c.levels.begin(), c.levels.end() - 1);
    ro.decorate_pod = [&jobs](int job, PodRequest* pod) { AskTopology(jobs[job], pod); };
    if (o.policy == kTopologyDomainFit && ro.config.scoring.domain_weight == 0) {
      ro.config.scoring.domain_weight = policy::kMeasuredDomainWeight;
    }
  } else {
    ro.config.gang.topology_levels.clear();
  }
  ro.config.scoring.topology_levels = ro.config.gang.topology_levels;  // as the codec does
  ro.on_start = [&](int job, double t, const std::vector<std::string>& nodes) {
    std::vector<int> at;
    for (const std::string& n : nodes) at.push_back(index.at(n));
    return meter.Start(job, t, at);
  };
  std::vector<int> free(c.nodes.size());
  ro.on_step = [&](double t, const ClusterSnapshot& snapshot) {
    for (const NodeInfo* n : snapshot.nodes()) free[index.at(n->name)] = n->free_count();
    meter.Observe(t, free);
  };
  const std::vector<std::pair<std::string, int>> pools = {
      {kNamespace, static_cast<int>(c.nodes.size())}};
  auto run = RunQueueReplay(replay_jobs, pools, ro);
  if (!run.ok()) return run.status();
  for (size_t j = 0; j < run->jobs.size(); ++j) {
    if (run->jobs[j].done) meter.End(static_cast<int>(j), run->jobs[j].end);
  }
  return meter.Result(o.policy);
}

// Kueue-TAS-like: BestEffortFIFO over jobs, TAS placement, all pods at once.
TopoResult RunKueueTas(const TopoCluster& c, const std::vector<TopoJob>& jobs,
                       const TopoCompareOptions& o) {
  TopoMeter meter(c, jobs, o.slowdown);
  std::vector<int> free(c.nodes.size(), c.gpus_per_node);
  std::vector<std::vector<std::pair<int, int>>> placed(jobs.size());
  using Done = std::tuple<double, int>;  // (end, job)
  std::priority_queue<Done, std::vector<Done>, std::greater<>> running;
  std::vector<int> pending;
  size_t next = 0;
  while (next < jobs.size() || !running.empty()) {
    double t = next < jobs.size() ? jobs[next].submit : 1e300;
    if (!running.empty()) t = std::min(t, std::get<0>(running.top()));
    while (!running.empty() && std::get<0>(running.top()) <= t) {
      const int j = std::get<1>(running.top());
      running.pop();
      for (const auto& [n, pods] : placed[j]) free[n] += pods * jobs[j].gpus_per_pod;
      meter.End(j, t);
    }
    while (next < jobs.size() && jobs[next].submit <= t)
      pending.push_back(static_cast<int>(next++));
    std::vector<int> still;
    for (int j : pending) {
      const TopoJob& job = jobs[j];
      TasRequest req{.pods = job.pods, .per_pod = job.gpus_per_pod};
      if (job.gang) req.level = c.Level(job.level), req.required = job.required;
      auto where = KueueTasPlace(c, free, req);
      if (!where.has_value()) {
        still.push_back(j);
        continue;
      }
      std::vector<int> nodes;
      for (const auto& [n, pods] : *where) {
        free[n] -= pods * job.gpus_per_pod;
        nodes.insert(nodes.end(), pods, n);
      }
      placed[j] = *std::move(where);
      running.push({t + job.duration * meter.Start(j, t, nodes), j});
    }
    pending = std::move(still);
    meter.Observe(t, free);
  }
  return meter.Result(o.policy);
}

}  // namespace

absl::StatusOr<TopoResult> RunTopoCompare(const TopoCluster& cluster,
                                          const std::vector<TopoJob>& jobs,
                                          const TopoCompareOptions& o) {
  for (const TopoJob& j : jobs) {
    if (j.gang && cluster.Level(j.level) < 0) {
      return absl::InvalidArgumentError(
          StrCat("job ", j.id, ": level '", j.level, "' is not a level of the cluster"));
    }
  }
  if (o.policy == "gpusched" || o.policy == "gpusched-topology" || o.policy == kTopologyDomainFit) {
    return RunGpusched(cluster, jobs, o);
  }
  if (o.policy == "kueue-tas") return RunKueueTas(cluster, jobs, o);
  return absl::InvalidArgumentError(StrCat("topology comparison: unknown policy '", o.policy,
                                           "' (gpusched, gpusched-topology, ", kTopologyDomainFit,
                                           ", kueue-tas)"));
}

}  // namespace gpusched::sim
