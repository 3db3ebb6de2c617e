// kill -9 restart equivalence with the real binary: the built `gpusched
// serve --kubeconfig` runs against an in-process FakeApiServer, is killed
// with SIGKILL in the middle of a filter+bind burst, restarted, and checked:
// no device twice, every bound pod's ids valid for its node, filter answers
// after the restart equal those of a cold start, and the remaining binds
// after the restart never double-allocate. Also the served binary with the
// GPUQuota CRD installed (quota objects end to end).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/kube/fake_apiserver.h"
#include "test/kube/kube_test_util.h"
#include "test/kube/queue_invariants.h"
#include "test/testing/child_process.h"

namespace gpusched::testing {
namespace {

constexpr char kIdsKey[] = "gpusched.io/gpu-ids";
constexpr int kGpusPerNode = 8;

class KubeRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st {};
    if (stat(GPUSCHED_BINARY, &st) != 0) GTEST_SKIP() << "gpusched binary not built";
    pki_ = MakeTestPki();
    api_ = std::make_unique<FakeApiServer>(pki_, kToken);
    api_->Start();
    for (int i = 0; i < 3; ++i) {
      nodes_.push_back("gpu-node-" + std::to_string(i));
      api_->Put("nodes", NodeJson(nodes_.back(), kGpusPerNode));
    }
    // 10 pending pods of 2 GPUs: 20 of the 24 GPUs.
    for (int i = 0; i < 10; ++i) {
      pods_.push_back("train-" + std::to_string(i));
      api_->Put("pods", PodJson("team-a", pods_.back(), 2));
    }
    kubeconfig_ =
        WriteTempFile("restart_kubeconfig", KubeconfigYaml(api_->port(), pki_.ca_pem, kToken));
    Json cfg =
        Json::parse(ReadAll(std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json"));
    // team-a may hold 22 GPUs: its 10 pods of 2 and one more of 2 fit,
    // a pod of 4 on top does not.
    cfg["quotas"] = Json::parse(R"({"default": {"guaranteed": 0, "limit": 4},
        "namespaces": {"team-a": {"guaranteed": 22, "limit": 22}}})");
    config_ = WriteTempFile("restart_policy.json", cfg.dump());
    log_ = WriteTempFile("restart_gpusched.log", "");
  }
  void TearDown() override {
    if (api_ != nullptr) api_->Stop();
  }

  // Starts gpusched on a fresh port and waits until /readyz is 200.
  std::unique_ptr<Child> Start(uint16_t* port) {
    *port = FreePort();
    auto c = std::make_unique<Child>(
        GPUSCHED_BINARY,
        std::vector<std::string>{"serve", "--kubeconfig", kubeconfig_, "--config", config_,
                                 "--listen", "127.0.0.1:" + std::to_string(*port)},
        log_);
    EXPECT_TRUE(c->started());
    bool ready = WaitFor([&] { return !c->Alive() || Http(*port, "GET", "/readyz").status == 200; },
                         std::chrono::milliseconds(15000));
    EXPECT_TRUE(ready && c->Alive()) << "gpusched not ready; log:\n" << ReadAll(log_);
    return c;
  }

  std::string FilterBody(const std::string& pod) const {
    Json pj = *api_->Get("pods", "team-a/" + pod);
    return Json{{"Pod", pj}, {"NodeNames", nodes_}}.dump();
  }
  std::string BindBody(const std::string& pod, const std::string& node) const {
    return Json{{"PodName", pod},
                {"PodNamespace", "team-a"},
                {"PodUID", "uid-team-a-" + pod},
                {"Node", node}}
        .dump();
  }
  // Filter then bind to the first feasible node; returns true if bound.
  bool FilterAndBind(uint16_t port, const std::string& pod,
                     const std::function<void()>& after_bind_sent = {}) {
    HttpResult f = Http(port, "POST", "/scheduler/filter", FilterBody(pod));
    if (f.status != 200) return false;
    Json fr = Json::parse(f.body, nullptr, false);
    if (fr.is_discarded() || !fr.contains("NodeNames") || !fr["NodeNames"].is_array() ||
        fr["NodeNames"].empty())
      return false;
    HttpResult b = Http(port, "POST", "/scheduler/bind",
                        BindBody(pod, fr["NodeNames"][0].get<std::string>()), after_bind_sent);
    if (b.status != 200) return false;
    Json br = Json::parse(b.body, nullptr, false);
    return !br.is_discarded() && br.value("Error", "x").empty();
  }

  // The invariants on the API server's view.
  void CheckApiInvariants() {
    std::set<std::string> used;
    for (const Json& p : api_->List("pods")) {
      std::string name = p["metadata"]["name"].get<std::string>();
      std::string node = p["spec"].value("nodeName", "");
      if (node.empty()) continue;
      const Json& ann = p["metadata"]["annotations"];
      ASSERT_TRUE(ann.contains(kIdsKey)) << name << " bound without " << kIdsKey;
      std::string ids = ann[kIdsKey].get<std::string>();
      std::stringstream ss(ids);
      std::string tok;
      int n = 0;
      while (std::getline(ss, tok, ',')) {
        ASSERT_FALSE(tok.empty()) << name << ": " << ids;
        int id = std::atoi(tok.c_str());
        EXPECT_GE(id, 0) << name << ": " << ids;
        EXPECT_LT(id, kGpusPerNode) << name << ": " << ids;
        EXPECT_TRUE(used.insert(node + "/" + std::to_string(id)).second)
            << "device " << node << "/" << id << " assigned twice (" << name << ")";
        ++n;
      }
      EXPECT_EQ(n, 2) << name << ": " << ids;
    }
  }
  // The queue-manager invariants of the process on `port` against the API
  // server's pods: no device twice, no quota overrun, its usage equal to
  // what the API shows bound (no leaked assumption or reservation).
  void CheckQueueInvariantsOf(uint16_t port) {
    HttpResult q = Http(port, "GET", "/debug/queues");
    ASSERT_EQ(q.status, 200) << q.body;
    Json report = Json::parse(q.body, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << q.body;
    EXPECT_TRUE(report.value("quotasEnabled", false)) << q.body;
    EXPECT_EQ(CheckQueueInvariants(
                  api_->List("pods"), [](const std::string&) { return kGpusPerNode; }, q.body),
              "");
  }
  int BoundCount() const {
    int n = 0;
    for (const Json& p : api_->List("pods")) n += !p["spec"].value("nodeName", "").empty();
    return n;
  }

  TestPki pki_;
  std::unique_ptr<FakeApiServer> api_;
  std::vector<std::string> nodes_, pods_;
  std::string kubeconfig_, config_, log_;
};

TEST_F(KubeRestartTest, KillMinusNineMidBurstThenRestartEqualsColdStart) {
  uint16_t port1 = 0;
  auto first = Start(&port1);
  ASSERT_TRUE(first->Alive());
  // The burst: the 5th bind is killed right after its request is written.
  constexpr size_t kKillAt = 4;
  for (size_t i = 0; i <= kKillAt; ++i) {
    if (i == kKillAt) {
      FilterAndBind(port1, pods_[i], [&] { first->Kill(SIGKILL); });
    } else {
      EXPECT_TRUE(FilterAndBind(port1, pods_[i])) << pods_[i] << "\n" << ReadAll(log_);
    }
  }
  ASSERT_FALSE(first->Alive());
  CheckApiInvariants();
  EXPECT_GE(BoundCount(), static_cast<int>(kKillAt));

  // Restart and bind the rest.
  uint16_t port2 = 0;
  auto second = Start(&port2);
  ASSERT_TRUE(second->Alive());
  CheckQueueInvariantsOf(port2);
  for (const std::string& pod : pods_) {
    auto p = api_->Get("pods", "team-a/" + pod);
    if (!(*p)["spec"].value("nodeName", "").empty()) continue;
    EXPECT_TRUE(FilterAndBind(port2, pod)) << pod << "\n" << ReadAll(log_);
    CheckApiInvariants();
    CheckQueueInvariantsOf(port2);
  }
  EXPECT_EQ(BoundCount(), static_cast<int>(pods_.size()));
  CheckApiInvariants();

  // A new pending pod: the restarted process and a cold third start answer
  // its filter identically (and a too-large one too).
  api_->Put("pods", PodJson("team-a", "probe-2", 2));
  api_->Put("pods", PodJson("team-a", "probe-4", 4));
  std::vector<std::string> probes = {"probe-2", "probe-4"};
  auto answers = [&](uint16_t port) {
    std::vector<std::string> out;
    for (const auto& p : probes) {
      HttpResult r = Http(port, "POST", "/scheduler/filter", FilterBody(p));
      EXPECT_EQ(r.status, 200);
      Json j = Json::parse(r.body, nullptr, false);
      out.push_back(j.is_discarded() ? r.body : j.dump());
    }
    return out;
  };
  // Let the restarted process see the probes (filter requests never add a
  // pod: only the watch does) and its own binds through the watch first.
  auto knows = [&](uint16_t port) {
    for (const auto& p : probes) {
      if (Http(port, "GET", "/debug/pods/team-a/" + p, "").status != 200) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitFor([&] { return knows(port2); }, std::chrono::milliseconds(5000)));
  std::vector<std::string> after_restart;
  WaitFor(
      [&] {
        after_restart = answers(port2);
        return after_restart == answers(port2);
      },
      std::chrono::milliseconds(3000));
  second->Kill(SIGKILL);
  uint16_t port3 = 0;
  auto cold = Start(&port3);
  ASSERT_TRUE(cold->Alive());
  ASSERT_TRUE(WaitFor([&] { return knows(port3); }, std::chrono::milliseconds(5000)));
  std::vector<std::string> cold_answers = answers(port3);
  EXPECT_EQ(after_restart, cold_answers);
  CheckQueueInvariantsOf(port3);
  // The 4-GPU probe is over team-a's quota, in both.
  Json p4 = Json::parse(cold_answers[1]);
  EXPECT_TRUE(p4["NodeNames"].empty()) << cold_answers[1];
  // 2 GPUs of team-a's quota are left: the 2-GPU probe fits.
  Json p2 = Json::parse(cold_answers[0]);
  EXPECT_FALSE(p2["NodeNames"].empty()) << cold_answers[0];
  cold->Kill(SIGTERM);
  CheckApiInvariants();
}

// `gpusched serve` with the GPUQuota CRD installed: the objects replace the
// file's quotas.namespaces (quotaSource in /debug/queues, one log line), a
// change is enforced within a watch event, and the leader writes the status.
TEST_F(KubeRestartTest, GpuQuotaObjectsDecideAdmissionAndCarryStatus) {
  api_->ServeApiGroup("gpusched.io/v1alpha1");
  auto quota = [](int gpus) {
    return Json{{"apiVersion", "gpusched.io/v1alpha1"},
                {"kind", "GPUQuota"},
                {"metadata", {{"name", "gpu-quota"}, {"namespace", "team-a"}}},
                // Submission order: the fake's pods started months ago, so the
                // default attained-service order would evict them for the
                // queued ones (a behaviour of its own, tested in the queue).
                {"spec", {{"guaranteed", gpus}, {"attainedService", {{"enabled", false}}}}}};
  };
  api_->Put("gpusched.io/gpuquotas", quota(2));
  uint16_t port = 0;
  auto child = Start(&port);
  HttpResult q = Http(port, "GET", "/debug/queues?namespace=team-a");
  ASSERT_EQ(q.status, 200);
  Json report = Json::parse(q.body);
  EXPECT_EQ(report["quotaSource"], "GPUQuota objects (gpusched.io/v1alpha1)");
  EXPECT_EQ(report["namespaces"][0]["guaranteedGpus"], 2.0);  // not the file's 22
  EXPECT_TRUE(FilterAndBind(port, pods_[0]));
  EXPECT_FALSE(FilterAndBind(port, pods_[1]));  // 2 of 2 used

  api_->Put("gpusched.io/gpuquotas", quota(4));
  EXPECT_TRUE(
      WaitFor([&] { return FilterAndBind(port, pods_[1]); }, std::chrono::milliseconds(5000)));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto o = api_->Get("gpusched.io/gpuquotas", "team-a/gpu-quota");
        return o && o->contains("status") && (*o)["status"].value("used", "") == "4" &&
               (*o)["status"].value("observedGeneration", 0) == 2;
      },
      std::chrono::milliseconds(10000)))
      << api_->Get("gpusched.io/gpuquotas", "team-a/gpu-quota")->dump();
  const Json status = (*api_->Get("gpusched.io/gpuquotas", "team-a/gpu-quota"))["status"];
  EXPECT_EQ(status["guaranteed"], "4");
  EXPECT_EQ(status["pendingPods"], 8);
  EXPECT_EQ(status["conditions"][0]["type"], "Active");
  EXPECT_EQ(status["conditions"][0]["status"], "True");
  EXPECT_NE(ReadAll(log_).find("quotas: source is now GPUQuota objects"), std::string::npos)
      << ReadAll(log_);
}

}  // namespace
}  // namespace gpusched::testing
