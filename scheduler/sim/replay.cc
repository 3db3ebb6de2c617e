#include "scheduler/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <set>

#include "gpusched/util/strings.h"
#include "scheduler/sim/kai_like.h"
#include "scheduler/sim/kueue_like.h"
#include "scheduler/sim/pool.h"
#include "scheduler/sim/priority_classes.h"
#include "scheduler/sim/queue_replay.h"
#include "scheduler/sim/share_metrics.h"

namespace gpusched::sim {
namespace {

struct JobState {
  int ns = 0;
  int order = 0;  // entry order
  int gpus = 0;
  double submit = 0, duration = 0, remaining = 0;
  double attained = 0;  // GPU-seconds run so far (restart penalties excluded)
  double start = -1, end = -1, pending_since = 0, queue_time = 0, run_start_ = 0;
  bool running = false, done = false;
  bool gang = false;  // several pods that start together (IsGang)
  int epoch = 0;
  Alloc alloc;
};

// A job whose pods start together: a gang of several pods, or one pod
// larger than a node (the gpusched replay runs it as a gang).
bool IsGang(const Job& j, int gpus_per_node) {
  return (j.gang && j.pods > 1) || (j.pods == 1 && j.gpus_per_pod > gpus_per_node);
}

// kLas: duration-agnostic least attained service in the style of Tiresias
// (NSDI'19, discretised 2D-LAS): two queues, a job moves to the second once
// it has received kLasThreshold GPU-seconds; FIFO within a queue; preemptive
// (a job of the first queue displaces one of the second), with SRTF's
// restart penalties.
enum class Kind { kFifo, kSjf, kSrtf, kLas };
constexpr double kLasThreshold = 3600 * 8;  // GPU-seconds: one 8-GPU node-hour

// One baseline's state at a sample time: GPUs in use and the mean wait of
// the waiting jobs, per namespace (index into the replay's names).
struct WorldSample {
  double t = 0;
  std::vector<int64_t> used;
  std::vector<double> mean_wait;
};

class World {
 public:
  // `metrics`, if set, is fed the state after every event time. Every
  // `sample_every` seconds from 0 (0: never) the state is sampled as it was
  // just before that time's events, the way gpusched's replay samples.
  World(Kind kind, Pool pool, std::vector<JobState> jobs, std::vector<int64_t> guarantee,
        ShareMetrics* metrics = nullptr, double sample_every = 0)
      : kind_(kind),
        pool_(std::move(pool)),
        jobs_(std::move(jobs)),
        guarantee_(std::move(guarantee)),
        used_(guarantee_.size(), 0),
        metrics_(metrics),
        sample_every_(sample_every) {}

  void Run() {
    std::vector<int> arrivals(jobs_.size());
    std::iota(arrivals.begin(), arrivals.end(), 0);
    std::stable_sort(arrivals.begin(), arrivals.end(),
                     [&](int a, int b) { return jobs_[a].submit < jobs_[b].submit; });
    size_t next = 0;
    while (next < arrivals.size() || !done_.empty()) {
      double t = next < arrivals.size() ? jobs_[arrivals[next]].submit : 1e300;
      if (!done_.empty()) t = std::min(t, done_.top().time);
      for (; sample_every_ > 0 && next_sample_ <= t; next_sample_ += sample_every_) {
        samples_.push_back(Sample(next_sample_));
      }
      while (!done_.empty() && done_.top().time <= t) {
        Completion c = done_.top();
        done_.pop();
        JobState& j = jobs_[c.job];
        if (c.epoch != j.epoch || !j.running) continue;
        busy_ += (c.time - j.run_start_) * j.gpus;
        Release(c.job);
        j.done = true;
        j.end = c.time;
        makespan_ = std::max(makespan_, c.time);
      }
      while (next < arrivals.size() && jobs_[arrivals[next]].submit <= t) {
        const int id = arrivals[next++];
        jobs_[id].pending_since = jobs_[id].submit;
        Enqueue(id);
      }
      Schedule(t);
      CheckInvariants();
      if (metrics_ != nullptr) Observe(t);
    }
    if (metrics_ != nullptr) metrics_->Finish(makespan_);
  }

  const std::vector<JobState>& jobs() const { return jobs_; }
  double makespan() const { return makespan_; }
  double busy_gpu_seconds() const { return busy_; }
  int64_t preemptions() const { return preemptions_; }
  double lost() const { return lost_; }
  int64_t violations() const { return violations_; }
  const std::vector<WorldSample>& samples() const { return samples_; }

 private:
  struct Completion {
    double time;
    int job;
    int epoch;
    bool operator<(const Completion& o) const { return time > o.time; }
  };

  void Enqueue(int id) {
    if (kind_ == Kind::kSjf) {
      auto it = std::upper_bound(pending_.begin(), pending_.end(), id, [&](int a, int b) {
        return jobs_[a].duration < jobs_[b].duration;
      });
      pending_.insert(it, id);
    } else {
      pending_.push_back(id);
    }
  }

  void Start(int id, double t, Alloc alloc) {
    JobState& j = jobs_[id];
    Take(pool_, alloc);
    j.alloc = std::move(alloc);
    j.running = true;
    if (j.start < 0) j.start = t;
    j.queue_time += t - j.pending_since;
    j.run_start_ = t;
    used_[j.ns] += j.gpus;
    const double extra = kind_ == Kind::kSrtf || kind_ == Kind::kLas ? 1 : 0;
    done_.push({t + j.remaining + extra, id, j.epoch});
  }

  void Release(int id) {
    JobState& j = jobs_[id];
    Give(pool_, j.alloc);
    j.alloc.clear();
    j.running = false;
    used_[j.ns] -= j.gpus;
  }

  void Account(int id, double t) {
    JobState& j = jobs_[id];
    busy_ += (t - j.run_start_) * j.gpus;
    j.attained += (t - j.run_start_) * j.gpus;
    j.remaining -= t - j.run_start_;
  }

  void Preempt(int id, double t) {
    JobState& j = jobs_[id];
    Account(id, t);
    Release(id);
    ++j.epoch;
    j.remaining = std::max(0.0, j.remaining) + Penalty(j.gpus);
    lost_ += Penalty(j.gpus) * j.gpus;
    ++preemptions_;
    j.pending_since = t;
  }

  void Schedule(double t) {
    switch (kind_) {
      case Kind::kFifo:
      case Kind::kSjf:
        return ScheduleBlocking(t);
      case Kind::kSrtf:
        return SchedulePreemptive(t, [&](int id) { return Remaining(id, t); });
      case Kind::kLas:
        return SchedulePreemptive(t, [&](int id) {
          // Queue first (attained GPU-seconds past the threshold), then
          // arrival order.
          const JobState& j = jobs_[id];
          const double attained = j.attained + (j.running ? (t - j.run_start_) * j.gpus : 0);
          return (attained >= kLasThreshold ? 1e12 : 0) + jobs_[id].order;
        });
    }
  }

  void ScheduleBlocking(double t) {
    Alloc a;
    size_t k = 0;
    for (; k < pending_.size(); ++k) {
      if (!Consolidate(pool_, jobs_[pending_[k]].gpus, &a)) break;
      Start(pending_[k], t, a);
    }
    pending_.erase(pending_.begin(), pending_.begin() + k);
  }

  double Remaining(int id, double t) const {
    const JobState& j = jobs_[id];
    return j.running ? j.remaining - (t - j.run_start_) : j.remaining;
  }

  // Preemptive: every job, pending or running, by `key` (lowest first);
  // quota greedily in that order, running jobs left out are preempted.
  template <typename Key>
  void SchedulePreemptive(double t, Key key) {
    std::vector<int> all = pending_;
    for (int id : running_list()) all.push_back(id);
    std::stable_sort(all.begin(), all.end(), [&](int a, int b) {
      const double ra = key(a), rb = key(b);
      if (ra != rb) return ra < rb;
      return !jobs_[a].running && jobs_[b].running;
    });
    int64_t quota = pool_.capacity;
    std::vector<int> in;
    for (int id : all) {
      if (jobs_[id].gpus <= quota) {
        quota -= jobs_[id].gpus;
        in.push_back(id);
      } else if (jobs_[id].running) {
        Preempt(id, t);
        pending_.push_back(id);
      }
    }
    Alloc a;
    for (int id : in) {
      if (jobs_[id].running) continue;
      if (Consolidate(pool_, jobs_[id].gpus, &a)) {
        Start(id, t, a);
        pending_.erase(std::find(pending_.begin(), pending_.end(), id));
      }
    }
  }

  void Observe(double t) {
    std::vector<int64_t> waiting(used_.size(), 0);
    for (int id : pending_) waiting[jobs_[id].ns] += jobs_[id].gpus;
    metrics_->Observe(t, used_, waiting);
  }

  WorldSample Sample(double t) const {
    WorldSample out{t, used_, std::vector<double>(used_.size(), 0)};
    std::vector<int> waiting(used_.size(), 0);
    for (int id : pending_) {
      out.mean_wait[jobs_[id].ns] += t - jobs_[id].submit;
      ++waiting[jobs_[id].ns];
    }
    for (size_t n = 0; n < used_.size(); ++n) {
      if (waiting[n] > 0) out.mean_wait[n] /= waiting[n];
    }
    return out;
  }

  std::vector<int> running_list() const {
    std::vector<int> out;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].running) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  void CheckInvariants() {
    for (int f : pool_.free) {
      if (f < 0 || f > pool_.g) ++violations_;
    }
    for (size_t n = 0; n < used_.size(); ++n) {
      if (used_[n] > guarantee_[n]) ++violations_;
    }
  }

  Kind kind_;
  Pool pool_;
  std::vector<JobState> jobs_;
  std::vector<int64_t> guarantee_;
  std::vector<int64_t> used_;
  std::vector<int> pending_;
  std::priority_queue<Completion> done_;
  ShareMetrics* metrics_;
  double sample_every_, next_sample_ = 0;
  std::vector<WorldSample> samples_;
  double makespan_ = 0, busy_ = 0, lost_ = 0;
  int64_t preemptions_ = 0, violations_ = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::ceil(q * v.size())) - 1;
  return v[std::min(k, v.size() - 1)];
}

// What one replay algorithm produced, before the metrics are computed.
struct RawRun {
  std::vector<JobState> finished;
  double makespan = 0, busy = 0, lost = 0;
  int64_t preemptions = 0, reclaim_evictions = 0, violations = 0;
  std::vector<int64_t> max_borrowed;  // per pool
  std::vector<int64_t> quota_gpus;    // per pool
  std::vector<TimelinePoint> timeline;
  bool share_metrics = false;  // the three below computed
  std::vector<double> guarantee_waits;
  double util_while_waiting = -1, surplus_jain = -1;
  std::optional<EstimateAccuracy> estimates;  // gpusched's replay
};

// The inputs every one-pool policy's ShareMetrics needs.
struct Shares {
  std::vector<ShareSpec> ns;  // in pool order
  int64_t capacity = 0;       // GPUs of the pool
};

// The timeline of a baseline run from its worlds' samples (one world per VC,
// or one pooled world), all taken at the same times k * sample_every: a
// world that has finished takes no more samples, and holds and waits for
// nothing from then on.
std::vector<TimelinePoint> BaselineTimeline(const std::vector<std::vector<WorldSample>>& worlds,
                                            const std::vector<std::string>& names,
                                            int64_t capacity) {
  size_t points = 0;
  for (const auto& w : worlds) points = std::max(points, w.size());
  std::vector<TimelinePoint> out(points);
  for (size_t k = 0; k < points; ++k) {
    TimelinePoint& p = out[k];
    int64_t used = 0;
    for (const std::string& ns : names) p.used_gpus[ns] = p.queue_wait[ns] = 0;
    for (const auto& w : worlds) {
      if (k >= w.size()) continue;
      p.t = w[k].t;
      for (size_t n = 0; n < names.size(); ++n) {
        p.used_gpus[names[n]] += static_cast<double>(w[k].used[n]);
        p.queue_wait[names[n]] += w[k].mean_wait[n];  // a namespace waits in one world only
        used += w[k].used[n];
      }
    }
    p.utilisation = capacity > 0 ? static_cast<double>(used) / static_cast<double>(capacity) : 0;
  }
  return out;
}

// The baselines. Per VC (`pooled` false): one World per pool, each job on
// its own VC's pool (the Helios artifact's protocol). Pooled: one World over
// every VC's nodes, the cluster gpusched's queue replay schedules, every job
// in one queue.
absl::StatusOr<RawRun> RunBaseline(Kind kind, bool pooled, const std::vector<Job>& jobs,
                                   const std::vector<std::string>& names,
                                   const std::vector<int64_t>& guarantee, const Shares& shares,
                                   const ReplayOptions& o) {
  const int64_t total = std::accumulate(guarantee.begin(), guarantee.end(), int64_t{0});
  auto ns_of = [&](const std::string& ns) {
    return static_cast<int>(std::find(names.begin(), names.end(), ns) - names.begin());
  };
  std::vector<std::vector<JobState>> by_ns(names.size());
  int order = 0;
  for (const Job& j : jobs) {
    const int ns = ns_of(j.ns);
    if (ns >= static_cast<int>(names.size()) || j.total_gpus() <= 0) continue;
    JobState s;
    s.ns = ns;
    s.order = order++;
    s.gpus = j.total_gpus();
    s.submit = j.submit;
    s.duration = s.remaining = j.duration * o.load;
    s.gang = IsGang(j, o.gpus_per_node);
    if (s.gpus > (pooled ? total : guarantee[ns])) {
      return absl::InvalidArgumentError(StrCat(j.id, " needs more GPUs than ", j.ns, " has"));
    }
    by_ns[pooled ? 0 : ns].push_back(s);
  }
  RawRun raw;
  raw.max_borrowed.assign(names.size(), 0);
  raw.quota_gpus = guarantee;
  if (pooled) {
    ShareMetrics metrics(shares.ns, shares.capacity);
    World w(kind, MakePool(total, o.gpus_per_node), std::move(by_ns[0]),
            std::vector<int64_t>(names.size(), total), &metrics,
            o.sample_every);  // one queue, no per-VC cap
    w.Run();
    raw.timeline = BaselineTimeline({w.samples()}, names, total);
    raw.share_metrics = true;
    raw.guarantee_waits = metrics.GuaranteeWaits();
    raw.util_while_waiting = metrics.UtilisationWhileWaiting();
    raw.surplus_jain = metrics.MeanSurplusJain();
    raw.finished = w.jobs();
    raw.makespan = w.makespan();
    raw.busy = w.busy_gpu_seconds();
    raw.preemptions = w.preemptions();
    raw.lost = w.lost();
    return raw;
  }
  std::vector<std::vector<WorldSample>> samples;
  for (size_t n = 0; n < names.size(); ++n) {
    std::vector<int64_t> g(names.size(), 0);
    g[n] = guarantee[n];
    World w(kind, MakePool(guarantee[n], o.gpus_per_node), std::move(by_ns[n]), g, nullptr,
            o.sample_every);
    w.Run();
    samples.push_back(w.samples());
    for (const JobState& s : w.jobs()) raw.finished.push_back(s);
    raw.makespan = std::max(raw.makespan, w.makespan());
    raw.busy += w.busy_gpu_seconds();
    raw.preemptions += w.preemptions();
    raw.lost += w.lost();
    raw.violations += w.violations();
  }
  raw.timeline = BaselineTimeline(samples, names, total);
  return raw;
}

// gpusched: one shared pool driven by the queue manager (queue_replay.h).
absl::StatusOr<RawRun> RunGpusched(const std::vector<Job>& jobs,
                                   const std::vector<std::pair<std::string, int>>& pools,
                                   const ReplayOptions& o) {
  auto run = RunQueueReplay(jobs, pools, o);
  if (!run.ok()) return run.status();
  RawRun raw;
  for (const QueueReplayJob& q : run->jobs) {
    JobState s;
    s.ns = q.ns;
    s.submit = q.submit;
    s.duration = q.duration;
    s.end = q.end;
    s.queue_time = q.queue_time;
    s.done = q.done;
    s.gang = q.gang;
    raw.finished.push_back(s);
  }
  raw.makespan = run->makespan;
  raw.busy = run->busy_gpu_seconds;
  raw.preemptions = run->preemptions;
  raw.reclaim_evictions = run->reclaim_evictions;
  raw.lost = run->lost_gpu_seconds;
  raw.violations = run->quota_violations;
  raw.timeline = std::move(run->timeline);
  raw.max_borrowed = std::move(run->max_borrowed);
  raw.quota_gpus = std::move(run->guaranteed);
  raw.share_metrics = true;
  raw.guarantee_waits = std::move(run->guarantee_waits);
  raw.util_while_waiting = run->util_while_waiting;
  raw.surplus_jain = run->surplus_jain;
  raw.estimates = run->estimates;
  return raw;
}

// A Kueue-like or KAI-like run as the replay's raw result.
RawRun FromBlockRun(KueueRun run, const std::vector<KueueJob>& in, const std::vector<bool>& gang,
                    const std::vector<std::string>& names, const Shares& shares) {
  RawRun raw;
  const double total = static_cast<double>(shares.capacity);
  for (const auto& [t, usage] : run.usage_samples) {
    TimelinePoint p;
    p.t = t;
    for (size_t n = 0; n < names.size(); ++n) {
      p.used_gpus[names[n]] = static_cast<double>(usage[n]);
      p.utilisation += total > 0 ? static_cast<double>(usage[n]) / total : 0;
    }
    raw.timeline.push_back(std::move(p));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    JobState s;
    s.ns = in[i].ns;
    s.submit = in[i].submit;
    s.duration = in[i].duration;
    s.end = run.jobs[i].end;
    s.queue_time = run.jobs[i].queue_time;
    s.done = run.jobs[i].done;
    s.gang = gang[i];
    raw.finished.push_back(s);
  }
  raw.makespan = run.makespan;
  raw.busy = run.busy_gpu_seconds;
  raw.preemptions = run.preemptions;
  raw.reclaim_evictions = run.reclaim_evictions;
  raw.lost = run.lost_gpu_seconds;
  raw.max_borrowed.assign(names.size(), 0);
  for (const ShareSpec& n : shares.ns) raw.quota_gpus.push_back(n.guarantee);
  raw.share_metrics = true;
  raw.guarantee_waits = std::move(run.guarantee_waits);
  raw.util_while_waiting = run.util_while_waiting;
  raw.surplus_jain = run.surplus_jain;
  return raw;
}

// The Kueue-like and KAI-like baselines (kueue_like.h, kai_like.h) on the
// shared pool; `policy` names the baseline or a Kueue-like variant.
absl::StatusOr<RawRun> RunBlock(const std::string& policy, const std::vector<Job>& jobs,
                                const std::vector<std::string>& names, const Shares& shares,
                                const ReplayOptions& o) {
  std::vector<KueueJob> in;
  std::vector<bool> gang;
  for (const Job& j : jobs) {
    const int ns = static_cast<int>(std::find(names.begin(), names.end(), j.ns) - names.begin());
    if (ns >= static_cast<int>(names.size()) || j.total_gpus() <= 0) continue;
    if (j.total_gpus() > shares.capacity) {
      return absl::InvalidArgumentError(StrCat(j.id, " needs more GPUs than the pool has"));
    }
    auto pc = LookupPriorityClass(j.priority_class);
    if (!pc.ok()) return absl::InvalidArgumentError(StrCat(j.id, ": ", pc.status().message()));
    in.push_back({ns, j.priority_class.empty() ? j.priority : pc->value, j.total_gpus(), j.submit,
                  j.duration * o.load});
    gang.push_back(IsGang(j, o.gpus_per_node));
  }
  KueueRun run;
  if (policy == "kai-like") {
    run = RunKaiLike(in, shares.ns,
                     {.gpus_per_node = o.gpus_per_node,
                      .sample_every = o.sample_every,
                      .capacity = shares.capacity});
  } else {
    KueueOptions ko{.gpus_per_node = o.gpus_per_node,
                    .sample_every = o.sample_every,
                    .capacity = shares.capacity};
    const bool before = policy == "kueue-like-before";
    ko.fill_back = !before && policy != "kueue-like-no-fill-back";
    ko.nominal_first = !before && policy != "kueue-like-no-ordering";
    ko.preempt_within_nominal_only = !before;
    run = RunKueueLike(in, shares.ns, ko);
  }
  return FromBlockRun(std::move(run), in, gang, names, shares);
}

// The ShareMetrics of a run (time to guarantee, utilisation while jobs
// wait, surplus fairness) and its gangs' longest wait.
void ShareAndGangMetrics(RawRun& raw, ReplayResult& r) {
  r.share_metrics = raw.share_metrics;
  r.has_estimates = raw.estimates.has_value();
  if (raw.estimates) r.estimates = *raw.estimates;
  r.util_while_waiting = raw.util_while_waiting;
  r.surplus_jain = raw.surplus_jain;
  std::vector<double> waits = std::move(raw.guarantee_waits);
  std::sort(waits.begin(), waits.end());
  r.guarantee_episodes = static_cast<int64_t>(waits.size());
  if (!waits.empty()) {
    r.avg_time_to_guarantee =
        std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size());
    r.p95_time_to_guarantee = waits[std::min(waits.size() - 1, waits.size() * 95 / 100)];
    r.max_time_to_guarantee = waits.back();
  }
  for (const JobState& s : raw.finished) {
    if (!s.gang) continue;
    ++r.gang_jobs;
    r.max_gang_wait = std::max(r.max_gang_wait, s.queue_time);
  }
}

// The metrics of a run (JCT percentiles, utilisation, per namespace,
// fairness, time to guarantee).
absl::StatusOr<ReplayResult> Summarise(RawRun raw, const std::vector<std::string>& names,
                                       const std::vector<int64_t>& guarantee,
                                       const ReplayOptions& o) {
  ReplayResult r;
  r.policy = o.policy;
  r.load = o.load;
  r.makespan = raw.makespan;
  r.preemptions = raw.preemptions;
  r.reclaim_evictions = raw.reclaim_evictions;
  r.lost_gpu_seconds = raw.lost;
  r.quota_violations = raw.violations;
  r.timeline = std::move(raw.timeline);
  ShareAndGangMetrics(raw, r);
  std::vector<double> jct, queue;
  double qsum = 0;
  std::vector<double> ns_jct(names.size(), 0), ns_q(names.size(), 0), ns_sd(names.size(), 0);
  std::vector<int64_t> ns_n(names.size(), 0);
  for (const JobState& s : raw.finished) {
    if (!s.done) return absl::InternalError("a job never finished");
    const double c = s.end - s.submit;
    jct.push_back(c);
    queue.push_back(s.queue_time);
    qsum += s.queue_time;
    ns_jct[s.ns] += c;
    ns_q[s.ns] += s.queue_time;
    ns_sd[s.ns] += s.duration > 0 ? c / s.duration : 1;
    ++ns_n[s.ns];
  }
  r.jobs = static_cast<int64_t>(jct.size());
  if (r.jobs > 0) {
    r.avg_jct = std::accumulate(jct.begin(), jct.end(), 0.0) / r.jobs;
    r.avg_queue = qsum / r.jobs;
  }
  r.p50_jct = Percentile(jct, 0.50);
  r.p95_jct = Percentile(jct, 0.95);
  r.p99_jct = Percentile(jct, 0.99);
  std::sort(jct.begin(), jct.end());
  std::sort(queue.begin(), queue.end());
  r.jct_sorted = std::move(jct);
  r.queue_sorted = std::move(queue);
  const double cap = std::accumulate(guarantee.begin(), guarantee.end(), 0.0);
  r.utilisation = r.makespan > 0 ? raw.busy / (cap * r.makespan) : 0;
  double smin = 1e300, smax = 0;
  for (size_t n = 0; n < names.size(); ++n) {
    NamespaceStats st;
    st.jobs = ns_n[n];
    st.quota_gpus = raw.quota_gpus[n];
    st.max_borrowed = raw.max_borrowed[n];
    if (ns_n[n] > 0) {
      st.avg_jct = ns_jct[n] / ns_n[n];
      st.avg_queue = ns_q[n] / ns_n[n];
      st.avg_slowdown = ns_sd[n] / ns_n[n];
      smin = std::min(smin, st.avg_slowdown);
      smax = std::max(smax, st.avg_slowdown);
    }
    r.per_ns[names[n]] = st;
  }
  r.fairness = smin > 0 && smin < 1e300 ? smax / smin : 0;
  return r;
}

}  // namespace

absl::StatusOr<ReplayResult> RunReplay(const std::vector<Job>& jobs,
                                       const std::vector<std::pair<std::string, int>>& pools,
                                       const ReplayOptions& o) {
  std::vector<std::string> names;
  std::vector<int64_t> guarantee;
  for (const auto& [ns, nodes] : pools) {
    names.push_back(ns);
    guarantee.push_back(int64_t{nodes} * o.gpus_per_node);
  }
  const QuotaConfig quotas = ReplayQuotas(o.config.quotas, pools, o.gpus_per_node);
  Shares shares;
  shares.ns = ReplayShares(quotas, pools);
  shares.capacity = std::accumulate(guarantee.begin(), guarantee.end(), int64_t{0});
  static const std::map<std::string, std::pair<Kind, bool>> kBaselines = {
      {"fifo", {Kind::kFifo, false}},   {"sjf", {Kind::kSjf, false}},
      {"srtf", {Kind::kSrtf, false}},   {"fifo-pool", {Kind::kFifo, true}},
      {"sjf-pool", {Kind::kSjf, true}}, {"srtf-pool", {Kind::kSrtf, true}},
      {"las-pool", {Kind::kLas, true}}};
  absl::StatusOr<RawRun> raw;
  if (o.policy == "gpusched") {
    raw = RunGpusched(jobs, pools, o);
  } else if (o.policy == "kai-like" || o.policy.starts_with("kueue-like")) {
    static const std::set<std::string> kBlock = {"kai-like", "kueue-like",
                                                 "kueue-like-no-fill-back",
                                                 "kueue-like-no-ordering", "kueue-like-before"};
    if (!kBlock.contains(o.policy)) {
      return absl::InvalidArgumentError(StrCat("unknown replay policy '", o.policy, "'"));
    }
    raw = RunBlock(o.policy, jobs, names, shares, o);
  } else if (auto it = kBaselines.find(o.policy); it != kBaselines.end()) {
    raw = RunBaseline(it->second.first, it->second.second, jobs, names, guarantee, shares, o);
  } else {
    return absl::InvalidArgumentError(StrCat("unknown replay policy '", o.policy, "'"));
  }
  if (!raw.ok()) return raw.status();
  return Summarise(std::move(*raw), names, guarantee, o);
}

}  // namespace gpusched::sim
