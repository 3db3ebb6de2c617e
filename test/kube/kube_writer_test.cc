// Bind write-back, eviction and leader election against the fake API server.
#include "scheduler/kube/kube_writer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "gpusched/core/extender_service.h"
#include "gpusched/policy/framework.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/kube/kube_config.h"
#include "scheduler/kube/leader_elector.h"
#include "scheduler/queue/queue_wiring.h"
#include "test/kube/kube_test_util.h"
#include "test/kube/queue_invariants.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

const TestPki& Pki() {
  static const TestPki pki = MakeTestPki();
  return pki;
}

class KubeWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<FakeApiServer>(Pki(), kToken);
    api_->Start();
    api_->Put("nodes", NodeJson("gpu-0", 8));
    for (int i = 0; i < 6; ++i) api_->Put("pods", PodJson("t", "p" + std::to_string(i), 2));
    client_ = ClientFor(*api_, Pki());
    auto config =
        codec::LoadConfigFile(std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json");
    ASSERT_TRUE(config.ok()) << config.status();
    auto fw = policy::Framework::Create(config->scoring);
    ASSERT_TRUE(fw.ok());
    state_ = std::make_unique<ClusterState>(ShippedTemplates());
    service_ = std::make_unique<ExtenderService>(
        state_.get(), std::shared_ptr<const policy::Framework>(std::move(*fw)));
    kube::SourceOptions so;
    so.watch_timeout_seconds = 5;
    so.backoff_initial = std::chrono::milliseconds(20);
    source_ = std::make_unique<kube::KubeClusterSource>(client_.get(), so, &metrics_);
    ASSERT_TRUE(source_->Start(state_.get(), [this](bool v) { service_->SetReady(v); }).ok());
    ASSERT_TRUE(WaitFor([&] { return source_->synced(); }));
    // The queue manager gates binds: namespace t may hold 6 of the 8 GPUs.
    SchedulerConfig with_quota = *config;
    with_quota.quotas = QuotaConfig{};
    with_quota.quotas.enabled = true;
    with_quota.quotas.namespaces["t"].gpus = {6, 6};
    queue_ = queue::InstallQueue(service_.get(), state_.get(), nullptr, with_quota, nullptr);
    kube::WriteOptions wo;
    wo.backoff = std::chrono::milliseconds(10);
    binder_ = std::make_unique<kube::KubeBinder>(
        client_.get(), source_.get(), state_.get(), [this] { return leader_.load(); }, wo,
        &metrics_);
  }
  void TearDown() override { source_->Stop(); }

  // The queue-manager invariants, once the watch shows every bind; a pod
  // holding GPUs must be bound to that node in the API server.
  void ExpectQueueInvariants() {
    ASSERT_TRUE(WaitFor([&] {
      for (const PodRequest& p : state_->Pods()) {
        if (p.HoldsGpus() && !source_->ApiBound(p.uid, p.node_name)) return false;
      }
      return true;
    }));
    EXPECT_EQ(CheckQueueInvariants(
                  *state_, *queue_,
                  [this](const PodRequest& p) { return source_->ApiBound(p.uid, p.node_name); }),
              "");
  }

  // What the bind route does: assume, write back, roll back on error.
  std::string Bind(const std::string& name, const std::string& node = "gpu-0") {
    BindingArgs args{name, "t", "uid-t-" + name, node};
    DeviceMask devices = 0;
    std::string err = service_->Bind(args, &devices);
    if (err.empty()) err = binder_->AfterBind(args, devices);
    if (!err.empty()) {
      auto pod = state_->FindPodByName("t", name);
      if (pod && !source_->ApiBound(pod->uid, node)) state_->Forget(pod->uid);
    }
    return err;
  }
  // No device is named by two bound pods, per node, in the API server.
  void ExpectNoDeviceTwice() {
    std::map<std::string, int> seen;
    for (const Json& p : api_->List("pods")) {
      std::string node = p["spec"].value("nodeName", "");
      if (node.empty()) continue;
      std::string ids = p["metadata"]["annotations"].value("gpusched.io/gpu-ids", "");
      std::stringstream ss(ids);
      std::string id;
      while (std::getline(ss, id, ','))
        EXPECT_EQ(++seen[node + "/" + id], 1) << node << " GPU " << id;
    }
  }

  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<kube::KubeHttpClient> client_;
  Metrics metrics_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
  std::unique_ptr<kube::KubeClusterSource> source_;
  std::unique_ptr<kube::KubeBinder> binder_;
  std::unique_ptr<queue::QueueManager> queue_;
  std::atomic<bool> leader_{true};
};

TEST_F(KubeWriterTest, BindPatchesIdsThenBinds) {
  ASSERT_EQ(Bind("p0"), "");
  auto pod = api_->Get("pods", "t/p0");
  EXPECT_EQ((*pod)["spec"]["nodeName"], "gpu-0");
  EXPECT_EQ((*pod)["metadata"]["annotations"]["gpusched.io/gpu-ids"].get<std::string>().size(), 3u);
  // A retried bind (kube-scheduler did not hear back) is idempotent.
  ASSERT_TRUE(WaitFor([&] { return source_->ApiBound("uid-t-p0", "gpu-0"); }));
  EXPECT_EQ(Bind("p0"), "");
  ExpectNoDeviceTwice();
}

TEST_F(KubeWriterTest, LostBindResponseIsResolvedByReadingThePod) {
  api_->LoseNextBindResponse();
  EXPECT_EQ(Bind("p1"), "");
  EXPECT_EQ((*api_->Get("pods", "t/p1"))["spec"]["nodeName"], "gpu-0");
  ExpectNoDeviceTwice();
  ExpectQueueInvariants();
}

TEST_F(KubeWriterTest, BindToAnotherNodeAfterBindingIsRefused) {
  Json p = *api_->Get("pods", "t/p2");
  p["spec"]["nodeName"] = "elsewhere";  // bound behind our back, watch not yet seen
  api_->Put("pods", p);
  api_->DropWatches();
  std::string err = Bind("p2");
  // Either the watch already showed it bound, or the API said 409: never ok.
  EXPECT_NE(err, "");
  ExpectQueueInvariants();
}

TEST_F(KubeWriterTest, BurstWithFaultsNeverDoubleAllocates) {
  api_->FailNext(3, 503, "/api/v1/namespaces/t/pods");
  int ok = 0;
  for (int i = 0; i < 6; ++i) {
    if (i == 2) api_->LoseNextBindResponse();
    if (i == 4) api_->DropWatches();
    if (Bind("p" + std::to_string(i)).empty()) ++ok;
  }
  // Namespace t may hold 6 GPUs (the node has 8): 3 pods of 2, whichever
  // binds failed on the faults; the others are refused on quota.
  EXPECT_EQ(ok, 3);
  ExpectNoDeviceTwice();
  ASSERT_TRUE(WaitFor([&] {
    int bound = 0;
    for (const Json& p : api_->List("pods")) bound += p["spec"].contains("nodeName");
    int held = 0;
    for (const PodRequest& p : state_->Pods()) {
      held += p.HoldsGpus() && source_->ApiBound(p.uid, p.node_name);
    }
    return bound == 3 && held == 3;
  }));
  ExpectQueueInvariants();
  // No leaked reservation: state agrees with a cold start of the same API.
  ClusterState fresh(ShippedTemplates());
  kube::KubeClusterSource cold(client_.get(), {}, nullptr);
  ASSERT_TRUE(cold.Start(&fresh, nullptr).ok());
  ASSERT_TRUE(WaitFor([&] { return cold.synced(); }));
  cold.Stop();
  EXPECT_EQ(Fingerprint(*state_), Fingerprint(fresh));
}

TEST_F(KubeWriterTest, GangReservationIsNeitherLeakedNorDoubledUnderFaults) {
  for (const char* name : {"g0", "g1"}) {
    Json p = PodJson("t", name, 2);
    p["metadata"]["annotations"]["gpusched.io/gang"] = "g";
    p["metadata"]["annotations"]["gpusched.io/gang-size"] = "2";
    api_->Put("pods", p);
  }
  ASSERT_TRUE(WaitFor([&] {
    auto p = state_->FindPodByName("t", "g1");
    return p.has_value() && p->gang == "g";
  }));
  auto filter = [&](const std::string& name) {
    ExtenderArgs args;
    args.pod = *state_->FindPodByName("t", name);
    args.node_names = {"gpu-0"};
    return service_->Filter(args);
  };
  // The first member's filter reserves devices for the whole gang.
  FilterOutcome first = filter("g0");
  ASSERT_EQ(first.passed.size(), 1u) << (first.failed.empty() ? "" : first.reason(first.failed[0]));
  EXPECT_FALSE(ReservationHolders(*state_).empty());
  EXPECT_EQ(CheckQueueInvariants(*state_, *queue_), "");
  // Its bind's response is lost, then the watch drops; the second member
  // still binds into its reserved slot.
  api_->LoseNextBindResponse();
  EXPECT_EQ(Bind("g0"), "");
  EXPECT_EQ(CheckQueueInvariants(*state_, *queue_), "");
  api_->DropWatches();
  FilterOutcome second = filter("g1");
  ASSERT_EQ(second.passed.size(), 1u)
      << (second.failed.empty() ? "" : second.reason(second.failed[0]));
  EXPECT_EQ(Bind("g1"), "");
  EXPECT_TRUE(ReservationHolders(*state_).empty());
  ExpectNoDeviceTwice();
  ExpectQueueInvariants();
}

TEST_F(KubeWriterTest, FollowerDoesNotBind) {
  leader_ = false;
  EXPECT_NE(Bind("p3"), "");
  EXPECT_FALSE((*api_->Get("pods", "t/p3"))["spec"].contains("nodeName"));
  EXPECT_FALSE(state_->FindPodByName("t", "p3")->HoldsGpus());
}

TEST_F(KubeWriterTest, EvictionHandlesDisruptionBudget) {
  kube::WriteOptions wo;
  wo.backoff = std::chrono::milliseconds(5);
  kube::KubeEvictor ev(
      client_.get(), [] { return true; }, wo, &metrics_, nullptr);
  PodRequest victim = *state_->FindPodByName("t", "p5");
  api_->EvictionBlocked(1);
  EXPECT_EQ(ev.Evict(victim, "preempted").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(api_->Get("pods", "t/p5").has_value());
  EXPECT_TRUE(ev.Evict(victim, "preempted").ok());
  EXPECT_FALSE(api_->Get("pods", "t/p5").has_value());
  EXPECT_TRUE(ev.Evict(victim, "preempted").ok());  // already gone
}

TEST(LeaderElectorTest, OneLeaderAndFailoverWithinLeaseDuration) {
  FakeApiServer api(Pki(), kToken);
  api.Start();
  auto client = ClientFor(api, Pki());
  api.AllowToken("token-a");
  kube::KubeConfig ca;
  ca.host = "127.0.0.1";
  ca.port = std::to_string(api.port());
  ca.ca_pem = Pki().ca_pem;
  ca.token = "token-a";
  auto client_a = *kube::KubeHttpClient::Create(ca, {});
  kube::LeaderOptions o;
  o.lease_namespace = "gpusched-system";
  o.lease_duration = std::chrono::milliseconds(1500);
  o.renew_deadline = std::chrono::milliseconds(1000);
  o.retry_period = std::chrono::milliseconds(100);
  o.identity = "a";
  auto a = std::make_unique<kube::LeaderElector>(client_a.get(), o, nullptr, nullptr);
  o.identity = "b";
  kube::LeaderElector b(client.get(), o, nullptr, nullptr);
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->IsLeader(); }));
  b.Start();
  for (int i = 0; i < 50; ++i) {
    ASSERT_FALSE(a->IsLeader() && b.IsLeader());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(b.IsLeader());
  // The leader is cut off without releasing (as in a crash or partition):
  // b takes over within lease duration + 2 s, and never while a still acts.
  api.RevokeToken("token-a");
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return !a->IsLeader(); }, std::chrono::milliseconds(3000)));
  ASSERT_TRUE(WaitFor(
      [&] {
        EXPECT_FALSE(a->IsLeader() && b.IsLeader());
        return b.IsLeader();
      },
      std::chrono::milliseconds(5000)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, o.lease_duration + std::chrono::seconds(2));
  a.reset();
  auto lease = api.Get("leases", "gpusched-system/gpusched");
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_GE((*lease)["spec"]["leaseTransitions"].get<int>(), 1);
  b.Stop();  // releases
  EXPECT_EQ((*api.Get("leases", "gpusched-system/gpusched"))["spec"]["holderIdentity"], "");
}

TEST(KubeconfigTest, ParsesKubectlStyleYaml) {
  std::string path = WriteTempFile("kubeconfig", KubeconfigYaml(6443, Pki().ca_pem, "tok"));
  auto cfg = kube::LoadKubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "127.0.0.1");
  EXPECT_EQ(cfg->port, "6443");
  EXPECT_EQ(cfg->token, "tok");
  EXPECT_EQ(cfg->ca_pem, Pki().ca_pem);
}

TEST(KubeClientTest, RejectsWrongCaAndWrongToken) {
  FakeApiServer api(Pki(), kToken);
  api.Start();
  kube::KubeConfig cfg;
  cfg.host = "127.0.0.1";
  cfg.port = std::to_string(api.port());
  cfg.ca_pem = Pki().other_ca_pem;
  cfg.token = kToken;
  auto wrong_ca = *kube::KubeHttpClient::Create(cfg, {});
  EXPECT_FALSE(wrong_ca->Do("GET", "/api/v1/nodes").ok());
  cfg.ca_pem = Pki().ca_pem;
  cfg.token = "nope";
  auto wrong_token = *kube::KubeHttpClient::Create(cfg, {});
  auto r = wrong_token->Do("GET", "/api/v1/nodes");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  // Token rotation: the file is re-read.
  std::string token_file = WriteTempFile("token", "nope\n");
  cfg.token.clear();
  cfg.token_file = token_file;
  auto rotating = *kube::KubeHttpClient::Create(cfg, {});
  EXPECT_EQ(rotating->Do("GET", "/api/v1/nodes")->status, 401);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::ofstream(token_file) << kToken << "\n";
  EXPECT_EQ(rotating->Do("GET", "/api/v1/nodes")->status, 200);
}

}  // namespace
}  // namespace gpusched::testing
