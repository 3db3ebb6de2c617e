// filter -> bind -> preempt -> debug through the HTTP routes (Router
// dispatch, the same handlers the Beast server runs), with the demo cluster.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/http/extender_routes.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::PodBuilder;
using ::testing::HasSubstr;

std::string PodJson(const std::string& name, const std::string& ns, int gpus, int priority) {
  return "{\"metadata\":{\"name\":\"" + name + "\",\"namespace\":\"" + ns + "\",\"uid\":\"uid-" +
         name + "\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},\"spec\":{\"priority\":" +
         std::to_string(priority) +
         ",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"" +
         std::to_string(gpus) + "\"}}}]},\"status\":{\"phase\":\"Pending\"}}";
}

TEST(QueueHttpTest, FilterBindPreemptAndDebug) {
  QueueOptions o;
  o.quotas = testing::Quotas({{"team-a", testing::Quota(8, 8)}, {"team-b", testing::Quota(8, 8)}});
  testing::Harness h({Hgx8H100("h0")}, {}, o);
  Metrics metrics;
  http::Router router;
  http::RouteDeps deps;
  deps.service = h.service.get();
  deps.metrics = &metrics;
  deps.debug_queues = [&h] { return h.queue->Report(); };
  deps.debug_pod = [&h](const std::string& ns, const std::string& name) {
    return h.queue->ExplainPod(ns, name);
  };
  http::AddExtenderRoutes(router, deps);
  http::RequestContext ctx;
  auto call = [&](std::string method, std::string target, std::string body) {
    http::HttpRequest req{std::move(method), std::move(target), std::move(body)};
    std::string route;
    return router.Dispatch(req, ctx, &route);
  };
  auto filter = [&](const std::string& pod) {
    return call("POST", "/scheduler/filter", "{\"Pod\":" + pod + ",\"NodeNames\":[\"h0\"]}");
  };
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

}  // namespace
}  // namespace gpusched::queue
