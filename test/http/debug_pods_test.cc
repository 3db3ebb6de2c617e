// GET /debug/pods/<ns>/<name> for bound pods, through the extender's routes
// wired as `gpusched serve` wires them (queue::ExplainPodWithDevices): the
// node, the devices gpusched recorded, those the node agent confirmed from
// the kubelet, and those gpusched's accounting counts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "scheduler/codec/extender_codec.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/queue/pod_devices.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using json = nlohmann::json;

// A pod of namespace t asking for `gpus` GPUs, bound to "n1" when `bound`,
// with the device annotations given.
PodRequest Pod(const std::string& name, int gpus, bool bound,
               const std::optional<std::string>& ids = std::nullopt,
               const std::optional<std::string>& confirmed = std::nullopt) {
  json ann = json::object();
  if (ids) ann["gpusched.io/gpu-ids"] = *ids;
  if (confirmed) ann["gpusched.io/gpu-ids-confirmed"] = *confirmed;
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", "t"},
                {"uid", "uid-" + name},
                {"creationTimestamp", "2026-01-01T00:00:00Z"},
                {"annotations", ann}}},
              {"spec",
               {{"containers",
                 {{{"name", "main"},
                   {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
              {"status", {{"phase", bound ? "Running" : "Pending"}}}};
  if (bound) pod["spec"]["nodeName"] = "n1";
  std::string text = pod.dump();
  codec::RequestDecoder decoder;
  auto p = decoder.DecodePodObject(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : PodRequest{};
}

class DebugPodsTest : public ::testing::Test {
 protected:
  DebugPodsTest()
      : h_({gpusched::testing::Dgx1V100("n1")},
           {Pod("recorded", 2, true, "4,5"), Pod("confirmed", 2, true, "0,1", "0,1"),
            Pod("unrecorded", 1, true), Pod("cpu", 0, true), Pod("waits", 1, false)},
           QueueOptions{}) {
    deps_.service = h_.service.get();
    deps_.metrics = &metrics_;
    deps_.debug_pod = [this](const std::string& ns, const std::string& name) {
      return ExplainPodWithDevices(*h_.queue, h_.state(), ns, name);
    };
    http::AddExtenderRoutes(router_, deps_);
  }

  // The answer's JSON; status in *status.
  json Get(const std::string& name, int* status) {
    http::HttpRequest req{"GET", "/debug/pods/t/" + name, ""};
    std::string route;
    http::HttpResponse r = router_.Dispatch(req, ctx_, &route);
    *status = r.status;
    return json::parse(r.body);
  }

  testing::Harness h_;
  Metrics metrics_;
  http::Router router_;
  http::RouteDeps deps_;
  http::RequestContext ctx_;
};

TEST_F(DebugPodsTest, BoundPodShowsItsNodeAndDevices) {
  int status = 0;
  json j = Get("recorded", &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["state"], "bound");
  EXPECT_EQ(j["node"], "n1");
  EXPECT_EQ(j["recordedGpuIds"], "4,5");
  EXPECT_TRUE(j["confirmedGpuIds"].is_null());  // the agent has not confirmed it yet
  EXPECT_EQ(j["countedGpuIds"], "4,5");         // it holds them all the same

  j = Get("confirmed", &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(j["recordedGpuIds"], "0,1");
  EXPECT_EQ(j["confirmedGpuIds"], "0,1");
  EXPECT_EQ(j["countedGpuIds"], "0,1");
}

TEST_F(DebugPodsTest, BoundPodWithoutARecordShowsTheDevicesItIsCountedOn) {
  int status = 0;
  json j = Get("unrecorded", &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_TRUE(j["recordedGpuIds"].is_null());
  EXPECT_TRUE(j["confirmedGpuIds"].is_null());
  // One free device, not one recorded by another pod.
  const std::string counted = j["countedGpuIds"];
  ASSERT_EQ(counted.size(), 1u);
  EXPECT_EQ(std::string("0145").find(counted[0]), std::string::npos) << counted;
}

TEST_F(DebugPodsTest, PodsWithoutDevicesShowNone) {
  int status = 0;
  json j = Get("waits", &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_FALSE(j.contains("recordedGpuIds"));
  j = Get("cpu", &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(j["state"], "bound");
  EXPECT_FALSE(j.contains("recordedGpuIds")) << j.dump();
  j = Get("none", &status);
  EXPECT_EQ(status, 404);
}

TEST_F(DebugPodsTest, ACorrectedRecordIsShownAsCorrected) {
  // The agent corrects "recorded" to what the kubelet assigned (2,3).
  h_.state().UpsertPod(Pod("recorded", 2, true, "2,3", "2,3"));
  h_.state().Commit();
  int status = 0;
  json j = Get("recorded", &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(j["recordedGpuIds"], "2,3");
  EXPECT_EQ(j["confirmedGpuIds"], "2,3");
  EXPECT_EQ(j["countedGpuIds"], "2,3");
}

}  // namespace
}  // namespace gpusched::queue
