// The built `gpusched node-agent`'s /metrics, scraped over loopback while it
// serves a fake kubelet and the fake API server: Allocate answers by outcome,
// reconciliation corrections and confirmations, the last round's duration, a
// re-registration after a kubelet restart, each device's health; and the
// agent still stops on SIGTERM with the listener running.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "test/agent/fake_kubelet.h"
#include "test/kube/kube_test_util.h"

namespace gpusched::testing {
namespace {

constexpr char kNode[] = "dgx1";
constexpr char kGpu[] = "nvidia.com/gpu";

std::string Uuid(int i) { return absl::StrCat("GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d4000", i); }

// The value of the sample `series` (name and labels as rendered) in a
// Prometheus text page, or nullopt when absent.
std::optional<double> Sample(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nullopt;
}

class NodeAgentMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gsm-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    pki_ = MakeTestPki();
    api_ = std::make_unique<FakeApiServer>(pki_, kToken);
    api_->Start();
    api_->Put("nodes", NodeJson(kNode, 8, "Tesla-V100-SXM2-32GB"));
    kubelet_ = std::make_unique<FakeKubelet>(dir_ + "/dp", dir_ + "/pr");
    kubelet_->Start();
    query_ = dir_ + "/query.csv";
    std::filesystem::copy_file(std::string(GPUSCHED_AGENT_TESTDATA) + "/dgx1_v100_query.csv",
                               query_);
    log_ = dir_ + "/agent.log";
    const std::string kubeconfig = dir_ + "/kubeconfig";
    std::ofstream(kubeconfig) << KubeconfigYaml(api_->port(), pki_.ca_pem, kToken);
    port_ = FreePort();
    agent_ = std::make_unique<Child>(
        GPUSCHED_BINARY,
        std::vector<std::string>{"node-agent",
                                 "--node",
                                 kNode,
                                 "--kubeconfig",
                                 kubeconfig,
                                 "--device-plugin-dir",
                                 dir_ + "/dp",
                                 "--pod-resources-socket",
                                 dir_ + "/pr/kubelet.sock",
                                 "--query-input",
                                 query_,
                                 "--input",
                                 std::string(GPUSCHED_AGENT_TESTDATA) + "/dgx1_v100.txt",
                                 "--reconcile-interval",
                                 "200ms",
                                 "--inventory-interval",
                                 "200ms",
                                 "--metrics-address",
                                 "127.0.0.1",
                                 "--metrics-port",
                                 std::to_string(port_)},
        log_);
    ASSERT_TRUE(agent_->started());
  }
  void TearDown() override {
    agent_.reset();
    kubelet_.reset();
    api_->Stop();
    std::filesystem::remove_all(dir_);
  }

  std::string Scrape() {
    HttpResult r = Http(port_, "GET", "/metrics");
    EXPECT_EQ(r.status, 200) << ReadAll(log_);
    return r.body;
  }
  // Waits until the series reads `want` (absent counts as 0).
  bool WaitForSample(const std::string& series, double want) {
    return WaitFor([&] { return Sample(Scrape(), series).value_or(0) == want; },
                   std::chrono::seconds(20));
  }
  bool Admit(const std::string& name, int gpus) {
    ContainerAsk ask;
    ask.resources[kGpu] = gpus;
    auto g = kubelet_->Admit("t", name, {ask});
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok();
  }

  std::string dir_, log_, query_;
  uint16_t port_ = 0;
  TestPki pki_;
  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Child> agent_;
};

TEST_F(NodeAgentMetricsTest, CountersMoveWithAllocationsReconciliationAndRestarts) {
  ASSERT_TRUE(WaitFor([&] { return kubelet_->registrations(kGpu) == 1; }, std::chrono::seconds(20)))
      << ReadAll(log_);
  ASSERT_TRUE(kubelet_->WaitForDevices(kGpu, [](const auto& d) { return d.size() == 8; }));
  ASSERT_TRUE(WaitFor([&] { return Http(port_, "GET", "/healthz").status == 200; }));
  std::string page = Scrape();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(Sample(page, absl::StrCat("gpusched_agent_device_healthy{device=\"", i, "\",uuid=\"",
                                        Uuid(i), "\"}")),
              1)
        << page;
  }
  const std::string recorded =
      R"(gpusched_agent_allocations_total{resource="nvidia.com/gpu",outcome="recorded"})";
  const std::string fallback =
      R"(gpusched_agent_allocations_total{resource="nvidia.com/gpu",outcome="fallback"})";
  EXPECT_FALSE(Sample(page, recorded).has_value());

  // One pod as gpusched recorded it, one with no record (another scheduler's).
  api_->Put("pods", PodJson("t", "a", 2, kNode, "6,7"));
  ASSERT_TRUE(Admit("a", 2));
  api_->Put("pods", PodJson("t", "b", 1, kNode, ""));
  ASSERT_TRUE(Admit("b", 1));
  page = Scrape();
  EXPECT_EQ(Sample(page, recorded), 1) << page;
  EXPECT_EQ(Sample(page, fallback), 1) << page;

  // The next rounds confirm a's record and write b's.
  EXPECT_TRUE(WaitForSample("gpusched_agent_record_confirmations_total", 1)) << Scrape();
  EXPECT_TRUE(WaitForSample("gpusched_agent_record_corrections_total", 1)) << Scrape();
  page = Scrape();
  EXPECT_GE(Sample(page, "gpusched_agent_reconciles_total").value_or(0), 1) << page;
  const auto duration = Sample(page, "gpusched_agent_reconcile_last_duration_seconds");
  ASSERT_TRUE(duration.has_value()) << page;
  EXPECT_GE(*duration, 0);
  const auto age = Sample(page, "gpusched_agent_reconcile_last_success_age_seconds");
  ASSERT_TRUE(age.has_value()) << page;
  EXPECT_GE(*age, 0);

  kubelet_->Restart();
  EXPECT_TRUE(WaitForSample(
      R"(gpusched_agent_reregistrations_total{resource="nvidia.com/gpu",reason="kubelet_restarted"})",
      1))
      << Scrape();

  std::filesystem::copy_file(std::string(GPUSCHED_AGENT_TESTDATA) + "/dgx1_v100_query_lost.csv",
                             query_, std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(WaitForSample(
      absl::StrCat("gpusched_agent_device_healthy{device=\"3\",uuid=\"", Uuid(3), "\"}"), 0))
      << Scrape();

  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << ReadAll(log_);
}

TEST_F(NodeAgentMetricsTest, AMetricsPortInUseIsAClearError) {
  // The first agent holds the port; a second one on it says so and exits.
  ASSERT_TRUE(WaitFor([&] { return Http(port_, "GET", "/healthz").status == 200; },
                      std::chrono::seconds(20)))
      << ReadAll(log_);
  const std::string log2 = dir_ + "/second.log";
  Child second(
      GPUSCHED_BINARY,
      {"node-agent", "--node", kNode, "--kubeconfig", dir_ + "/kubeconfig", "--device-plugin-dir",
       dir_ + "/dp2", "--pod-resources-socket", dir_ + "/pr/kubelet.sock", "--query-input", query_,
       "--metrics-address", "127.0.0.1", "--metrics-port", std::to_string(port_)},
      log2);
  EXPECT_EQ(second.Wait(), 2);
  EXPECT_NE(ReadAll(log2).find("metrics: listen on 127.0.0.1:"), std::string::npos)
      << ReadAll(log2);
}

}  // namespace
}  // namespace gpusched::testing
