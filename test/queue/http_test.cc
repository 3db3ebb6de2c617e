// filter -> bind -> preempt -> debug through the HTTP routes (Router
// dispatch, the same handlers the Beast server runs), with the demo cluster;
// gangs, quota hot reload and reclaim seen through the HTTP answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scheduler/codec/extender_codec.h"
#include "scheduler/http/extender_routes.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::Pcie4xT4;
using ::gpusched::testing::PodBuilder;
using ::testing::HasSubstr;
using ::testing::Not;

std::string PodJson(const std::string& name, const std::string& ns, int gpus, int priority) {
  return "{\"metadata\":{\"name\":\"" + name + "\",\"namespace\":\"" + ns + "\",\"uid\":\"uid-" +
         name + "\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},\"spec\":{\"priority\":" +
         std::to_string(priority) +
         ",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"" +
         std::to_string(gpus) + "\"}}}]},\"status\":{\"phase\":\"Pending\"}}";
}

// Router with the extender and debug routes over a harness.
struct Routes {
  // `after_bind`: the cluster write-back (ExtenderService::SetBindWriteBack),
  // as --kube mode installs it.
  explicit Routes(testing::Harness& h,
                  std::function<std::string(const BindingArgs&, DeviceMask)> after_bind = {})
      : harness(&h) {
    h.service->SetBindWriteBack(std::move(after_bind));
    deps.service = h.service.get();
    deps.metrics = &metrics;
    deps.debug_queues = [&h](const ReportQuery& q) { return h.queue->Report(q); };
    deps.debug_pod = [&h](const std::string& ns, const std::string& name) {
      return h.queue->ExplainPod(ns, name);
    };
    http::AddExtenderRoutes(router, deps);
  }
  http::HttpResponse Call(std::string method, std::string target, std::string body) {
    http::HttpRequest req{std::move(method), std::move(target), std::move(body)};
    std::string route;
    return router.Dispatch(req, ctx, &route);
  }
  // The cluster source shows `pod` first (as the watch does before
  // kube-scheduler filters it), then the filter request names it.
  http::HttpResponse Filter(const std::string& pod, const std::string& nodes) {
    std::string body = pod;
    codec::RequestDecoder decoder;
    auto decoded = decoder.DecodePodObject(body);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    if (decoded.ok()) harness->Submit(*decoded);
    return FilterOnly(pod, nodes);
  }
  http::HttpResponse FilterOnly(const std::string& pod, const std::string& nodes) {
    return Call("POST", "/scheduler/filter", "{\"Pod\":" + pod + ",\"NodeNames\":" + nodes + "}");
  }
  http::HttpResponse Bind(const std::string& name, const std::string& ns, const std::string& node) {
    return Call("POST", "/scheduler/bind",
                "{\"PodName\":\"" + name + "\",\"PodNamespace\":\"" + ns + "\",\"PodUID\":\"uid-" +
                    name + "\",\"Node\":\"" + node + "\"}");
  }
  testing::Harness* harness;
  Metrics metrics;
  http::Router router;
  http::RouteDeps deps;
  http::RequestContext ctx;
};

TEST(QueueHttpTest, FilterBindPreemptAndDebug) {
  QueueOptions o;
  o.quotas = testing::Quotas({{"team-a", testing::Quota(8, 8)}, {"team-b", testing::Quota(8, 8)}});
  testing::Harness h({Hgx8H100("h0")}, {}, o);
  Routes routes(h);
  auto call = [&](std::string method, std::string target, std::string body) {
    return routes.Call(std::move(method), std::move(target), std::move(body));
  };
  auto filter = [&](const std::string& pod) { return routes.Filter(pod, "[\"h0\"]"); };
  const std::string low = PodJson("low", "team-b", 8, 1);
  auto r = filter(low);
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("\"NodeNames\":[\"h0\"]"));
  r = call("POST", "/scheduler/bind",
           R"({"PodName":"low","PodNamespace":"team-b","PodUID":"uid-low","Node":"h0"})");
  EXPECT_THAT(r.body, HasSubstr("\"Error\":\"\""));
  const std::string high = PodJson("high", "team-a", 4, 1000);
  r = filter(high);
  EXPECT_THAT(r.body, HasSubstr("0 of 8 GPUs free"));
  r = call("POST", "/scheduler/preempt",
           "{\"Pod\":" + high +
               ",\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":{\"h0\":{\"Pods\":[{"
               "\"UID\":\"uid-low\"}],\"NumPDBViolations\":0}}}");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("uid-low"));
  r = call("GET", "/debug/queues", "");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("\"team-a\""));
  EXPECT_THAT(r.body, HasSubstr("\"high\""));
  r = call("GET", "/debug/pods/team-a/high", "");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("team-b/low"));  // what preemption would evict
  EXPECT_EQ(call("GET", "/debug/pods/team-a/none", "").status, 404);
}

// The node names a filter answer lets through.
std::vector<std::string> Passed(const http::HttpResponse& r) {
  std::vector<std::string> out;
  auto j = nlohmann::json::parse(r.body);
  if (j.contains("NodeNames") && j["NodeNames"].is_array()) {
    for (const auto& n : j["NodeNames"]) out.push_back(n.get<std::string>());
  }
  return out;
}

// Namespace `ns`'s entry of GET /debug/queues (null if it is not listed).
nlohmann::json DebugNamespace(Routes& routes, const std::string& ns) {
  auto j = nlohmann::json::parse(routes.Call("GET", "/debug/queues", "").body);
  for (const auto& n : j["namespaces"]) {
    if (n["namespace"] == ns) return n;
  }
  return nlohmann::json();
}

// A bind whose write-back fails answers Error and rolls the assumption back:
// the devices are free again, quota usage is back to zero, and the pod is
// pending and can be filtered and bound once the write succeeds.
TEST(QueueHttpTest, BindWhoseWriteBackFailsRollsTheAssumptionBack) {
  QueueOptions o;
  o.quotas = testing::Quotas({{"team-a", testing::Quota(8, 8)}});
  testing::Harness h({Hgx8H100("h0")}, {}, o);
  bool fail = true;
  Routes routes(h, [&fail](const BindingArgs&, DeviceMask) {
    return fail ? std::string("pods \"a1\" is forbidden: the API server refused") : std::string();
  });
  ASSERT_THAT(routes.Filter(PodJson("a1", "team-a", 8, 0), "[\"h0\"]").body,
              HasSubstr("\"NodeNames\":[\"h0\"]"));
  auto r = routes.Bind("a1", "team-a", "h0");
  EXPECT_THAT(r.body, HasSubstr("the API server refused"));
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 0);
  auto pod = h.state().FindPodByName("team-a", "a1");
  ASSERT_TRUE(pod.has_value());
  EXPECT_TRUE(pod->node_name.empty());
  EXPECT_EQ(DebugNamespace(routes, "team-a")["usageGpus"], 0.0);
  // The rolled-back pod is back in its queue, first: a later pod of the
  // namespace waits behind it for the quota it frees.
  EXPECT_THAT(routes.Filter(PodJson("a2", "team-a", 8, 0), "[\"h0\"]").body,
              HasSubstr("1 earlier in queue need 8; position 2 in queue"));
  fail = false;
  EXPECT_THAT(routes.Filter(PodJson("a1", "team-a", 8, 0), "[\"h0\"]").body,
              HasSubstr("\"NodeNames\":[\"h0\"]"));
  EXPECT_THAT(routes.Bind("a1", "team-a", "h0").body, HasSubstr("\"Error\":\"\""));
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 8000);
}

// A per-model quota: /debug/queues shows its usage, and once the H100 amount
// is used up a pod that may run on any GPU passes only the T4 node.
TEST(QueueHttpTest, PerModelQuotaIsReportedAndEnforced) {
  QueueOptions o;
  NamespaceQuota a = testing::Quota(8, 8);
  a.models["H100"] = {4, 4};
  o.quotas = testing::Quotas({{"team-a", a}});
  testing::Harness h({Hgx8H100("h0"), Pcie4xT4("t0")}, {}, o);
  Routes routes(h);
  const std::string nodes = "[\"h0\",\"t0\"]";
  ASSERT_THAT(routes.Filter(PodJson("a1", "team-a", 4, 0), "[\"h0\"]").body,
              HasSubstr("\"NodeNames\":[\"h0\"]"));
  ASSERT_THAT(routes.Bind("a1", "team-a", "h0").body, HasSubstr("\"Error\":\"\""));
  nlohmann::json n = DebugNamespace(routes, "team-a");
  EXPECT_EQ(n["usageGpus"], 4.0);
  ASSERT_EQ(n["models"].size(), 1u);
  EXPECT_EQ(n["models"][0]["model"], "H100");
  EXPECT_EQ(n["models"][0]["guaranteedGpus"], 4.0);
  EXPECT_EQ(n["models"][0]["limitGpus"], 4.0);
  EXPECT_EQ(n["models"][0]["usageGpus"], 4.0);
  auto r = routes.Filter(PodJson("a2", "team-a", 1, 0), nodes);
  EXPECT_EQ(Passed(r), std::vector<std::string>{"t0"});
  EXPECT_THAT(r.body, HasSubstr("\"h0\":\"gpusched: namespace team-a at its H100 limit: holds 4 "
                                "of limit 4 H100 GPUs"));
}

// Hot reload (SetOptions is what the config watcher calls) changes the
// admission answer of the HTTP filter.
TEST(QueueHttpTest, QuotaReloadChangesFilterAnswer) {
  QueueOptions o;
  o.quotas = testing::Quotas({{"team-a", testing::Quota(8, 8)}});
  testing::Harness h({Hgx8H100("h0")}, {}, o);
  Routes routes(h);
  auto r = routes.Filter(PodJson("a1", "team-a", 4, 0), "[\"h0\"]");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("\"NodeNames\":[\"h0\"]"));
  EXPECT_THAT(routes.Bind("a1", "team-a", "h0").body, HasSubstr("\"Error\":\"\""));

  o.quotas = testing::Quotas({{"team-a", testing::Quota(4, 4)}});
  h.queue->SetOptions(o);
  r = routes.Filter(PodJson("a2", "team-a", 4, 0), "[\"h0\"]");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("at its limit: holds 4 of limit 4"));
  EXPECT_THAT(r.body, Not(HasSubstr("\"NodeNames\":[\"h0\"]")));

  o.quotas = testing::Quotas({{"team-a", testing::Quota(8, 8)}});
  h.queue->SetOptions(o);
  r = routes.Filter(PodJson("a2", "team-a", 4, 0), "[\"h0\"]");
  EXPECT_THAT(r.body, HasSubstr("\"NodeNames\":[\"h0\"]"));
}

// A pending team-a pod of a two-member gang; `identity` is the metadata
// that makes the gang: by default an explicit gang name.
std::string GangPodJson(
    const std::string& name, int gpus,
    const std::string& identity =
        R"("annotations":{"gpusched.io/gang":"g","gpusched.io/gang-size":"2"})") {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"team-a","uid":"uid-)" + name +
         R"(","creationTimestamp":"2026-01-01T00:00:00Z",)" + identity +
         R"(},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":")" +
         std::to_string(gpus) + R"("}}}]},"status":{"phase":"Pending"}})";
}

// A gang of two 8-GPU pods: the first member's filter reserves devices for
// both, each member passes on its own reserved node, both bind and the
// reservation is gone.
TEST(QueueHttpTest, GangMembersPassFilterOnlyWhenAllAreReservedThenBind) {
  testing::Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, {}, QueueOptions{});
  Routes routes(h);
  const std::string nodes = "[\"h0\",\"h1\"]";
  auto n0 = Passed(routes.Filter(GangPodJson("m0", 8), nodes));
  ASSERT_EQ(n0.size(), 1u);
  EXPECT_EQ(::gpusched::testing::ReservationHolders(h.state()).size(), 2u);
  auto r = routes.Call("GET", "/debug/queues", "");
  EXPECT_THAT(r.body, HasSubstr("\"gangReservations\""));
  EXPECT_THAT(r.body, HasSubstr("\"slots\": 2"));
  // A pod outside the gang cannot take the reserved devices.
  EXPECT_TRUE(Passed(routes.Filter(PodJson("other", "team-a", 1, 0), nodes)).empty());
  auto n1 = Passed(routes.Filter(GangPodJson("m1", 8), nodes));
  ASSERT_EQ(n1.size(), 1u);
  EXPECT_NE(n0[0], n1[0]);
  EXPECT_THAT(routes.Bind("m0", "team-a", n0[0]).body, HasSubstr("\"Error\":\"\""));
  EXPECT_THAT(routes.Bind("m1", "team-a", n1[0]).body, HasSubstr("\"Error\":\"\""));
  EXPECT_TRUE(::gpusched::testing::ReservationHolders(h.state()).empty());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 16000);
}

// The same gang made the way a Job makes it: gang-size set once in the pod
// template, no gang name; the pods' controlling Job is the gang.
TEST(QueueHttpTest, JobPodsWithOnlyGangSizeAreOneGang) {
  testing::Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, {}, QueueOptions{});
  Routes routes(h);
  const std::string nodes = "[\"h0\",\"h1\"]";
  const std::string job =
      R"("ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"llm","uid":"j1",)"
      R"("controller":true}],"annotations":{"gpusched.io/gang-size":"2"})";
  auto n0 = Passed(routes.Filter(GangPodJson("llm-0", 8, job), nodes));
  ASSERT_EQ(n0.size(), 1u);
  EXPECT_EQ(::gpusched::testing::ReservationHolders(h.state()).size(), 2u);
  EXPECT_THAT(routes.Call("GET", "/debug/queues", "").body, HasSubstr("\"gang\": \"llm\""));
  auto n1 = Passed(routes.Filter(GangPodJson("llm-1", 8, job), nodes));
  ASSERT_EQ(n1.size(), 1u);
  EXPECT_NE(n0[0], n1[0]);
  EXPECT_THAT(routes.Bind("llm-0", "team-a", n0[0]).body, HasSubstr("\"Error\":\"\""));
  EXPECT_THAT(routes.Bind("llm-1", "team-a", n1[0]).body, HasSubstr("\"Error\":\"\""));
  EXPECT_TRUE(::gpusched::testing::ReservationHolders(h.state()).empty());
}

// team-a borrows team-b's idle guarantee through filter+bind; team-b (higher
// priority; reclaim evicts only lower-priority borrowers by default) then
// waits below its guarantee, the tick's reclaim evicts one borrower through
// the cluster writer (applied to the in-memory state, as in file mode), and
// /debug/queues shows team-a back at its guarantee.
TEST(QueueHttpTest, ReclaimEvictsBorrowerVisibleInDebugQueues) {
  QueueOptions o;
  o.quotas = testing::Quotas(
      {{"team-a", testing::Quota(8, 16, "r")}, {"team-b", testing::Quota(8, 16, "r")}});
  testing::Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, {}, o);
  Routes routes(h);
  const std::string nodes = "[\"h0\",\"h1\"]";
  for (int i = 0; i < 4; ++i) {
    const std::string name = "a" + std::to_string(i);
    auto passed = Passed(routes.Filter(PodJson(name, "team-a", 4, 0), nodes));
    ASSERT_FALSE(passed.empty()) << name;
    ASSERT_THAT(routes.Bind(name, "team-a", passed[0]).body, HasSubstr("\"Error\":\"\""));
  }
  auto team = [&](const std::string& ns) { return DebugNamespace(routes, ns); };
  EXPECT_EQ(team("team-a")["usageGpus"].get<double>(), 16);
  EXPECT_EQ(team("team-a")["borrowedGpus"].get<double>(), 8);
  EXPECT_TRUE(Passed(routes.Filter(PodJson("b", "team-b", 4, 10), nodes)).empty());
  EXPECT_EQ(h.queue->Tick(), 1);
  EXPECT_EQ(h.writer.evicted.size(), 1u);
  EXPECT_EQ(team("team-a")["usageGpus"].get<double>(), 12);
  EXPECT_EQ(team("team-a")["borrowedGpus"].get<double>(), 4);
  EXPECT_EQ(Passed(routes.Filter(PodJson("b", "team-b", 4, 10), nodes)).size(), 1u);
}

}  // namespace
}  // namespace gpusched::queue
