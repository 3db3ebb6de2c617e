// `gpusched topology-agent` against the fake API server (TLS on loopback,
// bearer token from a kubeconfig): it merge-patches the node's
// gpusched.io/gpu-topology annotation with the matrix parsed from
// `nvidia-smi topo -m` output (--input), reports API errors, and retries a
// failed round (5xx) without waiting for the full interval.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "test/kube/fake_apiserver.h"
#include "test/kube/kube_test_util.h"
#include "test/testing/child_process.h"

namespace gpusched::testing {
namespace {

constexpr char kNode[] = "t4-node";
constexpr char kTopologyKey[] = "gpusched.io/gpu-topology";
// pcie_4x_t4.txt: two PCIe switches (GPU0+1, GPU2+3) on two NUMA nodes.
constexpr char kT4Matrix[] =
    R"([["X","PIX","SYS","SYS"],["PIX","X","SYS","SYS"],["SYS","SYS","X","PIX"],)"
    R"(["SYS","SYS","PIX","X"]])";

class TopologyAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = MakeTestPki();
    api_ = std::make_unique<FakeApiServer>(pki_, kToken);
    api_->Start();
    api_->Put("nodes", NodeJson(kNode, 4, "Tesla-T4"));
    api_->Put("nodes", NodeJson("other-node", 8));
    log_ = WriteTempFile("agent.log", "");
  }
  void TearDown() override { api_->Stop(); }

  std::unique_ptr<Child> RunAgent(const std::string& token, std::vector<std::string> extra) {
    const std::string kubeconfig = WriteTempFile("agent_kubeconfig_" + token,
                                                 KubeconfigYaml(api_->port(), pki_.ca_pem, token));
    std::vector<std::string> args = {"topology-agent",
                                     "--node",
                                     kNode,
                                     "--kubeconfig",
                                     kubeconfig,
                                     "--input",
                                     std::string(GPUSCHED_AGENT_TESTDATA) + "/pcie_4x_t4.txt"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto c = std::make_unique<Child>(GPUSCHED_BINARY, args, log_);
    EXPECT_TRUE(c->started());
    return c;
  }
  // The node's topology annotation ("" if absent).
  std::string Annotation(const std::string& node) const {
    auto n = api_->Get("nodes", node);
    if (!n.has_value() || !(*n)["metadata"].contains("annotations")) return "";
    return (*n)["metadata"]["annotations"].value(kTopologyKey, "");
  }

  TestPki pki_;
  std::unique_ptr<FakeApiServer> api_;
  std::string log_;
};

TEST_F(TopologyAgentTest, PatchesTheNodeAnnotationWithTheParsedMatrix) {
  const int patches = api_->requests(std::string("PATCH /api/v1/nodes/") + kNode);
  auto agent = RunAgent(kToken, {"--once"});
  EXPECT_EQ(agent->Wait(), 0) << ReadAll(log_);
  EXPECT_EQ(Annotation(kNode), kT4Matrix);
  EXPECT_EQ(api_->requests(std::string("PATCH /api/v1/nodes/") + kNode), patches + 1);
  // A merge patch: the node's labels are kept; no other node is touched.
  auto node = api_->Get("nodes", kNode);
  EXPECT_EQ((*node)["metadata"]["labels"].value("nvidia.com/gpu.product", ""), "Tesla-T4");
  EXPECT_EQ(Annotation("other-node"), "");
  EXPECT_NE(ReadAll(log_).find("4 GPUs published"), std::string::npos) << ReadAll(log_);
}

TEST_F(TopologyAgentTest, WrongTokenIsReportedAndNothingIsWritten) {
  auto agent = RunAgent("not-the-token", {"--once"});
  EXPECT_EQ(agent->Wait(), 1) << ReadAll(log_);
  EXPECT_EQ(Annotation(kNode), "");
  EXPECT_NE(ReadAll(log_).find("HTTP 401"), std::string::npos) << ReadAll(log_);
}

TEST_F(TopologyAgentTest, ServerErrorIsReportedOnce) {
  api_->FailNext(1, 503, std::string("/api/v1/nodes/") + kNode);
  auto agent = RunAgent(kToken, {"--once"});
  EXPECT_EQ(agent->Wait(), 1) << ReadAll(log_);
  EXPECT_EQ(Annotation(kNode), "");
  EXPECT_NE(ReadAll(log_).find("HTTP 503"), std::string::npos) << ReadAll(log_);
}

TEST_F(TopologyAgentTest, ServerErrorsAreRetriedUntilPublished) {
  // Two failed rounds, each reported; the agent keeps going and publishes
  // once the API server recovers.
  const std::string path = std::string("/api/v1/nodes/") + kNode;
  api_->FailNext(2, 503, path);
  auto agent = RunAgent(kToken, {"--interval", "1s"});
  ASSERT_TRUE(
      WaitFor([&] { return Annotation(kNode) == kT4Matrix; }, std::chrono::milliseconds(20000)))
      << ReadAll(log_);
  EXPECT_TRUE(agent->Alive());
  EXPECT_GE(api_->requests("PATCH " + path), 3);
  // The agent logs after the API server has answered: wait for the line.
  EXPECT_TRUE(WaitFor([&] { return ReadAll(log_).find("4 GPUs published") != std::string::npos; },
                      std::chrono::milliseconds(20000)))
      << ReadAll(log_);
  EXPECT_NE(ReadAll(log_).find("HTTP 503"), std::string::npos) << ReadAll(log_);
  agent->Kill(SIGTERM);
  EXPECT_EQ(agent->Wait(), 0) << ReadAll(log_);
}

}  // namespace
}  // namespace gpusched::testing
