// KubeClusterSource against the fake API server: list (paginated) + watch,
// relist on 410, faults (dropped watches, 5xx/429, slow responses), bad
// gpu-ids reporting, and "state after faults equals a cold start".
#include "scheduler/kube/kube_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "gpusched/policy/framework.h"
#include "scheduler/queue/queue_manager.h"
#include "test/kube/kube_test_util.h"
#include "test/kube/queue_invariants.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

class KubeSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<FakeApiServer>(Pki(), kToken);
    api_->SetBookmarkIntervalMs(200);
    api_->Start();
    for (int i = 0; i < 5; ++i) api_->Put("nodes", NodeJson("gpu-" + std::to_string(i), 8));
    api_->Put("pods", PodJson("a", "running", 2, "gpu-0", "0,1", "Running"));
    api_->Put("pods", PodJson("a", "pending", 4));
    api_->Put("pods", PodJson("b", "done", 8, "gpu-1", "0,1,2,3,4,5,6,7", "Succeeded"));
    client_ = ClientFor(*api_, Pki());
  }
  static const TestPki& Pki() {
    static const TestPki pki = MakeTestPki();
    return pki;
  }
  std::unique_ptr<kube::KubeClusterSource> NewSource(ClusterState* state,
                                                     std::atomic<bool>* synced = nullptr) {
    kube::SourceOptions o;
    o.page_size = 2;  // forces continue tokens
    o.watch_timeout_seconds = 2;
    o.backoff_initial = std::chrono::milliseconds(20);
    o.backoff_max = std::chrono::milliseconds(200);
    auto s = std::make_unique<kube::KubeClusterSource>(
        client_.get(), o, &metrics_,
        [this](const PodRequest& p, const std::string& reason, const std::string& why) {
          std::lock_guard<std::mutex> lock(bad_mu_);
          bad_.push_back(reason + " " + p.Key() + ": " + why);
        });
    EXPECT_TRUE(s->Start(state, [synced](bool v) {
                   if (synced) *synced = v;
                 }).ok());
    return s;
  }
  // A fresh source's view of the same API server.
  std::string ColdStart() {
    ClusterState fresh(ShippedTemplates());
    auto s = NewSource(&fresh);
    EXPECT_TRUE(WaitFor([&] { return s->synced(); }));
    s->Stop();
    return Fingerprint(fresh);
  }

  // A queue manager over `state`, as serve installs it: quotas on, every
  // namespace may hold 8 GPUs.
  std::unique_ptr<queue::QueueManager> NewQueue(ClusterState* state) {
    auto fw = policy::Framework::Create(ScoringConfig{});
    EXPECT_TRUE(fw.ok());
    std::shared_ptr<const policy::Framework> framework(std::move(*fw));
    queue::QueueDeps deps;
    deps.state = state;
    deps.framework = [framework] { return framework; };
    queue::QueueOptions o;
    o.quotas.enabled = true;
    o.quotas.default_quota.gpus = {8, 8};
    auto q = std::make_unique<queue::QueueManager>(std::move(deps), std::move(o));
    q->Resync();
    return q;
  }
  // The queue-manager invariants on `state`; every pod holding GPUs must be
  // bound to that node in the API server.
  std::string Invariants(const ClusterState& state, queue::QueueManager& q) {
    return CheckQueueInvariants(state, q, [this](const PodRequest& p) {
      auto obj = api_->Get("pods", p.ns + "/" + p.name);
      return obj.has_value() && (*obj)["spec"].value("nodeName", "") == p.node_name;
    });
  }

  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<kube::KubeHttpClient> client_;
  Metrics metrics_;
  // Written by the source's thread, read by the test's.
  std::size_t BadCount() {
    std::lock_guard<std::mutex> lock(bad_mu_);
    return bad_.size();
  }
  std::mutex bad_mu_;
  std::vector<std::string> bad_;
};

TEST_F(KubeSourceTest, ListThenWatchFeedsState) {
  ClusterState state(ShippedTemplates());
  std::atomic<bool> synced{false};
  auto src = NewSource(&state, &synced);
  ASSERT_TRUE(WaitFor([&] { return synced.load(); }));
  EXPECT_EQ(state.Snapshot()->nodes().size(), 5u);
  auto running = state.FindPodByName("a", "running");
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->node_name, "gpu-0");
  EXPECT_EQ(running->gpu_ids, DeviceMask{0b11});
  EXPECT_EQ(state.Snapshot()->Find("gpu-0")->free_count(), 6);
  EXPECT_EQ(state.Snapshot()->Find("gpu-1")->free_count(), 8);  // Succeeded holds nothing

  api_->Put("pods", PodJson("a", "new", 1, "gpu-2", "5", "Running"));
  ASSERT_TRUE(WaitFor([&] { return state.FindPodByName("a", "new").has_value(); }));
  EXPECT_EQ(state.Snapshot()->Find("gpu-2")->free_count(), 7);
  api_->Delete("pods", "a/new");
  ASSERT_TRUE(WaitFor([&] { return !state.FindPodByName("a", "new").has_value(); }));
  api_->Delete("nodes", "gpu-4");
  ASSERT_TRUE(WaitFor([&] { return state.Snapshot()->Find("gpu-4") == nullptr; }));
  EXPECT_GE(api_->requests("GET /api/v1/pods"), 2);  // paginated
  src->Stop();
  EXPECT_EQ(Fingerprint(state), ColdStart());
}

// A list whose continue token expires mid-way (the next page is already
// requested while the current one is decoded) starts over and ends with the
// same view as an uninterrupted list.
TEST_F(KubeSourceTest, ExpiredContinueRestartsTheList) {
  for (int i = 0; i < 9; ++i) api_->Put("pods", PodJson("e", "p" + std::to_string(i), 1));
  const std::string expected = ColdStart();
  auto lists = [this] {
    return api_->requests("GET /api/v1/pods") - api_->requests("GET /api/v1/pods?watch");
  };
  const int lists_before = lists();
  api_->ExpireNextContinues(2, "pods");
  ClusterState state(ShippedTemplates());
  auto src = NewSource(&state);  // pages of 2
  ASSERT_TRUE(WaitFor([&] { return src->synced(); }));
  src->Stop();
  EXPECT_EQ(Fingerprint(state), expected);
  EXPECT_EQ(src->relists(), 1);  // one list reached the state
  // 12 pods in 6 pages, twice cut short after the first page, then whole.
  EXPECT_EQ(lists() - lists_before, 2 * 2 + 6);
}

// The watches resume at the version the list was read at (the first page's
// for a paginated list): an older or empty one would replay superseded
// versions of pods (a bound pod seen unbound again, its devices free) until
// the watch caught up; a restarted gpusched bound a second pod onto them.
TEST_F(KubeSourceTest, WatchesResumeAtTheListedVersion) {
  for (int i = 0; i < 5; ++i) api_->Put("pods", PodJson("w", "p" + std::to_string(i), 1));
  const std::string listed = std::to_string(api_->resource_version());
  ClusterState state(ShippedTemplates());
  auto src = NewSource(&state);  // pages of 2: 8 pods, 4 pages; 5 nodes, 3 pages
  ASSERT_TRUE(WaitFor([&] {
    return !api_->watch_versions("/api/v1/pods").empty() &&
           !api_->watch_versions("/api/v1/nodes").empty();
  }));
  src->Stop();
  EXPECT_EQ(api_->watch_versions("/api/v1/pods").front(), listed);
  EXPECT_EQ(api_->watch_versions("/api/v1/nodes").front(), listed);
  EXPECT_EQ(metrics_.CounterValue("gpusched_kube_watch_events_total", {{"resource", "pods"}}), 0);
}

// Cold start at production size: 20,000 nodes and 200,000 pods (140,000
// running, 7 per node with their gpu-ids; 60,000 pending over 500
// namespaces) listed from the API server in pages of the default size: the source becomes
// ready holding every node and pod, the devices assigned as annotated. The
// time it took is printed (not asserted: bench/kube/api_cold_start measures
// the served binary's). Sanitizer builds list a tenth of it.
TEST_F(KubeSourceTest, ColdStartAtProductionSize) {
  const int scale = std::getenv("GPUSCHED_SANITIZER_BUILD") != nullptr ? 10 : 1;
  const int nodes = 20'000 / scale, per_node = 7, pending = 60'000 / scale;
  PutProductionCluster(*api_, nodes, per_node, pending);
  ClusterState state(ShippedTemplates());
  kube::SourceOptions o;  // the default page size
  kube::KubeClusterSource src(client_.get(), o, &metrics_,
                              [](const PodRequest&, const std::string&, const std::string&) {});
  std::atomic<bool> synced{false};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(src.Start(&state, [&synced](bool v) { synced = v; }).ok());
  ASSERT_TRUE(WaitFor([&] { return synced.load(); }, std::chrono::seconds(600)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "cold start from the API: " << nodes << " nodes, " << nodes * per_node + pending
            << " pods in " << seconds << " s\n";
  auto snap = state.Snapshot();
  EXPECT_EQ(snap->nodes().size(), static_cast<size_t>(nodes + 5));
  // The fixture's pod "a/running" holds 2 GPUs on gpu-0.
  EXPECT_EQ(snap->AllocatedGpuMilli(), (int64_t{nodes} * per_node + 2) * 1000);
  int64_t team_pods = 0, waiting = 0;
  for (const PodRequest& p : state.Pods()) {
    if (p.ns.rfind("team-", 0) != 0) continue;
    ++team_pods;
    if (!p.HoldsGpus()) ++waiting;
  }
  EXPECT_EQ(team_pods, int64_t{nodes} * per_node + pending);
  EXPECT_EQ(waiting, pending);
  const NodeInfo* last = snap->Find("n-" + std::to_string(nodes - 1));
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->free_count(), 8 - per_node);
  EXPECT_EQ(last->device_conflicts, 0);
  src.Stop();
}

TEST_F(KubeSourceTest, GoneTriggersRelistAndMatchesColdStart) {
  ClusterState state(ShippedTemplates());
  std::atomic<int> unsynced{0};
  kube::SourceOptions o;
  o.page_size = 2;
  o.watch_timeout_seconds = 2;
  o.backoff_initial = std::chrono::milliseconds(20);
  kube::KubeClusterSource src(client_.get(), o, &metrics_);
  ASSERT_TRUE(src.Start(&state,
                        [&](bool v) {
                          if (!v) ++unsynced;
                        })
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return src.synced(); }));
  auto q = NewQueue(&state);
  EXPECT_EQ(Invariants(state, *q), "");
  const int64_t lists = src.relists();
  // A change the open watch may or may not deliver before the compaction;
  // the relist that the 410 forces must find it either way.
  api_->Put("pods", PodJson("c", "missed", 2, "gpu-3", "2,3", "Running"));
  api_->CompactAndDropWatches();
  ASSERT_TRUE(WaitFor([&] { return src.relists() > lists && src.synced(); }));
  EXPECT_GE(unsynced.load(), 1);  // not ready during the relist
  ASSERT_TRUE(WaitFor([&] { return state.FindPodByName("c", "missed").has_value(); }));
  src.Stop();
  EXPECT_EQ(Invariants(state, *q), "");
  EXPECT_EQ(Fingerprint(state), ColdStart());
}

TEST_F(KubeSourceTest, SurvivesDroppedWatchesErrorsAndSlowness) {
  ClusterState state(ShippedTemplates());
  auto src = NewSource(&state);
  ASSERT_TRUE(WaitFor([&] { return src->synced(); }));
  auto q = NewQueue(&state);
  for (int round = 0; round < 4; ++round) {
    api_->DropWatches();
    api_->FailNext(2, round % 2 == 0 ? 503 : 429, "/api/v1/pods");
    // Device round + 2: gpu-0's devices 0 and 1 belong to a/running.
    api_->Put("pods", PodJson("d", "p" + std::to_string(round), 1, "gpu-" + std::to_string(round),
                              std::to_string(round + 2), "Running"));
  }
  api_->SetDelayMs(150);
  api_->Put("pods", PodJson("d", "slow", 1, "gpu-4", "7", "Running"));
  ASSERT_TRUE(WaitFor([&] { return state.FindPodByName("d", "slow").has_value(); }));
  api_->SetDelayMs(0);
  for (int round = 0; round < 4; ++round) {
    EXPECT_TRUE(state.FindPodByName("d", "p" + std::to_string(round)).has_value()) << round;
  }
  EXPECT_TRUE(src->synced());
  src->Stop();
  EXPECT_EQ(Invariants(state, *q), "");
  EXPECT_EQ(Fingerprint(state), ColdStart());
}

TEST_F(KubeSourceTest, ListErrorsBackOffUntilSynced) {
  api_->FailNext(3, 500, "/api/v1/nodes");
  ClusterState state(ShippedTemplates());
  auto src = NewSource(&state);
  ASSERT_TRUE(WaitFor([&] { return src->synced(); }));
  EXPECT_EQ(metrics_.CounterValue("gpusched_kube_list_errors_total", {}), 3);
  src->Stop();
  auto q = NewQueue(&state);
  EXPECT_EQ(Invariants(state, *q), "");
  EXPECT_EQ(Fingerprint(state), ColdStart());
}

TEST_F(KubeSourceTest, BadGpuIdsFailClosedAndAreReported) {
  api_->Put("pods", PodJson("e", "garbled", 2, "gpu-3", "zero,one", "Running"));
  api_->Put("pods", PodJson("e", "beyond", 1, "gpu-2", "12", "Running"));
  ClusterState state(ShippedTemplates());
  auto src = NewSource(&state);
  ASSERT_TRUE(WaitFor([&] { return src->synced(); }));
  ASSERT_TRUE(WaitFor([&] { return BadCount() == 2; }));
  EXPECT_EQ(state.Snapshot()->Find("gpu-3")->free_count(), 6);  // 2 devices held anyway
  EXPECT_EQ(metrics_.CounterValue("gpusched_bad_gpu_ids_total", {}), 2);
  // Reported once, not on every relist. The count is read before the watch
  // is dropped: the relist may finish before this thread runs again.
  const int64_t lists = src->relists();
  api_->CompactAndDropWatches();
  ASSERT_TRUE(WaitFor([&] { return src->relists() > lists && src->synced(); }));
  EXPECT_EQ(BadCount(), 2u);
  EXPECT_EQ(metrics_.CounterValue("gpusched_bad_gpu_ids_total", {}), 2);
}

// A running pod the source cannot decode (an invalid gpusched annotation)
// is not skipped: it holds its GPUs, counted against its namespace's quota
// and its node (devices unknown, never free), listed or watched, and is
// reported once.
TEST_F(KubeSourceTest, UndecodableRunningPodStillHoldsItsGpus) {
  Json bad = PodJson("a", "odd", 8, "gpu-4", "0,1,2,3,4,5,6,7", "Running");
  bad["metadata"]["annotations"]["gpusched.io/topology"] = "whatever";
  api_->Put("pods", bad);
  ClusterState state(ShippedTemplates());
  auto src = NewSource(&state);
  ASSERT_TRUE(WaitFor([&] { return src->synced(); }));
  EXPECT_EQ(state.Snapshot()->Find("gpu-4")->free_count(), 0);
  auto held = state.FindPodByName("a", "odd");
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->gpu.count, 8);
  EXPECT_FALSE(held->has_gpu_ids);  // devices unknown
  // Namespace a holds 2 + 8 GPUs: its 4-GPU pending pod is over quota.
  auto q = NewQueue(&state);
  auto pending = state.FindPodByName("a", "pending");
  ASSERT_TRUE(pending.has_value());
  auto fw = policy::Framework::Create(ScoringConfig{});
  ASSERT_TRUE(fw.ok());
  EXPECT_FALSE(q->Admit(*pending, state.Snapshot(), **fw).reason.empty());
  int64_t usage = -1;
  for (const auto& ns : q->Report().namespaces) {
    if (ns.ns == "a") usage = ns.usage_milli;
  }
  EXPECT_EQ(usage, 10000);
  ASSERT_TRUE(WaitFor([&] { return BadCount() == 1; }));
  {
    std::lock_guard<std::mutex> lock(bad_mu_);
    EXPECT_EQ(bad_[0].rfind("PodUndecodable a/odd: Pod.metadata.annotations[\"gpusched.io/"
                            "topology\"]: 'whatever' is not",
                            0),
              0u)
        << bad_[0];
  }

  // The same through the watch, on a node with room: its 4 GPUs are held.
  Json watched = PodJson("b", "odd-too", 4, "gpu-3", "", "Running");
  watched["metadata"]["annotations"]["gpusched.io/gpu-milli"] = "abc";
  api_->Put("pods", watched);
  ASSERT_TRUE(WaitFor([&] { return state.Snapshot()->Find("gpu-3")->free_count() == 4; }));
  ASSERT_TRUE(WaitFor([&] { return BadCount() == 2; }));
  EXPECT_EQ(metrics_.CounterValue("gpusched_kube_decode_errors_total", {{"resource", "pods"}}), 2);
  // Reported once: a relist reads both again without a new report.
  const int64_t lists = src->relists();
  api_->CompactAndDropWatches();
  ASSERT_TRUE(WaitFor([&] { return src->relists() > lists && src->synced(); }));
  EXPECT_EQ(BadCount(), 2u);
  EXPECT_EQ(state.Snapshot()->Find("gpu-4")->free_count(), 0);
  EXPECT_EQ(state.Snapshot()->Find("gpu-3")->free_count(), 4);
}

}  // namespace
}  // namespace gpusched::testing
