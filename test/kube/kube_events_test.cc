// Waiting Events: a pod that no node passes in filter (nodes reject it, or
// the queue holds it back for quota) gets one rate-limited GpuschedWaiting
// Event through the kube runtime's hook on the filter route, posted to the
// fake API server; repeated filters within the rate-limit window add none.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpusched/core/extender_service.h"
#include "gpusched/policy/framework.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/kube/runtime.h"
#include "scheduler/queue/queue_wiring.h"
#include "test/kube/kube_test_util.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

const TestPki& Pki() {
  static const TestPki pki = MakeTestPki();
  return pki;
}

TEST(WaitingEventTest, MessageSummarisesReasonsMostCommonFirst) {
  ExtenderArgs args;
  std::vector<std::string> names = {"a", "b", "c", "t4"};
  for (const auto& n : names) args.node_names.push_back(n);
  FilterOutcome out;
  out.Fail(0, "gpusched: 2 of 8 GPUs free, pod needs 4");
  out.Fail(1, "gpusched: 0 of 8 GPUs free, pod needs 4");
  out.Fail(2, "gpusched: 2 of 8 GPUs free, pod needs 4");
  out.FailUnresolvable(3, "gpusched: GPU Tesla-T4 not in requested models [A100]");
  EXPECT_EQ(kube::WaitingEventMessage(args, out),
            "gpusched: 0 of 4 nodes fit: 2 of 8 GPUs free, pod needs 4 (2 nodes); 0 of 8 GPUs "
            "free, pod needs 4 (1 node); GPU Tesla-T4 not in requested models [A100] (1 node)");
  // Some node could fit after preemption or a finish: the pod waits.
  EXPECT_EQ(kube::WaitingEventType(out), "Normal");

  // The queue's reason on every node is the message as it is.
  FilterOutcome gated;
  const std::string quota = "gpusched: namespace q at quota: 2/2 GPUs; pod needs 4";
  const int32_t quota_reason = gated.AddReason(quota);  // one shared reason, as the gate answers
  for (int i = 0; i < 4; ++i) gated.failed.push_back({i, quota_reason});
  EXPECT_EQ(kube::WaitingEventMessage(args, gated), quota);
  EXPECT_EQ(kube::WaitingEventType(gated), "Normal");

  // Nothing short of a change to the pod or the nodes helps: Warning.
  FilterOutcome never;
  for (int i = 0; i < 4; ++i) never.FailUnresolvable(i, "gpusched: node has no GPUs");
  EXPECT_EQ(kube::WaitingEventMessage(args, never),
            "gpusched: 0 of 4 nodes fit: node has no GPUs (4 nodes)");
  EXPECT_EQ(kube::WaitingEventType(never), "Warning");
}

TEST(WaitingEventTest, MessageIsBoundedForManyDistinctReasons) {
  ExtenderArgs args;
  std::vector<std::string> names;
  for (int i = 0; i < 500; ++i) names.push_back("node-" + std::to_string(i));
  FilterOutcome out;
  for (int i = 0; i < 500; ++i) {
    args.node_names.push_back(names[i]);
    out.Fail(i, "gpusched: no all-NVLink set of 4 among free GPUs [" + std::to_string(i) +
                    " and a long tail of text]");
  }
  const std::string msg = kube::WaitingEventMessage(args, out);
  EXPECT_LE(msg.size(), 1024u);
  EXPECT_EQ(msg.rfind("gpusched: 0 of 500 nodes fit: ", 0), 0u) << msg;
  EXPECT_EQ(msg.substr(msg.size() - 3), "...");
}

class KubeEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<FakeApiServer>(Pki(), kToken);
    api_->Start();
    for (int i = 0; i < 3; ++i) api_->Put("nodes", NodeJson("gpu-" + std::to_string(i), 8));
    api_->Put("pods", PodJson("t", "huge", 16));  // no node has 16 GPUs
    // Another namespace: t/huge, first in t's queue, would hold it back.
    api_->Put("pods", PodJson("s", "small", 2));
    api_->Put("pods", PodJson("q", "big", 4));  // namespace q may hold 2
    auto config =
        codec::LoadConfigFile(std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
    config_.quotas = QuotaConfig{};
    config_.quotas.enabled = true;
    config_.quotas.default_quota.gpus = {16, 24};
    config_.quotas.namespaces["q"].gpus = {2, 2};
    auto fw = policy::Framework::Create(config_.scoring);
    ASSERT_TRUE(fw.ok());
    state_ = std::make_unique<ClusterState>(ShippedTemplates());
    service_ = std::make_unique<ExtenderService>(
        state_.get(), std::shared_ptr<const policy::Framework>(std::move(*fw)));

    kube::KubeOptions o;
    o.kubeconfig =
        WriteTempFile("events_kubeconfig", KubeconfigYaml(api_->port(), Pki().ca_pem, kToken));
    o.client.qps = 0;
    o.source.backoff_initial = std::chrono::milliseconds(20);
    o.leader.identity = "events-test";
    auto rt = kube::StartKube(o, state_.get(), service_.get(), &metrics_);
    ASSERT_TRUE(rt.ok()) << rt.status();
    rt_ = *std::move(rt);
    ASSERT_TRUE(WaitFor([&] { return rt_->synced() && service_->ready(); }));
    queue_ = queue::InstallQueue(service_.get(), state_.get(), rt_->writer(), config_, &metrics_);

    http::RouteDeps deps;
    deps.service = service_.get();
    deps.metrics = &metrics_;
    deps.on_unplaced = rt_->UnplacedFn();
    http::AddExtenderRoutes(router_, deps);
  }
  void TearDown() override { rt_.reset(); }

  // POST /scheduler/filter for the pod as the API server has it.
  Json Filter(const std::string& key) { return FilterPod(*api_->Get("pods", key)); }
  // POST /scheduler/filter for `pod` as the request names it.
  Json FilterPod(const Json& pod) {
    Json body = {{"Pod", pod}, {"NodeNames", Json::array({"gpu-0", "gpu-1", "gpu-2"})}};
    http::HttpRequest req{"POST", "/scheduler/filter", body.dump()};
    http::RequestContext ctx;
    std::string route;
    http::HttpResponse res = router_.Dispatch(req, ctx, &route);
    EXPECT_EQ(res.status, 200) << res.body;
    return Json::parse(res.body);
  }
  // The events the API server holds for pod `name`.
  std::vector<Json> EventsFor(const std::string& name) {
    std::vector<Json> out;
    for (const Json& e : api_->Events()) {
      if (e["involvedObject"].value("name", "") == name) out.push_back(e);
    }
    return out;
  }

  std::unique_ptr<FakeApiServer> api_;
  SchedulerConfig config_;
  Metrics metrics_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
  std::unique_ptr<kube::KubeRuntime> rt_;
  std::unique_ptr<queue::QueueManager> queue_;
  http::Router router_;
};

TEST_F(KubeEventsTest, PodThatFitsNowhereGetsOneWaitingEvent) {
  const int before = api_->events_created();
  Json r = Filter("t/huge");
  EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
  ASSERT_TRUE(WaitFor([&] { return api_->events_created() > before; }));
  // Filtered again and again within the rate-limit window: no more Events.
  for (int i = 0; i < 5; ++i) Filter("t/huge");
  rt_->events()->Flush();
  EXPECT_EQ(api_->events_created(), before + 1);
  std::vector<Json> events = EventsFor("huge");
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0];
  EXPECT_EQ(e["reason"], kube::kWaitingEventReason);
  EXPECT_EQ(e["type"], "Warning");  // no node could ever hold 16 GPUs
  EXPECT_EQ(e["involvedObject"]["namespace"], "t");
  EXPECT_EQ(e["involvedObject"]["uid"], "uid-t-huge");
  EXPECT_EQ(e["message"],
            "gpusched: 0 of 3 nodes fit: node has 8 healthy GPUs, pod needs 16 (3 nodes)");
}

TEST_F(KubeEventsTest, PodHeldBackByQuotaGetsTheQueueReason) {
  const int before = api_->events_created();
  Json r = Filter("q/big");
  ASSERT_TRUE(r["NodeNames"].empty()) << r.dump();
  const std::string reason = r["FailedNodes"]["gpu-0"].get<std::string>();
  EXPECT_NE(reason.find("namespace q at its limit"), std::string::npos) << reason;
  ASSERT_TRUE(WaitFor([&] { return api_->events_created() > before; }));
  for (int i = 0; i < 5; ++i) Filter("q/big");
  rt_->events()->Flush();
  EXPECT_EQ(api_->events_created(), before + 1);
  std::vector<Json> events = EventsFor("big");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], kube::kWaitingEventReason);
  EXPECT_EQ(events[0]["type"], "Normal");  // it waits in its namespace queue
  EXPECT_EQ(events[0]["message"], reason);
}

// Pods named only in filter requests (anyone who can reach the port may
// send one) get no Event: neither a pod the API server never had, nor one
// that borrows a real pod's UID under another name or namespace.
TEST_F(KubeEventsTest, InventedPodsGetNoEvent) {
  const int before = api_->events_created();
  Json ghost = PodJson("kube-system", "ghost", 16);
  ghost["metadata"]["uid"] = "uid-ghost";
  Json renamed = *api_->Get("pods", "t/huge");
  renamed["metadata"]["name"] = "impostor";
  Json moved = *api_->Get("pods", "t/huge");
  moved["metadata"]["namespace"] = "kube-system";
  for (const Json& pod : {ghost, renamed, moved}) {
    Json r = FilterPod(pod);
    EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
  }
  rt_->events()->Flush();
  EXPECT_EQ(api_->events_created(), before);
  EXPECT_EQ(metrics_.CounterValue("gpusched_events_unknown_pod_total", {}), 3);
  // The real pod still gets its Event.
  Filter("t/huge");
  ASSERT_TRUE(WaitFor([&] { return api_->events_created() == before + 1; }));
  EXPECT_EQ(EventsFor("huge").size(), 1u);
}

TEST_F(KubeEventsTest, PodThatFitsGetsNoEvent) {
  const int before = api_->events_created();
  Json r = Filter("s/small");
  EXPECT_EQ(r["NodeNames"].size(), 3u) << r.dump();
  rt_->events()->Flush();
  EXPECT_EQ(api_->events_created(), before);
  EXPECT_TRUE(EventsFor("small").empty());
}

}  // namespace
}  // namespace gpusched::testing
