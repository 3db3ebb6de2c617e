// The invariant checker itself: each violation it exists for is reported,
// and a consistent state passes.
#include "test/kube/queue_invariants.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/kube/fake_apiserver.h"

namespace gpusched::testing {
namespace {

Holding Hold(const std::string& uid, const std::string& ns, const std::string& node,
             DeviceMask devices, int32_t gpus) {
  Holding h;
  h.uid = uid;
  h.ns = ns;
  h.node = node;
  h.node_gpus = 8;
  h.gpus = gpus;
  h.devices = devices;
  return h;
}

queue::QueueReport Report(int64_t usage_milli, int64_t limit_milli) {
  queue::QueueReport r;
  r.quotas_enabled = true;
  queue::NamespaceQueue n;
  n.ns = "t";
  n.usage_milli = usage_milli;
  n.limit_milli = limit_milli;
  r.namespaces.push_back(n);
  return r;
}

bool Mentions(const std::string& violations, const std::string& what) {
  return violations.find(what) != std::string::npos;
}

TEST(QueueInvariantsTest, ConsistentStatePasses) {
  std::vector<Holding> h = {Hold("a", "t", "n0", 0b0011, 2), Hold("b", "t", "n0", 0b1100, 2)};
  EXPECT_EQ(CheckQueueInvariants(h, Report(4000, 4000), {}), "");
}

TEST(QueueInvariantsTest, ReportsEachViolation) {
  // A device held twice.
  std::vector<Holding> twice = {Hold("a", "t", "n0", 0b0011, 2), Hold("b", "t", "n0", 0b0110, 2)};
  EXPECT_TRUE(Mentions(CheckQueueInvariants(twice, Report(4000, 8000), {}), "allocated twice"));
  // A device the node does not have.
  std::vector<Holding> beyond = {Hold("a", "t", "n0", DeviceMask{1} << 9, 1)};
  EXPECT_TRUE(Mentions(CheckQueueInvariants(beyond, Report(1000, 8000), {}), "which has 8"));
  // Over the limit; and the queue counting something else than is held.
  std::vector<Holding> three = {Hold("a", "t", "n0", 0b0111, 3)};
  EXPECT_TRUE(Mentions(CheckQueueInvariants(three, Report(3000, 2000), {}), "above its limit"));
  EXPECT_TRUE(Mentions(CheckQueueInvariants(three, Report(1000, 8000), {}), "queue counts"));
  // A placeholder no live reservation owns, and a live one without devices.
  std::vector<Holding> placeholder = {Hold("gpusched-reservation/1", "t", "n0", 0b1, 1)};
  placeholder[0].reservation = true;
  EXPECT_TRUE(
      Mentions(CheckQueueInvariants(placeholder, Report(1000, 8000), {}), "live reservations"));
  EXPECT_TRUE(Mentions(CheckQueueInvariants({}, Report(0, 8000), {"gpusched-reservation/2"}),
                       "live reservations"));
  // A queued pod that holds GPUs.
  queue::QueueReport queued = Report(2000, 8000);
  queue::QueuedPod q;
  q.ns = "t";
  q.name = "a";
  q.uid = "a";
  queued.namespaces[0].queue.push_back(q);
  EXPECT_TRUE(Mentions(CheckQueueInvariants({Hold("a", "t", "n0", 0b11, 2)}, queued, {}),
                       "queued pod t/a holds GPUs"));
}

TEST(QueueInvariantsTest, PerModelQuotas) {
  // Two H100 GPUs and one T4 held; an H100 quota of limit 2.
  Holding h100 = Hold("a", "t", "h", 0b11, 2);
  h100.product = "NVIDIA-H100-80GB-HBM3";
  Holding t4 = Hold("b", "t", "t", 0b1, 1);
  t4.product = "Tesla-T4";
  auto report = [](int64_t model_usage, int64_t model_limit) {
    queue::QueueReport r = Report(3000, 8000);
    r.namespaces[0].models.push_back({"H100", 0, model_limit, model_usage});
    return r;
  };
  EXPECT_EQ(CheckQueueInvariants({h100, t4}, report(2000, 2000), {}), "");
  EXPECT_TRUE(
      Mentions(CheckQueueInvariants({h100, t4}, report(2000, 1000), {}), "above its model limit"));
  EXPECT_TRUE(Mentions(CheckQueueInvariants({h100, t4}, report(3000, 8000), {}),
                       "model H100: queue counts 3000 milli-GPUs, pods hold 2000"));
  // Where the products are unknown (the API view) only the limit is checked.
  Holding unknown = t4;
  unknown.product.clear();
  EXPECT_EQ(CheckQueueInvariants({h100, unknown}, report(3000, 8000), {}), "");
  EXPECT_TRUE(Mentions(CheckQueueInvariants({h100, unknown}, report(3000, 2000), {}),
                       "above its model limit"));
}

TEST(QueueInvariantsTest, ApiViewAgainstDebugQueues) {
  std::vector<Json> pods = {
      PodJson("t", "a", 2, "n0", "0,1", "Running"), PodJson("t", "b", 2, "n0", "2,3", "Running"),
      PodJson("t", "done", 2, "n0", "0,1", "Succeeded"), PodJson("t", "pending", 2)};
  auto gpus = [](const std::string&) { return 8; };
  const std::string ok = R"({"quotasEnabled": true, "namespaces": [{"namespace": "t",
      "limitGpus": 4, "usageGpus": 4, "queue": []}], "gangReservations": []})";
  EXPECT_EQ(CheckQueueInvariants(pods, gpus, ok), "");
  // /debug/queues' per-model usage above the model's limit.
  const std::string model_over = R"({"quotasEnabled": true, "namespaces": [{"namespace": "t",
      "limitGpus": 8, "usageGpus": 4, "queue": [],
      "models": [{"model": "H100", "guaranteedGpus": 2, "limitGpus": 2, "usageGpus": 4}]}],
      "gangReservations": []})";
  EXPECT_TRUE(Mentions(CheckQueueInvariants(pods, gpus, model_over), "above its model limit"));
  // The process counts a GPU the API does not show bound: a leaked assumption.
  const std::string leaked = R"({"quotasEnabled": true, "namespaces": [{"namespace": "t",
      "limitGpus": 8, "usageGpus": 6, "queue": []}], "gangReservations": []})";
  EXPECT_TRUE(Mentions(CheckQueueInvariants(pods, gpus, leaked), "queue counts"));
  const std::string open = R"({"quotasEnabled": true, "namespaces": [{"namespace": "t",
      "limitGpus": 8, "usageGpus": 4, "queue": []}],
      "gangReservations": [{"namespace": "t", "gang": "g", "slots": 2, "bound": 0}]})";
  EXPECT_TRUE(Mentions(CheckQueueInvariants(pods, gpus, open), "open slots"));
  pods.push_back(PodJson("t", "clash", 1, "n0", "3", "Running"));
  EXPECT_TRUE(Mentions(CheckQueueInvariants(pods, gpus, ok), "allocated twice"));
}

}  // namespace
}  // namespace gpusched::testing
