// The built `gpusched node-agent` against a fake kubelet and the fake API
// server: it registers its two resources, corrects a drifted record from
// PodResources and publishes the topology (--once); running, it re-registers
// after a kubelet restart and stops on SIGTERM. Its RSS is printed for the
// README (measured, not asserted).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "test/agent/fake_kubelet.h"
#include "test/kube/kube_test_util.h"

namespace gpusched::testing {
namespace {

constexpr char kNode[] = "dgx1";

std::string Uuid(int i) { return absl::StrCat("GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d4000", i); }

class NodeAgentCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gsc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    pki_ = MakeTestPki();
    api_ = std::make_unique<FakeApiServer>(pki_, kToken);
    api_->Start();
    api_->Put("nodes", NodeJson(kNode, 8, "Tesla-V100-SXM2-32GB"));
    kubelet_ = std::make_unique<FakeKubelet>(dir_ + "/dp", dir_ + "/pr");
    kubelet_->Start();
    log_ = dir_ + "/agent.log";
  }
  void TearDown() override {
    kubelet_.reset();
    api_->Stop();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<Child> Run(std::vector<std::string> extra) {
    const std::string kubeconfig = dir_ + "/kubeconfig";
    std::ofstream(kubeconfig) << KubeconfigYaml(api_->port(), pki_.ca_pem, kToken);
    std::vector<std::string> args = {
        "node-agent", "--node", kNode, "--kubeconfig", kubeconfig, "--device-plugin-dir",
        dir_ + "/dp", "--pod-resources-socket", dir_ + "/pr/kubelet.sock", "--query-input",
        std::string(GPUSCHED_AGENT_TESTDATA) + "/dgx1_v100_query.csv", "--input",
        std::string(GPUSCHED_AGENT_TESTDATA) + "/dgx1_v100.txt", "--reconcile-interval", "200ms",
        "--inventory-interval", "200ms",
        // Not the default port: tests run side by side.
        "--metrics-address", "127.0.0.1", "--metrics-port", std::to_string(FreePort())};
    args.insert(args.end(), extra.begin(), extra.end());
    auto c = std::make_unique<Child>(GPUSCHED_BINARY, args, log_);
    EXPECT_TRUE(c->started());
    return c;
  }
  std::string Ids(const std::string& pod, const std::string& key) {
    auto p = api_->Get("pods", "t/" + pod);
    return p ? (*p)["metadata"]["annotations"].value(key, "") : "";
  }

  std::string dir_, log_;
  TestPki pki_;
  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<FakeKubelet> kubelet_;
};

TEST_F(NodeAgentCliTest, OnceRegistersCorrectsAndPublishes) {
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Uuid(i));
  kubelet_->SetBuiltinDevices("nvidia.com/gpu", ids);  // what another plugin allocated
  api_->Put("pods", PodJson("t", "a", 2, kNode, "4,5", "Running"));
  ContainerAsk ask;
  ask.resources["nvidia.com/gpu"] = 2;
  ASSERT_TRUE(kubelet_->Admit("t", "a", {ask}).ok());  // lowest free: 0,1
  auto c = Run({"--once", "--no-device-plugin"});
  EXPECT_EQ(c->Wait(), 0) << ReadAll(log_);
  EXPECT_EQ(Ids("a", "gpusched.io/gpu-ids"), "0,1");
  EXPECT_EQ(Ids("a", "gpusched.io/gpu-ids-confirmed"), "0,1");
  EXPECT_NE(ReadAll(log_).find("corrected t/a gpusched.io/gpu-ids 4,5 -> 0,1"), std::string::npos)
      << ReadAll(log_);
  auto node = api_->Get("nodes", kNode);
  ASSERT_TRUE(node.has_value());
  EXPECT_TRUE((*node)["metadata"]["annotations"].contains("gpusched.io/gpu-topology"));
  EXPECT_EQ(kubelet_->registrations("nvidia.com/gpu"), 0);  // --no-device-plugin

  // `gpusched queue --devices`: recorded and confirmed, an unconfirmed record
  // marked.
  api_->Put("pods", PodJson("t", "fresh", 1, kNode, "7"));
  const std::string out = dir_ + "/queue.out";
  Child q(GPUSCHED_BINARY, {"queue", "--devices", "-n", "t", "--kubeconfig", dir_ + "/kubeconfig"},
          out);
  ASSERT_EQ(q.Wait(), 0) << ReadAll(out);
  const std::string text = ReadAll(out);
  EXPECT_NE(text.find("RECORDED"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\ba +dgx1 +0,1 +0,1\n)"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\bfresh +dgx1 +7 +- \*\n)"))) << text;
}

TEST_F(NodeAgentCliTest, ServesRegistersAgainAfterAKubeletRestartAndStopsOnSigterm) {
  auto c = Run({});
  ASSERT_TRUE(WaitFor([&] { return kubelet_->registrations("nvidia.com/gpu") == 1; },
                      std::chrono::seconds(20)))
      << ReadAll(log_);
  ASSERT_TRUE(kubelet_->WaitForDevices("gpusched.io/gpu-shares",
                                       [](const auto& d) { return d.size() == 80; }));
  kubelet_->Restart();
  ASSERT_TRUE(WaitFor([&] { return kubelet_->registrations("nvidia.com/gpu") == 2; },
                      std::chrono::seconds(20)))
      << ReadAll(log_);
  // The re-registered plugin's device list reaches the kubelet through its
  // new ListAndWatch stream, after the registration itself.
  ASSERT_TRUE(
      kubelet_->WaitForDevices("nvidia.com/gpu", [](const auto& d) { return d.size() == 8; }));
  api_->Put("pods", PodJson("t", "b", 2, kNode, "6,7"));
  ContainerAsk ask;
  ask.resources["nvidia.com/gpu"] = 2;
  auto g = kubelet_->Admit("t", "b", {ask});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)[0].envs["NVIDIA_VISIBLE_DEVICES"], Uuid(6) + "," + Uuid(7));
  std::ifstream status(absl::StrCat("/proc/", c->pid(), "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS", 0) == 0) std::cout << "node-agent " << line << "\n";
  }
  c->Signal(SIGTERM);
  EXPECT_EQ(c->Wait(), 0);
}

TEST_F(NodeAgentCliTest, BadFlagsAreUsageErrors) {
  EXPECT_EQ(Run({"--shares-per-gpu", "x"})->Wait(), 2);
  EXPECT_EQ(Run({"--reconcile-interval", "1ms"})->Wait(), 2);
  auto c = std::make_unique<Child>(GPUSCHED_BINARY, std::vector<std::string>{"node-agent"}, log_);
  EXPECT_EQ(c->Wait(), 2);
  EXPECT_NE(ReadAll(log_).find("--node NAME is required"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::testing
