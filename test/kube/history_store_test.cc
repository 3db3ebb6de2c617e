// The runtime history kept across restarts in a ConfigMap, through the fake
// API server: the encoding (round trip, the size bound, bad contents named
// and refused), and HistoryStore + KubeClusterSource + QueueManager: history
// written by the leader only when it changed, read back by a restarted
// scheduler whose finished pods are gone (each run counted once when a pod
// is still there), a corrupt ConfigMap ignored, a 409 retried with the new
// resourceVersion.
#include "scheduler/kube/history_store.h"

#include <gtest/gtest.h>

#include <atomic>

#include "scheduler/codec/history_codec.h"
#include "test/kube/api_harness.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

constexpr char kConfigMap[] = "gpusched-system/gpusched-runtime-history";
constexpr char kConfigMapPath[] =
    "/api/v1/namespaces/gpusched-system/configmaps/gpusched-runtime-history";

// A pod of Job `job` that ran `seconds` and Succeeded.
Json FinishedPod(const std::string& name, const std::string& job, int64_t seconds) {
  Json p = PodJson("team-a", name, 1, "gpu-0", "0", "Succeeded");
  p["metadata"]["labels"] = {{"batch.kubernetes.io/job-name", job}};
  p["status"]["startTime"] = "2026-01-01T00:00:00Z";
  char end[32];
  std::snprintf(end, sizeof end, "2026-01-01T%02d:%02d:%02dZ", static_cast<int>(seconds / 3600),
                static_cast<int>(seconds / 60 % 60), static_cast<int>(seconds % 60));
  p["status"]["containerStatuses"] = {
      {{"name", "main"}, {"state", {{"terminated", {{"exitCode", 0}, {"finishedAt", end}}}}}}};
  return p;
}

Json PendingPod(const std::string& name, const std::string& job) {
  Json p = PodJson("team-a", name, 1);
  p["metadata"]["labels"] = {{"batch.kubernetes.io/job-name", job}};
  return p;
}

queue::PersistedWorkload Workload(const std::string& name, std::vector<int64_t> seconds) {
  queue::PersistedWorkload w{"team-a", name, 1, {}};
  for (int64_t s : seconds) w.runs.push_back({s, queue::RunTag(name + std::to_string(s))});
  return w;
}

TEST(HistoryCodec, RoundTripsAndStaysUnderItsByteBound) {
  const std::vector<queue::PersistedWorkload> small = {Workload("train", {100, 200, 300}),
                                                       Workload("eval", {60})};
  auto enc = codec::EncodeHistoryConfigMap("ns", "cm", "7", small, 512 * 1024);
  EXPECT_EQ(enc.workloads, 2u);
  auto back = codec::DecodeHistoryConfigMap(enc.body);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->history, small);
  EXPECT_EQ(back->resource_version, "7");

  // The largest history kept in memory: 4,096 workloads of 64 runs.
  std::vector<queue::PersistedWorkload> full;
  for (int i = 0; i < 4096; ++i) {
    queue::PersistedWorkload w{
        "namespace-" + std::to_string(i % 500), "workload-name-" + std::to_string(i), 8, {}};
    for (int r = 0; r < 64; ++r) w.runs.push_back({86000 + r, static_cast<uint32_t>(r * 7919)});
    full.push_back(std::move(w));
  }
  enc = codec::EncodeHistoryConfigMap("ns", "cm", "", full, 512 * 1024);
  EXPECT_LE(enc.history_bytes, 512u * 1024);
  EXPECT_LT(enc.body.size(), 600u * 1024);  // well under the 1 MiB of a ConfigMap
  EXPECT_GT(enc.workloads, 500u);           // ~900 bytes each: the most recent ones
  EXPECT_LT(enc.workloads, full.size());
  back = codec::DecodeHistoryConfigMap(enc.body);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->history.size(), enc.workloads);
  EXPECT_EQ(back->history.front(), full.front());
}

TEST(HistoryCodec, RefusesContentsItDidNotWriteNamingTheField) {
  struct Case {
    std::string name;
    Json data;
    std::string error;
  };
  const Case cases[] = {
      {"no data", nullptr, "data: missing"},
      {"another version", {{"version", "2"}, {"history", ""}}, "data.version: \"2\""},
      {"no version", {{"history", ""}}, "data.version: missing"},
      {"truncated", {{"version", "1"}, {"history", "team-a train 1 100.0000000a 2"}}, "truncated"},
      {"bad run",
       {{"version", "1"}, {"history", "team-a train 1 100.zz\n"}},
       "data.history line 1: run '100.zz'"},
      {"zero seconds",
       {{"version", "1"}, {"history", "a b 1 100.00000001\na b 1 0.00000001\n"}},
       "line 2: run '0.00000001': seconds out of range"},
      {"bad gpus", {{"version", "1"}, {"history", "a b many 100.00000001\n"}}, "gpus 'many'"},
      {"short line", {{"version", "1"}, {"history", "a b\n"}}, "want '<namespace>"},
      {"history not text", {{"version", "1"}, {"history", 3}}, "data.history: missing or not"},
  };
  for (const Case& c : cases) {
    Json cm = {{"kind", "ConfigMap"}, {"metadata", {{"name", "cm"}, {"resourceVersion", "5"}}}};
    if (!c.data.is_null()) cm["data"] = c.data;
    auto d = codec::DecodeHistoryConfigMap(cm.dump());
    ASSERT_FALSE(d.ok()) << c.name;
    EXPECT_NE(d.status().message().find(c.error), std::string::npos)
        << c.name << ": " << d.status().message();
  }
  EXPECT_FALSE(codec::DecodeHistoryConfigMap("{\"data\":").ok());
}

class HistoryStoreTest : public FakeApiTest {
 protected:
  // One scheduler process: its source, queue and history store.
  struct World {
    ClusterState state{ShippedTemplates()};
    std::unique_ptr<kube::KubeClusterSource> src;
    std::unique_ptr<queue::QueueManager> queue;
    std::unique_ptr<kube::HistoryStore> store;
    ~World() {
      if (store) store->Stop();
      if (src) src->Stop();
    }
  };
  void SetUp() override {
    FakeApiTest::SetUp();
    api_->Put("nodes", NodeJson("gpu-0", 8));
  }
  // Starts a process as serve does: the store's Load goes into the queue.
  std::unique_ptr<World> Start(kube::HistoryStoreOptions options = {}) {
    auto w = std::make_unique<World>();
    w->src = NewSource(client_.get(), &metrics_);
    EXPECT_TRUE(StartSynced(*w->src, w->state));
    w->queue = NewQueue(&w->state, DefaultFramework(),
                        {.now_ms = [] { return int64_t{1767230000} * 1000; }});
    kube::HistoryStore::Inputs in;
    in.history = [q = w->queue.get()](uint64_t* v) { return q->HistoryToPersist(v); };
    in.may_write = [this] { return leader_.load(); };
    w->store = std::make_unique<kube::HistoryStore>(client_.get(), std::move(options),
                                                    std::move(in), &metrics_);
    w->queue->LoadHistory(w->store->Load());
    return w;
  }
  queue::PodReport Estimate(World& w, const std::string& name) {
    w.queue->Resync();
    w.queue->RefreshEstimates();
    auto r = w.queue->ExplainPod("team-a", name);
    EXPECT_TRUE(r.has_value()) << name;
    return r.value_or(queue::PodReport{});
  }
  int Writes() {
    return api_->requests(std::string("PUT ") + kConfigMapPath) +
           api_->requests("POST /api/v1/namespaces/gpusched-system/configmaps");
  }

  int64_t Counter(const std::string& name) { return metrics_.CounterValue(name, {}); }
  void PutConfigMap(Json data) {
    api_->Put(
        "configmaps",
        {{"apiVersion", "v1"},
         {"kind", "ConfigMap"},
         {"metadata", {{"name", "gpusched-runtime-history"}, {"namespace", "gpusched-system"}}},
         {"data", std::move(data)}});
  }

  std::atomic<bool> leader_{true};
};

TEST_F(HistoryStoreTest, HistoryOutlivesTheFinishedPodsItCameFrom) {
  const int64_t runs[] = {100, 200, 300, 400, 500};
  for (int i = 0; i < 5; ++i) {
    api_->Put("pods", FinishedPod("train-" + std::to_string(i), "train", runs[i]));
  }
  api_->Put("pods", PendingPod("train-next", "train"));
  auto a = Start();
  queue::PodReport r = Estimate(*a, "train-next");
  EXPECT_EQ(r.runtime_source, "workload-history");
  EXPECT_EQ(r.runtime_seconds, 300);
  // A follower never writes; the leader writes once, then only on change.
  leader_ = false;
  ASSERT_TRUE(a->store->WriteOnce().ok());
  EXPECT_EQ(Writes(), 0);
  leader_ = true;
  ASSERT_TRUE(a->store->WriteOnce().ok());
  ASSERT_TRUE(a->store->WriteOnce().ok());
  EXPECT_EQ(Writes(), 1);
  auto cm = api_->Get("configmaps", kConfigMap);
  ASSERT_TRUE(cm.has_value());
  EXPECT_EQ((*cm)["data"]["version"], "1");
  EXPECT_LT(a->store->last_bytes(), 200u);
  a.reset();

  // Restarted after the pod garbage collector took all but one of them.
  for (int i = 1; i < 5; ++i) api_->Delete("pods", "team-a/train-" + std::to_string(i));
  auto b = Start();
  r = Estimate(*b, "train-next");
  EXPECT_EQ(r.runtime_source, "workload-history");
  EXPECT_EQ(r.runtime_seconds, 300);
  // train-0 is known from both: counted once.
  EXPECT_NE(r.runtime_detail.find("p50 of 5 completed runs of workload team-a/train"),
            std::string::npos)
      << r.runtime_detail;
}

TEST_F(HistoryStoreTest, ACorruptConfigMapIsIgnoredWithItsReason) {
  api_->Put("pods", FinishedPod("train-0", "train", 120));
  api_->Put("pods", PendingPod("train-next", "train"));
  for (const std::string& history :
       {std::string("team-a train 1 100.zz\n"), std::string("team-a train 1 100.0000")}) {
    api_->Put(
        "configmaps",
        {{"apiVersion", "v1"},
         {"kind", "ConfigMap"},
         {"metadata", {{"name", "gpusched-runtime-history"}, {"namespace", "gpusched-system"}}},
         {"data", {{"version", "1"}, {"history", history}}}});
    ::testing::internal::CaptureStderr();
    auto w = Start();
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("runtime history: ConfigMap gpusched-system/gpusched-runtime-history "
                       "ignored: data.history"),
              std::string::npos)
        << log;
    // What the API's pods teach still applies, and the next write replaces
    // the bad contents.
    queue::PodReport r = Estimate(*w, "train-next");
    EXPECT_EQ(r.runtime_seconds, 120);
    ASSERT_TRUE(w->store->WriteOnce().ok());
    auto cm = api_->Get("configmaps", kConfigMap);
    ASSERT_TRUE(cm.has_value());
    EXPECT_TRUE(codec::DecodeHistoryConfigMap(cm->dump()).ok()) << cm->dump();
  }
}

TEST_F(HistoryStoreTest, AConflictIsRetriedWithTheNewResourceVersion) {
  api_->Put("pods", FinishedPod("train-0", "train", 120));
  auto w = Start();
  w->queue->RefreshEstimates();
  ASSERT_TRUE(w->store->WriteOnce().ok());
  // Someone else writes it (an older leader's last write, kubectl edit).
  Json other = *api_->Get("configmaps", kConfigMap);
  other["metadata"].erase("resourceVersion");
  other["metadata"]["labels"]["edited"] = "yes";
  api_->Put("configmaps", other);
  // A new run: written with the version read after the 409.
  w->queue->LoadHistory({Workload("eval", {50})});
  const int puts = api_->requests(std::string("PUT ") + kConfigMapPath);
  ASSERT_TRUE(w->store->WriteOnce().ok());
  EXPECT_EQ(api_->requests(std::string("PUT ") + kConfigMapPath), puts + 2);  // 409, then 200
  auto cm = codec::DecodeHistoryConfigMap(api_->Get("configmaps", kConfigMap)->dump());
  ASSERT_TRUE(cm.ok()) << cm.status();
  ASSERT_EQ(cm->history.size(), 2u);
  EXPECT_EQ(cm->history[0].workload, "eval");  // the most recent first
  EXPECT_EQ(cm->history[1].workload, "train");
}

TEST_F(HistoryStoreTest, MetricsCountIgnoredConfigMapsAndWrites) {
  constexpr char kLoadErrors[] = "gpusched_runtime_history_load_errors_total";
  constexpr char kWrites[] = "gpusched_runtime_history_writes_total";
  api_->Put("pods", FinishedPod("train-0", "train", 120));
  // What the ConfigMap holds at start, and whether it counts as ignored.
  struct Case {
    std::string name;
    Json data;  // null: no ConfigMap
    int64_t load_errors;
  };
  const Case cases[] = {
      {"none", nullptr, 0},
      {"valid", {{"version", "1"}, {"history", "team-a eval 1 50.00000001\n"}}, 0},
      {"bad run", {{"version", "1"}, {"history", "team-a train 1 100.zz\n"}}, 1},
      {"truncated", {{"version", "1"}, {"history", "team-a train 1 100.0000"}}, 1},
      {"another version", {{"version", "2"}, {"history", ""}}, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    api_->Delete("configmaps", kConfigMap);
    if (!c.data.is_null()) PutConfigMap(c.data);
    const int64_t errors = Counter(kLoadErrors);
    ::testing::internal::CaptureStderr();
    auto w = Start();
    ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(Counter(kLoadErrors), errors + c.load_errors);
    w->queue->RefreshEstimates();
    // A follower's round, the leader's write, then a round with nothing new.
    const int64_t writes = Counter(kWrites);
    leader_ = false;
    ASSERT_TRUE(w->store->WriteOnce().ok());
    EXPECT_EQ(Counter(kWrites), writes);
    leader_ = true;
    ASSERT_TRUE(w->store->WriteOnce().ok());
    EXPECT_EQ(Counter(kWrites), writes + 1);
    ASSERT_TRUE(w->store->WriteOnce().ok());
    EXPECT_EQ(Counter(kWrites), writes + 1);
  }
  // A write retried after a 409 is one write.
  auto w = Start();
  Json other = *api_->Get("configmaps", kConfigMap);
  other["metadata"].erase("resourceVersion");
  api_->Put("configmaps", other);
  w->queue->LoadHistory({Workload("eval", {70})});
  const int64_t writes = Counter(kWrites);
  ASSERT_TRUE(w->store->WriteOnce().ok());
  EXPECT_EQ(Counter(kWrites), writes + 1);
}

TEST_F(HistoryStoreTest, TheLeaderWritesTheRunsSinceItsLastRoundWhenItStops) {
  for (int i = 0; i < 3; ++i) {
    api_->Put("pods", FinishedPod("train-" + std::to_string(i), "train", 100 * (i + 1)));
  }
  kube::HistoryStoreOptions slow;
  slow.period = std::chrono::hours(1);  // no periodic round in this test
  auto a = Start(slow);
  a->store->Start();
  a->queue->RefreshEstimates();  // the runs are recorded
  EXPECT_EQ(Writes(), 0);
  a->store->Stop();
  EXPECT_EQ(Writes(), 1);
  auto cm = api_->Get("configmaps", kConfigMap);
  ASSERT_TRUE(cm.has_value());
  auto saved = codec::DecodeHistoryConfigMap(cm->dump());
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->history.size(), 1u);
  EXPECT_EQ(saved->history[0].workload, "train");
  EXPECT_EQ(saved->history[0].runs.size(), 3u);
  a->store->Stop();  // once only
  EXPECT_EQ(Writes(), 1);
  a.reset();

  // A follower, or a store whose writer never ran, writes nothing at stop.
  api_->Delete("configmaps", kConfigMap);
  auto b = Start(slow);
  b->queue->RefreshEstimates();
  b->store->Stop();
  leader_ = false;
  auto c = Start(slow);
  c->store->Start();
  c->queue->RefreshEstimates();
  c->store->Stop();
  EXPECT_EQ(Writes(), 1);
  EXPECT_FALSE(api_->Get("configmaps", kConfigMap).has_value());
}

TEST_F(HistoryStoreTest, TheWriteAtStopGivesUpAfterItsTimeout) {
  api_->Put("pods", FinishedPod("train-0", "train", 120));
  kube::HistoryStoreOptions o;
  o.period = std::chrono::hours(1);
  o.stop_timeout = std::chrono::milliseconds(200);
  auto w = Start(o);
  w->store->Start();
  w->queue->RefreshEstimates();
  api_->SetDelayMs(3000);  // the API stops answering in time
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  w->store->Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  const std::string log = ::testing::internal::GetCapturedStderr();
  api_->SetDelayMs(0);
  // Well before the API would have answered.
  EXPECT_LT(took, std::chrono::milliseconds(2000));
  EXPECT_NE(log.find("runtime history: the write at stop failed"), std::string::npos) << log;
  EXPECT_EQ(Writes(), 0);
}

}  // namespace
}  // namespace gpusched::testing
