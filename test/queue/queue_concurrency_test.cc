// Concurrency stress test of the queue manager wired as `gpusched serve`
// wires it (InstallQueue, QueueConfigApplier, ReclaimPlannerThread,
// AsyncClusterWriter). kube-scheduler's filter, prioritize, bind and preempt
// arrive from several threads while other threads tick, hot-reload the
// policy file (quotas and scoring), switch the quota source between GPUQuota
// objects and the file, change the cluster (pods created, finished and
// deleted; spare nodes added, cordoned and removed; a resync), refresh the
// estimated starts and read the debug pages (Report, ExplainPod, Positions,
// metrics).
//
// What is asserted holds for every interleaving:
//  - on every snapshot a checker thread sees: no device held twice, and no
//    namespace holding more than the largest limit any config gave it;
//  - at the end, with every thread stopped, the first config back and two
//    ticks run: the queue invariants of the kube tests (queue_invariants.h:
//    no device twice, no quota overrun, the queue counts exactly what is
//    held, every placeholder a live reservation), and no partial gang (a
//    gang holds nothing, or all its members hold devices, bound or
//    reserved).
// Gang members are never offered as preemption victims here (the property
// test covers a gang losing a member); gangs are deleted and finished whole.
// The TSan CI step builds and runs this test to find data races.
//
// Work: GPUSCHED_CONCURRENCY_STEPS steps of the cluster source (default
// 1000, about 1 ms each); every other thread runs until those are done.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gpusched/core/cluster_source.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/policy/framework.h"
#include "gpusched/util/metrics.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_manager.h"
#include "scheduler/queue/queue_wiring.h"
#include "scheduler/queue/quota_objects.h"
#include "test/kube/queue_invariants.h"
#include "test/testing/builders.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::CheckQueueInvariants;
using ::gpusched::testing::Dgx1V100;
using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::Pcie4xT4;
using ::gpusched::testing::PodBuilder;

const char* const kNamespaces[] = {"team-a", "team-b", "team-c", "guest"};
const char* const kSpareNodes[] = {"t4-spare-0", "t4-spare-1"};
constexpr int kMaxPending = 30;
constexpr int kSchedulers = 3;

int Steps() {
  const char* env = std::getenv("GPUSCHED_CONCURRENCY_STEPS");
  return env != nullptr ? std::atoi(env) : 1000;
}

void Pause(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

NamespaceQuota Quota(int64_t guaranteed, int64_t limit, std::string cohort = "") {
  NamespaceQuota q;
  q.gpus = {guaranteed, limit};
  q.cohort = std::move(cohort);
  // BestEffortFIFO (the default) lets units of a namespace pass each other,
  // so several of its gangs are admitted and placed side by side: the case
  // that once took a namespace to twice its limit.
  q.queueing = QueueingStrategy::kBestEffortFifo;
  return q;
}

// team-a's H100 limit is the same in every config: a namespace above a
// lowered per-model limit would be a legal state, not a violation.
NamespaceQuota TeamA(int64_t guaranteed) {
  NamespaceQuota q = Quota(guaranteed, 8, "research");
  q.models["H100"] = {2, 6};
  return q;
}

// The policy file the test starts and ends with: every limit at the largest
// any config of this test sets. Limits are tight (20 GPUs in all on a
// cluster of 36) so that namespaces often bind at their limit.
SchedulerConfig BaseConfig() {
  SchedulerConfig c;
  c.quotas.enabled = true;
  c.quotas.namespaces["team-a"] = TeamA(4);
  c.quotas.namespaces["team-b"] = Quota(4, 6, "research");
  c.quotas.namespaces["team-c"] = Quota(2, 4);
  c.quotas.default_quota = Quota(1, 2);
  c.gang.reservation_seconds = 600;  // never expires within the test
  return c;
}

// The file after a hot reload: team-c's and the default limits lowered,
// guarantees moved, another scoring, reclaim from any borrower.
SchedulerConfig ReloadedConfig() {
  SchedulerConfig c = BaseConfig();
  c.quotas.namespaces["team-a"] = TeamA(2);
  c.quotas.namespaces["team-c"] = Quota(1, 2);
  c.quotas.default_quota = Quota(0, 1);
  c.scoring.scorers = {{"GpuTopology", 1, {}}, {"GpuPacking", 3, {.spread = true}}};
  c.reclaim.only_lower_priority = false;
  return c;
}

// GPUQuota objects as the watcher resolves them.
ResolvedQuotas QuotaObjects() {
  ResolvedQuotas r;
  r.namespaces["team-a"] = TeamA(3);
  r.namespaces["team-b"] = Quota(5, 6, "research");
  r.namespaces["team-c"] = Quota(3, 4);
  r.namespaces["guest"] = Quota(0, 2);
  return r;
}

// The largest limit of each namespace over the configs above (milli-GPUs).
int64_t MaxLimitMilli(const std::string& ns) {
  static const std::map<std::string, int64_t> limits = {
      {"team-a", 8'000}, {"team-b", 6'000}, {"team-c", 4'000}, {"guest", 2'000}};
  return limits.at(ns);
}

std::shared_ptr<const policy::Framework> FrameworkOf(const SchedulerConfig& c) {
  auto fw = policy::Framework::Create(c.scoring);
  EXPECT_TRUE(fw.ok()) << fw.status();
  return std::shared_ptr<const policy::Framework>(std::move(*fw));
}

// Evictions applied to the state, as the file source applies them.
class StateEvictor final : public ClusterWriter {
 public:
  explicit StateEvictor(ClusterState* state) : state_(state) {}
  absl::Status Evict(const PodRequest& pod, const std::string&) override {
    state_->RemovePodsAndCommit({pod.uid});
    evictions.fetch_add(1);
    return absl::OkStatus();
  }
  std::atomic<int64_t> evictions{0};

 private:
  ClusterState* state_;
};

// Violations found by any thread.
class Violations {
 public:
  void Add(const std::string& what) {
    if (what.empty()) return;
    absl::MutexLock l(&mu_);
    if (found_.size() < 20) found_.push_back(what);
  }
  std::string All() const {
    absl::MutexLock l(&mu_);
    std::string out;
    for (const std::string& v : found_) StrAppend(&out, v, "\n");
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> found_ ABSL_GUARDED_BY(mu_);
};

// What holds on every snapshot, whatever runs meanwhile: no device held
// twice, and no namespace above the largest limit it ever had.
std::string SnapshotViolations(const ClusterSnapshot& snap) {
  std::string bad;
  std::map<std::string, int64_t> usage;
  for (const auto& node : snap.nodes()) {
    if (node->device_conflicts != 0) StrAppend(&bad, "node ", node->name, " has conflicts; ");
    std::map<int, int64_t> shares;
    for (const PodOnNode& p : node->pods) {
      usage[p.ns] += int64_t{p.gpus} * p.milli_per_gpu;
      for (DeviceMask m = p.devices; m != 0; m &= m - 1) {
        const int d = std::countr_zero(m);
        if (d >= node->gpu_count || (shares[d] += p.milli_per_gpu) > 1000) {
          StrAppend(&bad, "device ", node->name, "/", d, " held twice (last ", p.uid, "); ");
        }
      }
    }
  }
  for (const auto& [ns, milli] : usage) {
    if (milli > MaxLimitMilli(ns)) {
      StrAppend(&bad, "namespace ", ns, " holds ", milli, " milli-GPUs, above every limit; ");
    }
  }
  return bad;
}

// Every gang holds nothing, or all its members hold devices (bound, or in a
// reservation's open slots).
std::string PartialGangs(const ClusterState& state, QueueManager& queue) {
  std::map<std::string, int32_t> size, bound, open;
  for (const PodRequest& p : state.Pods()) {
    if (p.gang.empty() || p.reservation) continue;
    const std::string key = StrCat(p.ns, "/", p.gang);
    size[key] = p.gang_size;
    if (p.HoldsGpus()) ++bound[key];
  }
  for (const GangReservationReport& r : queue.Report().reservations) {
    open[StrCat(r.ns, "/", r.gang)] += r.slots - r.bound;
  }
  std::string bad;
  for (const auto& [key, members] : size) {
    if (bound[key] != 0 && bound[key] + open[key] != members) {
      StrAppend(&bad, "gang ", key, ": ", bound[key], " of ", members, " members bound, ",
                open[key], " reserved; ");
    }
  }
  return bad;
}

struct Counters {
  std::atomic<int64_t> filters{0}, binds{0}, bind_errors{0}, gang_binds{0}, preempts{0}, victims{0},
      ticks{0}, reloads{0}, quota_switches{0}, node_changes{0}, pod_changes{0}, reads{0}, checks{0},
      estimates{0};
};

// The serving process's objects, wired as serve.cc wires them.
struct Server {
  Server()
      : state(gpusched::testing::MakeState({Hgx8H100("h100-0"), Hgx8H100("h100-1"),
                                            Hgx8H100("h100-2"), Dgx1V100("v100-0"),
                                            Pcie4xT4("t4-0")})),
        service(state.get(), FrameworkOf(BaseConfig())),
        evictor(state.get()),
        writer(&evictor) {
    service.SetReady(true);
    queue = InstallQueue(&service, state.get(), &writer, BaseConfig(), &metrics);
    applier = std::make_unique<QueueConfigApplier>(queue.get(), BaseConfig(), "policy.json",
                                                   [](const std::string&) {});
    applier->SetFile(BaseConfig());
    planner = std::make_unique<ReclaimPlannerThread>(queue.get());
    source_sync = std::make_unique<SourceSyncThread>(queue.get(), state.get());
  }

  std::unique_ptr<ClusterState> state;
  ExtenderService service;
  Metrics metrics;
  StateEvictor evictor;
  AsyncClusterWriter writer;
  std::unique_ptr<QueueManager> queue;
  std::unique_ptr<QueueConfigApplier> applier;
  std::unique_ptr<ReclaimPlannerThread> planner;
  std::unique_ptr<SourceSyncThread> source_sync;
};

class Stress {
 public:
  explicit Stress(Server* s) : s_(s) {}

  void Run(int steps) {
    std::vector<std::thread> background;
    background.emplace_back([this] { Loop(2, [this](std::mt19937&) { TickStep(); }); });
    background.emplace_back([this] { Loop(3, [this](std::mt19937& r) { ReloadStep(r); }); });
    background.emplace_back([this] { Loop(4, [this](std::mt19937& r) { QuotaStep(r); }); });
    background.emplace_back([this] { Loop(5, [this](std::mt19937& r) { NodeStep(r); }); });
    background.emplace_back([this] { Loop(6, [this](std::mt19937& r) { ReadStep(r); }); });
    background.emplace_back([this] { Loop(7, [this](std::mt19937&) { CheckStep(); }); });
    background.emplace_back([this] { Loop(8, [this](std::mt19937&) { EstimateStep(); }); });
    for (int i = 0; i < kSchedulers; ++i) {
      background.emplace_back(
          [this, i] { Loop(100 + i, [this](std::mt19937& r) { SchedulerCycle(r); }); });
    }
    std::mt19937 rng(1);
    for (int i = 0; i < steps; ++i) SourceStep(rng);
    stop_.store(true);
    for (std::thread& t : background) t.join();
  }

  const Counters& counters() const { return n_; }
  Violations& violations() { return bad_; }

 private:
  template <typename Step>
  void Loop(uint32_t seed, Step step) {
    std::mt19937 rng(seed);
    while (!stop_.load()) step(rng);
  }

  static int Rand(std::mt19937& rng, int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(rng);
  }

  std::vector<PodRequest> Pods(bool pending) const {
    std::vector<PodRequest> out;
    for (PodRequest& p : s_->state->Pods()) {
      if (p.reservation) continue;
      const bool waiting = !p.HoldsGpus() && p.phase == PodPhase::kPending;
      if ((pending && waiting) || (!pending && p.HoldsGpus())) out.push_back(std::move(p));
    }
    return out;
  }

  // ---- kube-scheduler: filter, prioritize, bind; preempt when nothing fits.

  void SchedulerCycle(std::mt19937& rng) {
    auto pending = Pods(true);
    if (pending.empty()) return Pause(1);
    const PodRequest pod = pending[Rand(rng, static_cast<int>(pending.size()))];
    // The node list of kube-scheduler's informer: the nodes of a snapshot,
    // possibly gone or cordoned by the time the verbs run.
    std::vector<std::string> names;
    const auto snap = s_->state->Snapshot();  // owns the nodes the loop reads
    for (const auto& node : snap->nodes()) names.push_back(node->name);
    ExtenderArgs args;
    args.pod = pod;
    for (const std::string& n : names) args.node_names.push_back(n);
    FilterOutcome out = s_->service.Filter(args);
    n_.filters.fetch_add(1);
    if (out.passed.empty()) {
      if (Rand(rng, 2) == 0) Preempt(pod);
      return Pause(1);  // kube-scheduler backs off a pod that fits nowhere
    }
    ExtenderArgs passing;
    passing.pod = pod;
    for (int32_t i : out.passed) passing.node_names.push_back(names[i]);
    std::vector<int64_t> scores = s_->service.Prioritize(passing);
    size_t best = 0;
    for (size_t i = 1; i < scores.size(); ++i) best = scores[i] > scores[best] ? i : best;
    const std::string err = s_->service.Bind(
        BindingArgs{pod.name, pod.ns, pod.uid, std::string(passing.node_names[best])});
    err.empty() ? n_.binds.fetch_add(1) : n_.bind_errors.fetch_add(1);
    if (err.empty() && !pod.gang.empty()) n_.gang_binds.fetch_add(1);
  }

  // Candidates: every node with its lower-priority pods that are not gang
  // members; the victims of the first node answered are deleted.
  void Preempt(const PodRequest& pod) {
    PreemptionArgs args;
    args.pod = pod;
    const auto snap = s_->state->Snapshot();
    for (const auto& node : snap->nodes()) {
      PreemptionArgs::Candidate c{node->name, {}, 0};
      for (const PodOnNode& v : node->pods) {
        if (v.priority < pod.priority && !v.reservation && v.gang.empty()) {
          c.victim_uids.push_back(v.uid);
        }
      }
      if (!c.victim_uids.empty()) args.candidates.push_back(std::move(c));
    }
    if (args.candidates.empty()) return;
    PreemptionOutcome out = s_->service.Preempt(args);
    n_.preempts.fetch_add(1);
    if (out.nodes.empty() || out.nodes[0].victim_uids.empty()) return;
    for (const std::string& uid : out.nodes[0].victim_uids) {
      auto v = s_->state->FindPod(uid);
      if (v.has_value() && (!v->gang.empty() || v->priority >= pod.priority)) {
        bad_.Add(StrCat("preempt offered victim ", uid, " for ", pod.Key()));
      }
    }
    s_->state->RemovePodsAndCommit(out.nodes[0].victim_uids);
    n_.victims.fetch_add(static_cast<int64_t>(out.nodes[0].victim_uids.size()));
  }

  // ---- the cluster source: users create pods and gangs; pods finish or are
  // deleted; waiting pods are cancelled.

  void SourceStep(std::mt19937& rng) {
    const int op = Rand(rng, 10);
    if (op < 5) {
      // Pods come in bursts (a Job's pods at once): the schedulers then bind
      // different pods at the same time, as kube-scheduler's asynchronous
      // binding cycles do.
      for (int n = 1 + Rand(rng, 4); n > 0; --n) Submit(rng);
    } else if (op < 8) {
      Finish(rng, op == 7);
    } else {
      auto pending = Pods(true);
      if (!pending.empty()) {
        RemoveWhole(pending[Rand(rng, static_cast<int>(pending.size()))]);
      }
    }
    n_.pod_changes.fetch_add(1);
    Pause(1);
  }

  void Submit(std::mt19937& rng) {
    if (Pods(true).size() >= kMaxPending) return;
    const std::string ns = kNamespaces[Rand(rng, 4)];
    const int kind = Rand(rng, 10);
    const int members = kind == 0 ? 2 + Rand(rng, 2) : 1;
    const std::string gang = kind == 0 ? StrCat("g", next_id_) : "";
    std::vector<ClusterState::PodUpdate> batch;
    for (int m = 0; m < members; ++m) {
      const std::string name = StrCat("p", next_id_++);
      PodBuilder b(name, ns);
      b.Priority(std::vector<int32_t>{0, 10, 100}[Rand(rng, 3)]).Created(next_id_);
      if (kind == 0) {
        b.Gpus(2).Models({"H100"}).Gang(gang, members).Priority(10);
      } else if (kind == 1) {
        b.Gpus(1).Milli(500);
      } else if (kind == 2) {
        b.Gpus(1 + Rand(rng, 4)).Models({"T4"});
      } else {
        b.Gpus(std::vector<int>{1, 1, 2, 2, 4}[Rand(rng, 5)]);
      }
      PodRequest p = b.Build();
      batch.push_back({p.uid, p});
    }
    s_->state->ApplyPodsAndCommit(std::move(batch));  // a gang arrives whole
  }

  // A running pod (its whole gang) finishes or is deleted.
  void Finish(std::mt19937& rng, bool remove) {
    auto running = Pods(false);
    if (running.empty()) return;
    const PodRequest& p = running[Rand(rng, static_cast<int>(running.size()))];
    if (remove) return RemoveWhole(p);
    std::vector<ClusterState::PodUpdate> batch;
    for (PodRequest& q : s_->state->Pods()) {
      if (q.uid != p.uid && (p.gang.empty() || q.ns != p.ns || q.gang != p.gang)) continue;
      if (q.reservation) continue;
      q.phase = PodPhase::kSucceeded;
      batch.push_back({q.uid, q});
    }
    s_->state->ApplyPodsAndCommit(std::move(batch));
  }

  // Deletes `p`, or its whole gang.
  void RemoveWhole(const PodRequest& p) {
    std::vector<std::string> uids;
    for (const PodRequest& q : s_->state->Pods()) {
      if (q.reservation) continue;
      if (q.uid == p.uid || (!p.gang.empty() && q.ns == p.ns && q.gang == p.gang)) {
        uids.push_back(q.uid);
      }
    }
    s_->state->RemovePodsAndCommit(uids);
  }

  // ---- background work of the serving process.

  void TickStep() {
    s_->queue->Tick();
    n_.ticks.fetch_add(1);
    Pause(2);
  }

  // The config reloader: a new policy file (quotas and scoring) or the old.
  void ReloadStep(std::mt19937& rng) {
    const SchedulerConfig c = Rand(rng, 2) == 0 ? ReloadedConfig() : BaseConfig();
    s_->service.SetFramework(FrameworkOf(c));
    s_->applier->SetFile(c);
    n_.reloads.fetch_add(1);
    Pause(3);
  }

  // The GPUQuota watcher: objects appear, change or the CRD goes.
  void QuotaStep(std::mt19937& rng) {
    std::optional<ResolvedQuotas> objects;
    if (Rand(rng, 3) != 0) {
      objects = QuotaObjects();
      if (Rand(rng, 2) == 0) objects->namespaces["team-c"] = Quota(1, 3);
    }
    s_->applier->SetObjects(std::move(objects));
    n_.quota_switches.fetch_add(1);
    Pause(3);
  }

  // Spare T4 nodes come, are cordoned and uncordoned, and go (their pods
  // deleted with them, as the pod garbage collector does); now and then a
  // resync, as after a relist.
  void NodeStep(std::mt19937& rng) {
    const std::string name = kSpareNodes[Rand(rng, 2)];
    const int op = Rand(rng, 8);
    if (op < 3) {
      s_->state->UpsertNode(Pcie4xT4(name));
      s_->state->Commit();
    } else if (op < 5) {
      NodeSpec spec = Pcie4xT4(name);
      spec.unschedulable = op == 3;
      s_->state->UpsertNode(spec);
      s_->state->Commit();
    } else if (op < 7) {
      s_->state->RemoveNode(name);
      std::vector<std::string> on_node;
      for (const PodRequest& p : s_->state->Pods()) {
        if (p.node_name == name) on_node.push_back(p.uid);
      }
      s_->state->RemovePodsAndCommit(on_node);
    } else {
      s_->queue->Resync();
    }
    n_.node_changes.fetch_add(1);
    Pause(2);
  }

  // The debug pages and /metrics.
  void ReadStep(std::mt19937& rng) {
    const int op = Rand(rng, 4);
    if (op == 0) {
      s_->queue->Report({"", 10});
    } else if (op == 1) {
      auto pods = s_->state->Pods();
      if (!pods.empty()) {
        const PodRequest& p = pods[Rand(rng, static_cast<int>(pods.size()))];
        s_->queue->ExplainPod(p.ns, p.name);
      }
    } else if (op == 2) {
      s_->queue->Positions(3);
    } else {
      std::string text = s_->metrics.Render();
      GaugeWriter w(&text);
      s_->queue->CollectMetrics(w);
    }
    n_.reads.fetch_add(1);
    Pause(1);
  }

  // The estimate refresh, as serve's EstimateThread runs it (history,
  // estimated starts, the board Backfill and the debug pages read).
  void EstimateStep() {
    s_->queue->RefreshEstimates(std::chrono::milliseconds(50),
                                [this](IdleRunner::Job simulate) { simulation_.Run(simulate); });
    n_.estimates.fetch_add(1);
    Pause(3);
  }

  void CheckStep() {
    bad_.Add(SnapshotViolations(*s_->state->Snapshot()));
    n_.checks.fetch_add(1);
    Pause(1);
  }

  Server* s_;
  IdleRunner simulation_;  // the estimate step's, as serve's EstimateThread
  Counters n_;
  Violations bad_;
  std::atomic<bool> stop_{false};
  int64_t next_id_ = 0;  // the source thread's only
};

TEST(QueueConcurrencyTest, InvariantsHoldWhileEverythingRunsAtOnce) {
  Server server;
  Stress stress(&server);
  stress.Run(Steps());
  // Quiesce: no planner, the first config, two ticks, each with its
  // evictions applied.
  server.planner.reset();
  server.source_sync.reset();
  server.applier->SetObjects(std::nullopt);
  server.applier->SetFile(BaseConfig());
  server.service.SetFramework(FrameworkOf(BaseConfig()));
  for (int i = 0; i < 2; ++i) {
    server.queue->Tick();
    server.writer.Drain();
  }

  const Counters& n = stress.counters();
  std::cout << n.filters << " filters, " << n.binds << " binds (" << n.gang_binds
            << " of gang members), " << n.bind_errors << " refused binds, " << n.preempts
            << " preempt calls, " << n.victims << " victims deleted, " << n.ticks << " ticks, "
            << server.evictor.evictions << " evictions, " << n.reloads << " reloads, "
            << n.quota_switches << " quota source changes, " << n.node_changes << " node changes, "
            << n.pod_changes << " pod changes, " << n.reads << " debug reads, " << n.estimates
            << " estimate refreshes, " << n.checks << " snapshot checks\n";
  const int64_t on_snapshot =
      server.metrics.CounterValue("gpusched_queue_admissions_total", {{"path", "snapshot"}});
  std::cout << "admissions: " << on_snapshot << " on the snapshot, "
            << server.metrics.CounterValue("gpusched_queue_admissions_total", {{"path", "mutex"}})
            << " under the mutex\n";
  EXPECT_EQ(stress.violations().All(), "");
  EXPECT_EQ(SnapshotViolations(*server.state->Snapshot()), "");
  EXPECT_EQ(CheckQueueInvariants(*server.state, *server.queue), "");
  EXPECT_EQ(PartialGangs(*server.state, *server.queue), "");
  EXPECT_GT(n.filters, 0);
  EXPECT_GT(n.binds, 0);
  EXPECT_GT(n.estimates, 0);
  EXPECT_GT(on_snapshot, 0);  // the lock-free path ran alongside everything else
}

}  // namespace
}  // namespace gpusched::queue
