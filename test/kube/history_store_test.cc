// The runtime history kept across restarts in a ConfigMap, through the fake
// API server: the encoding (round trip, the size bound, bad contents named
// and refused), and HistoryStore + KubeClusterSource + QueueManager: history
// written by the leader only when it changed, read back by a restarted
// scheduler whose finished pods are gone (each run counted once when a pod
// is still there), a corrupt ConfigMap ignored, a 409 retried with the new
// resourceVersion.
#include "scheduler/kube/history_store.h"

#include <gtest/gtest.h>

#include "gpusched/policy/framework.h"
#include "scheduler/codec/history_codec.h"
#include "scheduler/kube/kube_source.h"
#include "scheduler/queue/queue_manager.h"
#include "test/kube/kube_test_util.h"
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

class HistoryStoreTest : public ::testing::Test {
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
    api_ = std::make_unique<FakeApiServer>(Pki(), kToken);
    api_->Start();
    client_ = ClientFor(*api_, Pki());
    api_->Put("nodes", NodeJson("gpu-0", 8));
    auto fw = policy::Framework::Create(ScoringConfig{});
    ASSERT_TRUE(fw.ok());
    framework_ = std::shared_ptr<const policy::Framework>(std::move(*fw));
  }
  static const TestPki& Pki() {
    static const TestPki pki = MakeTestPki();
    return pki;
  }
  // Starts a process as serve does: the store's Load goes into the queue.
  std::unique_ptr<World> Start() {
    auto w = std::make_unique<World>();
    kube::SourceOptions so;
    so.watch_timeout_seconds = 2;
    w->src = std::make_unique<kube::KubeClusterSource>(client_.get(), so, &metrics_);
    EXPECT_TRUE(w->src->Start(&w->state, nullptr).ok());
    EXPECT_TRUE(WaitFor([&] { return w->src->synced(); }));
    queue::QueueDeps deps;
    deps.state = &w->state;
    deps.framework = [f = framework_] { return f; };
    deps.now_ms = [] { return int64_t{1767230000} * 1000; };
    w->queue = std::make_unique<queue::QueueManager>(std::move(deps), queue::QueueOptions{});
    kube::HistoryStore::Inputs in;
    in.history = [q = w->queue.get()](uint64_t* v) { return q->HistoryToPersist(v); };
    in.may_write = [this] { return leader_; };
    w->store = std::make_unique<kube::HistoryStore>(client_.get(), kube::HistoryStoreOptions{},
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

  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<kube::KubeHttpClient> client_;
  std::shared_ptr<const policy::Framework> framework_;
  Metrics metrics_;
  bool leader_ = true;
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

}  // namespace
}  // namespace gpusched::testing
