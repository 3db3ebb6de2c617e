#include "scheduler/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

#include "gpusched/util/strings.h"

namespace gpusched::sim {
namespace {

struct Pool {
  int g = 8;
  std::vector<int> free;
  int64_t total_free = 0;
  int64_t capacity = 0;
};

using Alloc = std::vector<std::pair<int, int>>;  // (node, gpus)

// Helios' consolidate placer.
bool Consolidate(const Pool& p, int need, Alloc* out) {
  out->clear();
  if (need <= 0 || p.total_free < need) return false;
  const int n = static_cast<int>(p.free.size());
  if (need <= p.g) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (p.free[i] >= need && (best < 0 || p.free[i] < p.free[best])) best = i;
    }
    if (best < 0) return false;
    out->push_back({best, need});
    return true;
  }
  int k = need / p.g;
  const int r = need % p.g;
  std::vector<uint8_t> used(n, 0);
  for (int i = 0; i < n && k > 0; ++i) {
    if (p.free[i] == p.g) {
      out->push_back({i, p.g});
      used[i] = 1;
      --k;
    }
  }
  if (k > 0) return false;
  if (r > 0) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (!used[i] && (best < 0 || p.free[i] > p.free[best])) best = i;
    }
    if (best < 0 || p.free[best] < r) return false;
    out->push_back({best, r});
  }
  return true;
}

double Penalty(int gpus) { return gpus == 1 ? 7 : gpus <= 8 ? 30 : 60; }

struct JobState {
  int ns = 0;
  int order = 0;  // entry order
  int gpus = 0;
  double submit = 0, duration = 0, remaining = 0;
  double start = -1, end = -1, pending_since = 0, queue_time = 0, run_start_ = 0;
  bool running = false, done = false, borrowing = false;
  int epoch = 0;
  Alloc alloc;
};

enum class Kind { kFifo, kSjf, kSrtf, kGpusched };

class World {
 public:
  World(Kind kind, Pool pool, std::vector<JobState> jobs, std::vector<int64_t> guarantee,
        double sample_every)
      : kind_(kind),
        pool_(std::move(pool)),
        jobs_(std::move(jobs)),
        guarantee_(std::move(guarantee)),
        used_(guarantee_.size(), 0),
        sample_every_(sample_every) {}

  void Run() {
    std::vector<int> arrivals(jobs_.size());
    std::iota(arrivals.begin(), arrivals.end(), 0);
    std::stable_sort(arrivals.begin(), arrivals.end(),
                     [&](int a, int b) { return jobs_[a].submit < jobs_[b].submit; });
    size_t next = 0;
    double next_sample = 0;
    while (next < arrivals.size() || !done_.empty()) {
      double t = next < arrivals.size() ? jobs_[arrivals[next]].submit : 1e300;
      if (!done_.empty()) t = std::min(t, done_.top().time);
      while (next_sample <= t) Sample(next_sample), next_sample += sample_every_;
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
    }
  }

  const std::vector<JobState>& jobs() const { return jobs_; }
  double makespan() const { return makespan_; }
  double busy_gpu_seconds() const { return busy_; }
  int64_t preemptions() const { return preemptions_; }
  double lost() const { return lost_; }
  int64_t violations() const { return violations_; }
  int64_t max_borrowed(int ns) const { return max_borrowed_[ns]; }
  std::vector<TimelinePoint>& timeline() { return timeline_; }
  void set_ns_names(std::vector<std::string> n) {
    names_ = std::move(n);
    max_borrowed_.assign(names_.size(), 0);
  }

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
    for (auto [n, g] : alloc) pool_.free[n] -= g, pool_.total_free -= g;
    j.alloc = std::move(alloc);
    j.running = true;
    if (j.start < 0) j.start = t;
    j.queue_time += t - j.pending_since;
    j.run_start_ = t;
    used_[j.ns] += j.gpus;
    j.borrowing = used_[j.ns] > guarantee_[j.ns];
    if (!max_borrowed_.empty()) {
      max_borrowed_[j.ns] = std::max(max_borrowed_[j.ns], used_[j.ns] - guarantee_[j.ns]);
    }
    const double extra = kind_ == Kind::kSrtf ? 1 : 0;
    done_.push({t + j.remaining + extra, id, j.epoch});
  }

  void Release(int id) {
    JobState& j = jobs_[id];
    for (auto [n, g] : j.alloc) pool_.free[n] += g, pool_.total_free += g;
    j.alloc.clear();
    j.running = false;
    used_[j.ns] -= j.gpus;
  }

  void Account(int id, double t) {
    JobState& j = jobs_[id];
    busy_ += (t - j.run_start_) * j.gpus;
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
        return ScheduleSrtf(t);
      case Kind::kGpusched:
        return ScheduleShared(t);
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

  void ScheduleSrtf(double t) {
    std::vector<int> all = pending_;
    for (int id : running_list()) all.push_back(id);
    std::stable_sort(all.begin(), all.end(), [&](int a, int b) {
      const double ra = Remaining(a, t), rb = Remaining(b, t);
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

  // Shared pool: jobs within their namespace's guarantee first (reclaiming
  // borrowed GPUs if needed), then borrowers; backfill (no blocking).
  void ScheduleShared(double t) {
    Alloc a;
    std::vector<int> order = pending_;
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      const bool ix = used_[jobs_[x].ns] + jobs_[x].gpus <= guarantee_[jobs_[x].ns];
      const bool iy = used_[jobs_[y].ns] + jobs_[y].gpus <= guarantee_[jobs_[y].ns];
      if (ix != iy) return ix;
      return jobs_[x].submit < jobs_[y].submit;
    });
    std::vector<int> started;
    for (int id : order) {
      JobState& j = jobs_[id];
      const bool within = used_[j.ns] + j.gpus <= guarantee_[j.ns];
      if (Consolidate(pool_, j.gpus, &a)) {
        Start(id, t, a);
        started.push_back(id);
        continue;
      }
      if (!within) continue;
      // Reclaim: preempt the youngest borrowing jobs of other namespaces.
      std::vector<int> borrowers;
      for (int r : running_list()) {
        if (jobs_[r].ns != j.ns && used_[jobs_[r].ns] > guarantee_[jobs_[r].ns]) {
          borrowers.push_back(r);
        }
      }
      std::sort(borrowers.begin(), borrowers.end(),
                [&](int x, int y) { return jobs_[x].run_start_ > jobs_[y].run_start_; });
      bool placed = false;
      for (int r : borrowers) {
        if (used_[jobs_[r].ns] <= guarantee_[jobs_[r].ns]) continue;
        Preempt(r, t);
        pending_.push_back(r);
        if (Consolidate(pool_, j.gpus, &a)) {
          Start(id, t, a);
          started.push_back(id);
          placed = true;
          break;
        }
      }
      if (!placed) ++violations_;
    }
    for (int id : started) pending_.erase(std::find(pending_.begin(), pending_.end(), id));
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
    if (kind_ != Kind::kGpusched) {
      for (size_t n = 0; n < used_.size(); ++n) {
        if (used_[n] > guarantee_[n]) ++violations_;
      }
    }
  }

  void Sample(double t) {
    if (names_.empty()) return;
    TimelinePoint p;
    p.t = t;
    p.utilisation =
        pool_.capacity > 0 ? 1.0 - static_cast<double>(pool_.total_free) / pool_.capacity : 0;
    std::vector<double> sum(names_.size(), 0);
    std::vector<int> cnt(names_.size(), 0);
    for (int id : pending_) {
      sum[jobs_[id].ns] += t - jobs_[id].submit;
      ++cnt[jobs_[id].ns];
    }
    for (size_t n = 0; n < names_.size(); ++n) {
      p.queue_wait[names_[n]] = cnt[n] ? sum[n] / cnt[n] : 0;
    }
    timeline_.push_back(std::move(p));
  }

  Kind kind_;
  Pool pool_;
  std::vector<JobState> jobs_;
  std::vector<int64_t> guarantee_;
  std::vector<int64_t> used_;
  std::vector<int64_t> max_borrowed_;
  std::vector<std::string> names_;
  std::vector<int> pending_;
  std::priority_queue<Completion> done_;
  double makespan_ = 0, busy_ = 0, lost_ = 0, sample_every_;
  int64_t preemptions_ = 0, violations_ = 0;
  std::vector<TimelinePoint> timeline_;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::ceil(q * v.size())) - 1;
  return v[std::min(k, v.size() - 1)];
}

}  // namespace

absl::StatusOr<ReplayResult> RunReplay(const std::vector<Job>& jobs,
                                       const std::vector<std::pair<std::string, int>>& pools,
                                       const ReplayOptions& o) {
  Kind kind;
  if (o.policy == "fifo") {
    kind = Kind::kFifo;
  } else if (o.policy == "sjf") {
    kind = Kind::kSjf;
  } else if (o.policy == "srtf") {
    kind = Kind::kSrtf;
  } else if (o.policy == "gpusched") {
    kind = Kind::kGpusched;
  } else {
    return absl::InvalidArgumentError(StrCat("unknown replay policy '", o.policy, "'"));
  }
  std::vector<std::string> names;
  std::vector<int64_t> guarantee;
  for (const auto& [ns, nodes] : pools) {
    names.push_back(ns);
    guarantee.push_back(int64_t{nodes} * o.gpus_per_node);
  }
  auto ns_of = [&](const std::string& ns) {
    return static_cast<int>(std::find(names.begin(), names.end(), ns) - names.begin());
  };
  std::vector<std::vector<JobState>> by_ns(names.size());
  std::vector<JobState> all;
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
    if (s.gpus > guarantee[ns]) {
      return absl::InvalidArgumentError(StrCat(j.id, " needs more GPUs than ", j.ns, " has"));
    }
    all.push_back(s);
  }
  ReplayResult r;
  r.policy = o.policy;
  r.load = o.load;
  std::vector<JobState> finished;
  auto make_pool = [&](int64_t gpus) {
    Pool p;
    p.g = o.gpus_per_node;
    p.free.assign(gpus / o.gpus_per_node, o.gpus_per_node);
    p.capacity = p.total_free = gpus;
    return p;
  };
  double busy = 0;
  std::vector<int64_t> max_borrowed(names.size(), 0);
  if (kind == Kind::kGpusched) {
    const int64_t total = std::accumulate(guarantee.begin(), guarantee.end(), int64_t{0});
    World w(kind, make_pool(total), all, guarantee, o.sample_every);
    w.set_ns_names(names);
    w.Run();
    finished = w.jobs();
    r.makespan = w.makespan();
    busy = w.busy_gpu_seconds();
    r.preemptions = w.preemptions();
    r.lost_gpu_seconds = w.lost();
    r.quota_violations = w.violations();
    r.timeline = std::move(w.timeline());
    for (size_t n = 0; n < names.size(); ++n) max_borrowed[n] = w.max_borrowed(n);
  } else {
    for (const JobState& s : all) by_ns[s.ns].push_back(s);
    for (size_t n = 0; n < names.size(); ++n) {
      std::vector<int64_t> g(names.size(), 0);
      g[n] = guarantee[n];
      World w(kind, make_pool(guarantee[n]), std::move(by_ns[n]), g, o.sample_every);
      w.Run();
      for (const JobState& s : w.jobs()) finished.push_back(s);
      r.makespan = std::max(r.makespan, w.makespan());
      busy += w.busy_gpu_seconds();
      r.preemptions += w.preemptions();
      r.lost_gpu_seconds += w.lost();
      r.quota_violations += w.violations();
    }
  }
  std::vector<double> jct;
  double qsum = 0;
  std::vector<double> ns_jct(names.size(), 0), ns_q(names.size(), 0), ns_sd(names.size(), 0);
  std::vector<int64_t> ns_n(names.size(), 0);
  for (const JobState& s : finished) {
    if (!s.done) return absl::InternalError("a job never finished");
    const double c = s.end - s.submit;
    jct.push_back(c);
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
  const double cap = std::accumulate(guarantee.begin(), guarantee.end(), 0.0);
  r.utilisation = r.makespan > 0 ? busy / (cap * r.makespan) : 0;
  double smin = 1e300, smax = 0;
  for (size_t n = 0; n < names.size(); ++n) {
    NamespaceStats st;
    st.jobs = ns_n[n];
    st.quota_gpus = guarantee[n];
    st.max_borrowed = max_borrowed[n];
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

}  // namespace gpusched::sim
