// Admission on a snapshot (scheduler/queue/admit_snapshot.h): a repeated
// filter for a queued single pod is answered without the queue mutex, and
// always as the mutex path would answer it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/util/metrics.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/queue_wiring.h"
#include "test/queue/harness.h"

namespace gpusched::queue::testing {
namespace {

using ::gpusched::testing::DgxA100;
using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::Pcie4xT4;
using ::gpusched::testing::PodBuilder;

// The whole answer of a filter over every node: passing nodes, then each
// failing node with its reason.
std::string FilterAnswer(Harness& h, const PodRequest& pod) {
  ExtenderArgs args;
  args.pod = pod;
  for (const NodeSpec& n : h.nodes) args.node_names.push_back(n.name);
  FilterOutcome out = h.service->Filter(args);
  std::string s = StrCat("error=", out.error, "\npassed:");
  for (int32_t i : out.passed) StrAppend(&s, " ", h.nodes[i].name);
  for (const FilterOutcome::Failure& f : out.failed) {
    StrAppend(&s, "\nfailed ", h.nodes[f.node].name, ": ", out.reasons[f.reason]);
  }
  for (const FilterOutcome::Failure& f : out.unresolvable) {
    StrAppend(&s, "\nunresolvable ", h.nodes[f.node].name, ": ", out.reasons[f.reason]);
  }
  return s;
}

int64_t Admissions(Metrics& m, const char* path) {
  return m.CounterValue("gpusched_queue_admissions_total", {{"path", path}});
}

// team-a (StrictFIFO, cohort r, at most 8 H100s), team-b (StrictFIFO,
// cohort r), team-c (BestEffortFIFO), team-d (Backfill: always the mutex
// path) and namespaces without an entry (the default: no guarantee, no
// limit).
QueueOptions MixedQuotas(int64_t b_limit) {
  NamespaceQuota a = Quota(8, 24, "r");
  a.models["H100"] = {8, 8};
  NamespaceQuota c = Quota(0, 8);
  c.queueing = QueueingStrategy::kBestEffortFifo;
  NamespaceQuota d = Quota(4, 12, "r");
  d.queueing = QueueingStrategy::kBackfill;
  QueueOptions o;
  NamespaceQuota others = Quota(0, 64, "r");
  others.queueing = QueueingStrategy::kBestEffortFifo;
  o.quotas = Quotas(
      {{"team-a", a}, {"team-b", Quota(8, b_limit, "r")}, {"team-c", c}, {"team-d", d}}, others);
  o.reclaim.enabled = true;
  o.reclaim.only_lower_priority = false;  // team-e's borrowers go whatever their priority
  o.stale_after_ms = 120'000;
  return o;
}

// Differential: two managers see the same cluster; `ref` rebuilds its state
// before every decision and so always decides under the mutex
// (recompute_from_scratch publishes no snapshot). Random rounds of changes:
// pods queued (single or a gang of two), gone, bound where the filter let
// them; running pods finishing; quota reloads; time passing (past
// stale_after_ms too); ticks with reclaim; half the rounds, the source's
// changes taken before the filters (SyncWithCluster). After each round every pending
// pod is filtered three times over, and every answer must be the same in
// both, down to each node's reason. team-b starts with 150 pods of 1 GPU,
// so that its first asks are the snapshot's too once 64 units ahead of
// them have been asked about.
TEST(AdmitSnapshot, AnswersAsAManagerDecidingEverythingUnderTheMutex) {
  const std::vector<NodeSpec> nodes = {Hgx8H100("h0"), Hgx8H100("h1"), DgxA100("a0"), DgxA100("a1"),
                                       Pcie4xT4("t0")};
  QueueOptions scratch = MixedQuotas(16);
  scratch.recompute_from_scratch = true;
  // team-e (no quota entry: cohort r, no guarantee) holds most of the GPUs
  // at the start, so that capacity as well as quota refuses pods.
  std::vector<PodRequest> borrowers;
  for (const char* node : {"h0", "h1", "a0", "a1"}) {
    borrowers.push_back(PodBuilder(std::string("borrow-") + node, "team-e")
                            .Gpus(8)
                            .OnNode(node, 0xff)
                            .Created(0)
                            .Build());
  }
  // team-r runs a pod and never queues one: where its pods not shown yet
  // are asked about, nothing waits.
  borrowers.push_back(PodBuilder("run-r", "team-r").Gpus(1).OnNode("t0", 0x1).Created(0).Build());
  Metrics metrics;
  Harness inc(nodes, borrowers, MixedQuotas(16)), ref(nodes, borrowers, scratch);
  inc.metrics = &metrics;
  inc.capture_log = ref.capture_log = true;
  inc.Restart();
  ref.Restart();
  std::mt19937 rng(1129);
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const std::vector<std::string> namespaces = {"team-a", "team-b", "team-c", "team-d", "team-e"};
  std::map<std::string, PodRequest> pending;  // by uid
  std::set<std::string> running;
  for (const PodRequest& p : borrowers) {
    if (p.ns != "team-r") running.insert(p.uid);  // team-r's runs throughout
  }
  int created = 0, binds = 0, ticks = 0;
  int64_t unshown_on_snapshot = 0;
  auto both = [&](auto&& f) {
    f(inc);
    f(ref);
  };
  auto fresh_pod = [&](const std::string& ns) {
    ++created;
    return PodBuilder("p" + std::to_string(created), ns)
        .Gpus(1 + static_cast<int>(pick(8)))
        .Priority(static_cast<int32_t>(pick(3)) * 100)
        .Created(created)
        .Build();
  };
  auto submit = [&](const PodRequest& p) {
    both([&](Harness& h) { h.Submit(p); });
    pending[p.uid] = p;
  };
  // A deep queue: more counted units asked about than a node scan reads
  // (kBehindScanHeads), so that later first asks are the snapshot's too.
  for (int i = 0; i < 150; ++i) {
    PodRequest p = fresh_pod("team-b");
    p.gpu.count = 1;
    p.priority = 0;
    submit(p);
  }
  for (int round = 0; round < 80; ++round) {
    for (int change = 1 + static_cast<int>(pick(4)); change > 0; --change) {
      auto some = pending.begin();
      if (!pending.empty()) std::advance(some, pick(pending.size()));
      switch (pending.empty() ? 0 : pick(8)) {
        case 0:
          submit(fresh_pod(namespaces[pick(namespaces.size())]));
          break;
        case 1: {  // a gang of two
          PodRequest x = fresh_pod(namespaces[pick(namespaces.size())]);
          PodRequest y = fresh_pod(x.ns);
          x.gang = y.gang = "g" + std::to_string(created);
          x.gang_size = y.gang_size = 2;
          submit(x);
          submit(y);
          break;
        }
        case 2:  // gone
          both([&](Harness& h) {
            h.state().RemovePod(some->first);
            h.state().Commit();
          });
          pending.erase(some);
          break;
        case 3: {  // the first of up to 40 pods (from a random one) the filter lets bind
          for (int tries = 0; tries < 40 && some != pending.end(); ++tries, ++some) {
            const PodRequest pod = some->second;
            ASSERT_EQ(FilterAnswer(inc, pod), FilterAnswer(ref, pod))
                << "round " << round << " " << pod.Key();
            const std::vector<std::string> passing = inc.FilterOnly(pod);
            ref.FilterOnly(pod);
            if (passing.empty()) continue;
            const std::string bound = inc.Bind(pod, passing.front());
            ASSERT_EQ(bound, ref.Bind(pod, passing.front())) << "round " << round;
            if (!bound.empty()) continue;
            ++binds;
            running.insert(pod.uid);
            pending.erase(pod.uid);
            break;
          }
          break;
        }
        case 4:  // a running pod finishes
          if (running.empty()) break;
          {
            auto r = running.begin();
            std::advance(r, pick(running.size()));
            both([&](Harness& h) {
              h.state().RemovePod(*r);
              h.state().Commit();
            });
            running.erase(r);
          }
          break;
        case 5: {  // a reload lowers or raises team-b's limit
          const int64_t limit = pick(2) == 0 ? 8 : 16;
          QueueOptions o = MixedQuotas(limit);
          inc.queue->SetOptions(o);
          o.recompute_from_scratch = true;
          ref.queue->SetOptions(o);
          break;
        }
        case 6: {  // time passes, now and then past stale_after_ms
          const int64_t ms = pick(4) == 0 ? 150'000 : 1'000 * static_cast<int64_t>(1 + pick(30));
          inc.now_ms = ref.now_ms = inc.now_ms + ms;
          break;
        }
        default:
          ++ticks;
          ASSERT_EQ(inc.queue->Tick(), ref.queue->Tick()) << "round " << round;
          ASSERT_EQ(inc.writer.evicted, ref.writer.evicted) << "round " << round;
          break;
      }
    }
    for (const std::string& uid : inc.writer.evicted) running.erase(uid);
    // Half the rounds, the source's changes are taken before any filter
    // (serve's SourceSyncThread), so the filters meet refrozen queues.
    if (pick(2) == 0) both([](Harness& h) { h.queue->SyncWithCluster(); });
    for (int pass = 0; pass < 3; ++pass) {
      for (const auto& [uid, pod] : pending) {
        ASSERT_EQ(FilterAnswer(inc, pod), FilterAnswer(ref, pod))
            << "round " << round << " pass " << pass << " " << pod.Key();
      }
      inc.now_ms = ref.now_ms = inc.now_ms + 1'000;
    }
    // Pods the source has not shown yet, in every namespace (some with
    // nothing queued, one never configured): both answer them as queued
    // last, now and then as gang members.
    const int64_t snapshot_before = Admissions(metrics, "snapshot");
    for (const char* ns : {"team-a", "team-b", "team-c", "team-d", "team-e", "team-f", "team-r"}) {
      PodRequest unshown = fresh_pod(ns);
      if (pick(6) == 0) {
        unshown.gang = "unshown";
        unshown.gang_size = 2;
      }
      ASSERT_EQ(FilterAnswer(inc, unshown), FilterAnswer(ref, unshown))
          << "round " << round << " " << unshown.Key() << " (not shown)";
    }
    unshown_on_snapshot += Admissions(metrics, "snapshot") - snapshot_before;
  }
  std::cout << inc.state().Snapshot()->AllocatedGpuMilli() / 1000 << " GPUs in use, " << binds
            << " binds, " << ticks << " ticks, " << inc.writer.evicted.size()
            << " evictions; admissions: " << Admissions(metrics, "snapshot") << " on the snapshot, "
            << Admissions(metrics, "mutex") << " under the mutex, " << unshown_on_snapshot
            << " of them pods not shown yet on the snapshot\n";
  EXPECT_GT(binds, 5);
  EXPECT_GT(ticks, 10);
  // Both paths answered: the snapshot hundreds of repeated asks (about one
  // in six here: every change, gang member, Backfill pod and first ask
  // goes to the mutex, and each round changes something).
  EXPECT_GT(Admissions(metrics, "snapshot"), 250);
  EXPECT_GT(Admissions(metrics, "mutex"), 500);
  EXPECT_GT(unshown_on_snapshot, 20);
}

// One pod's asks, step by step. Every hold of the queue mutex ends by
// publishing the state as it leaves it, so after a change the queue made
// itself (a bind, a tick, a reload) the next ask is the snapshot's already,
// with the answer the change makes. A change of the cluster source (a pod
// finished, a pod queued) is the mutex path's until the queue takes it:
// the first filter after it, or SyncWithCluster (serve's SourceSyncThread).
// Past stale_after_ms the queue changes and the mutex path answers.
TEST(AdmitSnapshot, AnAskIsAnsweredWithoutTheMutexAfterEveryChangeTheQueueHasTaken) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 8)}});
  o.stale_after_ms = 60'000;
  Metrics metrics;
  Harness h(H100s(2), {}, o);
  h.metrics = &metrics;
  h.capture_log = true;
  h.Restart();
  const PodRequest first = PodBuilder("first", "team-a").Gpus(8).Created(1).Build();
  const PodRequest second = PodBuilder("second", "team-a").Gpus(4).Created(2).Build();
  h.Submit(first);
  h.Submit(second);
  auto snapshot = [&] { return Admissions(metrics, "snapshot"); };
  auto mutex = [&] { return Admissions(metrics, "mutex"); };
  auto misses = [&](const char* why) {
    return metrics.CounterValue("gpusched_queue_snapshot_misses_total", {{"why", why}});
  };
  std::string reason;

  // The source's pods are not taken yet: the mutex.
  EXPECT_THAT(h.FilterOnly(first), ::testing::SizeIs(2));
  EXPECT_EQ(mutex(), 1);
  EXPECT_EQ(misses("pod-changes"), 1);
  EXPECT_THAT(h.FilterOnly(second, &reason), ::testing::IsEmpty());  // its first ask
  EXPECT_EQ(snapshot(), 1);
  const std::string behind = reason;
  EXPECT_THAT(behind, ::testing::HasSubstr("1 earlier in queue need 8"));
  EXPECT_THAT(h.FilterOnly(second, &reason), ::testing::IsEmpty());
  EXPECT_EQ(reason, behind);
  EXPECT_THAT(h.FilterOnly(first), ::testing::SizeIs(2));
  EXPECT_EQ(snapshot(), 3);
  EXPECT_EQ(mutex(), 1);

  // A bind: its hold took the bound pod off the queue and published the
  // new usage; the snapshot answers with it.
  ASSERT_EQ(h.Bind(first, "h0"), "");
  EXPECT_THAT(h.FilterOnly(second, &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("at its limit: holds 8 of limit 8 GPUs"));
  EXPECT_EQ(snapshot(), 4);
  EXPECT_EQ(mutex(), 1);

  // A tick: the snapshot still.
  h.queue->Tick();
  EXPECT_THAT(h.FilterOnly(second), ::testing::IsEmpty());
  EXPECT_EQ(snapshot(), 5);
  EXPECT_EQ(mutex(), 1);

  // The running pod finishes: a pod change the queue has not taken, so
  // the mutex path answers (and takes it).
  h.state().RemovePod(first.uid);
  h.state().Commit();
  EXPECT_THAT(h.FilterOnly(second), ::testing::SizeIs(2));
  EXPECT_EQ(mutex(), 2);
  EXPECT_EQ(misses("pod-changes"), 2);
  EXPECT_THAT(h.FilterOnly(second), ::testing::SizeIs(2));
  EXPECT_EQ(snapshot(), 6);

  // An earlier pod is queued and the queue takes it (SyncWithCluster):
  // the snapshot answers with it.
  h.Submit(PodBuilder("earlier", "team-a").Gpus(8).Priority(100).Created(3).Build());
  h.queue->SyncWithCluster();
  EXPECT_THAT(h.FilterOnly(second, &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("earlier in queue"));
  EXPECT_EQ(snapshot(), 7);
  EXPECT_EQ(mutex(), 2);

  // A reload (the same options) refreezes the queue in its own hold.
  h.queue->SetOptions(o);
  EXPECT_THAT(h.FilterOnly(second), ::testing::IsEmpty());
  EXPECT_EQ(snapshot(), 8);
  EXPECT_EQ(mutex(), 2);

  // Past stale_after_ms: the mutex path.
  h.now_ms += 61'000;
  h.FilterOnly(second);
  EXPECT_EQ(mutex(), 3);
  EXPECT_EQ(snapshot(), 8);
}

// Serving, the source's changes are taken as they come (SourceSyncThread),
// so a filter after a watch burst reads the snapshot: the burst's pods
// (queued ahead) are in its answer without the filter taking the mutex.
TEST(AdmitSnapshot, TheSourceSyncThreadTakesTheSourcesChangesBeforeTheNextFilter) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 8)}});
  Metrics metrics;
  Harness h(H100s(2), {}, o);
  h.metrics = &metrics;
  h.capture_log = true;
  h.Restart();
  const PodRequest mine = PodBuilder("mine", "team-a").Gpus(4).Created(10).Build();
  h.Submit(mine);
  SourceSyncThread sync(h.queue.get(), &h.state());
  // Waits (bounded) until the thread has taken every change the source has
  // and its hold (which publishes as it ends) is over.
  auto taken = [&h] {
    auto done = [&h] {
      return !h.state().PodChangesPending() && h.queue->lock_stats().holder.load() == nullptr;
    };
    for (int i = 0; i < 1000 && !done(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  };
  ASSERT_TRUE(taken());
  std::string reason;
  EXPECT_THAT(h.FilterOnly(mine), ::testing::SizeIs(2));
  // A burst of two earlier pods, as a watch applies it.
  std::vector<ClusterState::PodUpdate> burst;
  for (int i = 0; i < 2; ++i) {
    burst.push_back({"", PodBuilder("early-" + std::to_string(i), "team-a")
                             .Gpus(4)
                             .Priority(100)
                             .Created(i + 1)
                             .Build()});
    burst.back().uid = burst.back().pod->uid;
  }
  const int64_t mutex_before = Admissions(metrics, "mutex");
  const int64_t snapshot_before = Admissions(metrics, "snapshot");
  h.state().ApplyPodsAndCommit(std::move(burst));
  ASSERT_TRUE(taken());
  EXPECT_THAT(h.FilterOnly(mine, &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("2 earlier in queue need 8"));
  EXPECT_EQ(Admissions(metrics, "mutex"), mutex_before);
  EXPECT_EQ(Admissions(metrics, "snapshot"), snapshot_before + 1);
}

// A tick that commits a reclaim (evictions, a claim, nodes held for the pod
// it reclaims for) changes what later filters are told. Its hold publishes
// that state, and once the source's evictions are taken (SyncWithCluster,
// as SourceSyncThread does) the next filters are answered on the snapshot,
// exactly as a manager deciding everything under the mutex answers them.
TEST(AdmitSnapshot, AReclaimATickCommitsIsInTheNextSnapshot) {
  QueueOptions o;
  o.quotas = Quotas(
      {{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 16, "r")}, {"team-c", Quota(8, 8)}});
  QueueOptions scratch = o;
  scratch.recompute_from_scratch = true;
  // team-a (priority -1) borrows team-b's guarantee on both nodes.
  std::vector<PodRequest> borrowers;
  for (int i = 0; i < 4; ++i) {
    borrowers.push_back(PodBuilder("a" + std::to_string(i), "team-a")
                            .Gpus(4)
                            .OnNode(i < 2 ? "h0" : "h1", i % 2 == 0 ? 0x0f : 0xf0)
                            .Priority(-1)
                            .Build());
  }
  Metrics metrics;
  Harness inc(H100s(2), borrowers, o), ref(H100s(2), borrowers, scratch);
  inc.metrics = &metrics;
  inc.capture_log = ref.capture_log = true;
  inc.Restart();
  ref.Restart();
  const std::vector<PodRequest> pods = {PodBuilder("b", "team-b").Gpus(4).Created(1).Build(),
                                        PodBuilder("b2", "team-b").Gpus(4).Created(2).Build(),
                                        PodBuilder("c", "team-c").Gpus(4).Created(3).Build()};
  for (Harness* h : {&inc, &ref}) {
    for (const PodRequest& p : pods) h->Submit(p);
    h->queue->SyncWithCluster();
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (const PodRequest& p : pods) EXPECT_EQ(FilterAnswer(inc, p), FilterAnswer(ref, p));
  }
  const int evicted = inc.queue->Tick();
  ASSERT_GE(evicted, 1);
  ASSERT_EQ(ref.queue->Tick(), evicted);
  ASSERT_EQ(inc.writer.evicted, ref.writer.evicted);
  inc.queue->SyncWithCluster();
  ref.queue->SyncWithCluster();
  const int64_t mutex_before = Admissions(metrics, "mutex");
  const int64_t snapshot_before = Admissions(metrics, "snapshot");
  const std::string held_back = FilterAnswer(inc, pods[2]);
  EXPECT_THAT(held_back, ::testing::HasSubstr("held for team-b/b until it binds"));
  EXPECT_EQ(held_back, FilterAnswer(ref, pods[2]));
  for (const PodRequest& p : pods) EXPECT_EQ(FilterAnswer(inc, p), FilterAnswer(ref, p));
  EXPECT_EQ(Admissions(metrics, "mutex"), mutex_before);
  EXPECT_EQ(Admissions(metrics, "snapshot"), snapshot_before + 4);
}

// A first ask answered on the snapshot makes its pod a node-scan candidate
// of the later pods at once: the scan reads the shared ask clocks.
TEST(AdmitSnapshot, AFirstAskOnTheSnapshotJoinsTheScanOfLaterPods) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(100, 100)}});
  Metrics metrics;
  Harness h(H100s(2), {}, o);
  h.metrics = &metrics;
  h.capture_log = true;
  h.Restart();
  std::vector<PodRequest> q;
  for (int i = 0; i < 70; ++i) {
    q.push_back(PodBuilder("q" + std::to_string(i), "team-a").Gpus(1).Created(i + 1).Build());
    h.Submit(q.back());
  }
  auto snapshot = [&] { return Admissions(metrics, "snapshot"); };
  auto mutex = [&] { return Admissions(metrics, "mutex"); };
  std::string reason;
  EXPECT_THAT(h.FilterOnly(q[69]), ::testing::SizeIs(2));  // nobody ahead asked about yet
  EXPECT_EQ(mutex(), 1);
  EXPECT_THAT(h.FilterOnly(q[0]), ::testing::SizeIs(2));  // the head's first ask
  EXPECT_EQ(snapshot(), 1);
  EXPECT_THAT(h.FilterOnly(q[69], &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("waiting behind q0 "));
  EXPECT_EQ(snapshot(), 2);
  EXPECT_THAT(h.FilterOnly(q[1], &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("waiting behind q0 "));
  EXPECT_EQ(snapshot(), 3);
  // q0 binds: its namespace's queue changed, and the bind's hold froze it
  // again; q1 heads the candidates now.
  ASSERT_EQ(h.Bind(q[0], "h0"), "");
  EXPECT_THAT(h.FilterOnly(q[69], &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("waiting behind q1 "));
  EXPECT_EQ(mutex(), 1);
  EXPECT_EQ(snapshot(), 4);
}

// Two H100 nodes under `o`, with the admission counters by path and miss.
struct Counted {
  explicit Counted(const QueueOptions& o) : h(H100s(2), {}, o) {
    h.metrics = &metrics;
    h.capture_log = true;
    h.Restart();
  }
  int64_t Path(const char* path) { return Admissions(metrics, path); }
  int64_t Misses(const char* why) {
    return metrics.CounterValue("gpusched_queue_snapshot_misses_total", {{"why", why}});
  }
  Metrics metrics;
  Harness h;
};

// Where nothing waits, the first asks of pods the source has not shown yet
// (kube-scheduler's informer is often ahead of the extender's watch) read
// the snapshot too: a namespace the config names, or one running GPU pods,
// is frozen empty, and such a pod is answered as first in its queue. Once
// the namespace has a queue, the empty one no longer answers.
TEST(AdmitSnapshot, APodNotShownYetWhereNothingWaitsIsAnsweredOnTheSnapshot) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(4, 8)}});
  Counted c(o);
  Harness& h = c.h;
  auto snapshot = [&] { return c.Path("snapshot"); };
  auto mutex = [&] { return c.Path("mutex"); };
  auto misses = [&](const char* why) { return c.Misses(why); };
  std::string reason;
  // The first ask of the namespace freezes its empty queue.
  EXPECT_THAT(h.FilterOnly(PodBuilder("u1", "team-a").Gpus(4).Build()), ::testing::SizeIs(2));
  EXPECT_EQ(mutex(), 1);
  EXPECT_EQ(misses("queue-not-frozen"), 1);
  EXPECT_THAT(h.FilterOnly(PodBuilder("u2", "team-a").Gpus(8).Build()), ::testing::SizeIs(2));
  EXPECT_THAT(h.FilterOnly(PodBuilder("u3", "team-a").Gpus(8).Build()), ::testing::SizeIs(2));
  EXPECT_THAT(h.FilterOnly(PodBuilder("u4", "team-a").Gpus(16).Build(), &reason),
              ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("limit 8"));
  EXPECT_THAT(reason, ::testing::HasSubstr("position 1 in queue"));
  EXPECT_EQ(snapshot(), 3);
  EXPECT_EQ(mutex(), 1);

  // A gang member the source has not shown: no gang is reserved for it.
  PodRequest member = PodBuilder("m", "team-a").Gpus(1).Build();
  member.gang = "g";
  member.gang_size = 2;
  EXPECT_THAT(h.FilterOnly(member, &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("not in the cluster view yet"));
  EXPECT_EQ(snapshot(), 4);

  // A namespace nobody configured, with nothing running: never frozen, so
  // every ask of it takes the mutex.
  const int64_t before = mutex();
  h.FilterOnly(PodBuilder("x1", "made-up").Gpus(1).Build());
  h.FilterOnly(PodBuilder("x2", "made-up").Gpus(1).Build());
  EXPECT_EQ(mutex(), before + 2);

  // team-a gets a queue: a pod asked about after it waits behind it, on
  // the mutex path (the empty queue is gone), with the queued pod ahead.
  h.Submit(PodBuilder("queued", "team-a").Gpus(8).Created(1).Build());
  h.queue->SyncWithCluster();
  const int64_t on_snapshot = snapshot();
  EXPECT_THAT(h.FilterOnly(PodBuilder("u5", "team-a").Gpus(4).Created(2).Build(), &reason),
              ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("1 earlier in queue need 8"));
  EXPECT_EQ(snapshot(), on_snapshot);
  EXPECT_EQ(misses("unshown-behind-a-queue"), 1);
}

// A gang member its queue refuses (quota, queue order) is answered on the
// snapshot like a single pod; one its queue admits goes to the mutex path,
// which reserves the gang's devices; a member of a reserved gang (its slot
// claimed or to claim: a write) goes there too.
TEST(AdmitSnapshot, AGangMemberItsQueueRefusesIsAnsweredOnTheSnapshot) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 8)}});
  Counted c(o);
  Harness& h = c.h;
  auto snapshot = [&] { return c.Path("snapshot"); };
  auto mutex = [&] { return c.Path("mutex"); };
  auto misses = [&](const char* why) { return c.Misses(why); };
  const PodRequest big = PodBuilder("big", "team-a").Gpus(8).Created(1).Build();
  const PodRequest m1 = PodBuilder("m1", "team-a").Gpus(4).Gang("g", 2).Created(2).Build();
  const PodRequest m2 = PodBuilder("m2", "team-a").Gpus(4).Gang("g", 2).Created(3).Build();
  for (const PodRequest& p : {big, m1, m2}) h.Submit(p);
  h.queue->SyncWithCluster();
  std::string reason;
  EXPECT_THAT(h.FilterOnly(big), ::testing::SizeIs(2));
  EXPECT_EQ(mutex(), 1);  // the namespace's first ask freezes it
  EXPECT_THAT(h.FilterOnly(m1, &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("1 earlier in queue need 8"));
  EXPECT_THAT(h.FilterOnly(m2, &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("gang g needs 8"));
  EXPECT_EQ(snapshot(), 2);
  EXPECT_EQ(mutex(), 1);

  // big binds: the gang is refused by the limit, still on the snapshot.
  ASSERT_EQ(h.Bind(big, "h0"), "");
  EXPECT_THAT(h.FilterOnly(m2, &reason), ::testing::IsEmpty());
  EXPECT_THAT(reason, ::testing::HasSubstr("limit 8"));
  EXPECT_EQ(snapshot(), 3);
  EXPECT_EQ(mutex(), 1);

  // A reload lets it in: admitted, the member goes to the mutex path, which
  // reserves h1 for the gang; the other member's ask is the mutex path's
  // too (its slot is claimed there), with the same node.
  o.quotas = Quotas({{"team-a", Quota(8, 16)}});
  h.queue->SetOptions(o);
  EXPECT_THAT(h.FilterOnly(m1), ::testing::ElementsAre("h1"));
  EXPECT_EQ(misses("gang-admitted"), 1);
  EXPECT_EQ(mutex(), 2);
  EXPECT_THAT(h.FilterOnly(m2), ::testing::ElementsAre("h1"));
  EXPECT_EQ(misses("reserved-or-not-waiting"), 1);
  EXPECT_EQ(mutex(), 3);
  EXPECT_EQ(snapshot(), 3);
}

}  // namespace
}  // namespace gpusched::queue::testing
