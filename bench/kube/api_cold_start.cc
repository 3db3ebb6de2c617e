// Cold start of the served binary from the Kubernetes API: `gpusched serve
// --kubeconfig` (with its own allocator, in its own process) against the
// fake API server running in this process, holding N nodes of 8 GPUs with 7
// running 1-GPU pods each (their gpu-ids annotated) and P pending pods over
// 500 namespaces. Each run starts a fresh server and times process start to
// /readyz 200 (the list of every node and pod installed), then reads the
// server's peak RSS. The fake server shares this machine's cores with
// gpusched (a real API server runs elsewhere), so the figure is pessimistic.
//
// Usage: api_cold_start GPUSCHED_BINARY [--nodes N] [--pending P] [--runs R]
// (defaults: 20,000 nodes, 60,000 pending: 200,000 pods; 3 runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "test/kube/fake_apiserver.h"
#include "test/kube/kube_test_util.h"
#include "test/testing/child_process.h"

namespace gpusched::testing {
namespace {

struct Options {
  std::string binary;
  int nodes = 20'000;
  int pending = 60'000;
  int runs = 3;
};

constexpr int kRunningPerNode = 7;

bool ParseOptions(int argc, char** argv, Options* o) {
  if (argc < 2) return false;
  o->binary = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (value <= 0) return false;
    if (flag == "--nodes") {
      o->nodes = value;
    } else if (flag == "--pending") {
      o->pending = value;
    } else if (flag == "--runs") {
      o->runs = value;
    } else {
      return false;
    }
  }
  return (argc % 2) == 0;
}

// VmHWM of a live process, in MiB (0 if unreadable).
double PeakRssMib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

int Run(const Options& o) {
  const TestPki pki = MakeTestPki();
  FakeApiServer api(pki, kToken);
  api.Start();
  std::printf("populating the fake API server: %d nodes, %d pods...\n", o.nodes,
              o.nodes * kRunningPerNode + o.pending);
  PutProductionCluster(api, o.nodes, kRunningPerNode, o.pending);
  const std::string kubeconfig =
      WriteTempFile("cold_start_kubeconfig", KubeconfigYaml(api.port(), pki.ca_pem, kToken));
  const std::string log = WriteTempFile("cold_start_gpusched.log", "");
  const std::string config = std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json";
  std::vector<double> seconds;
  for (int r = 0; r < o.runs; ++r) {
    const uint16_t port = FreePort();
    const auto start = std::chrono::steady_clock::now();
    Child server(o.binary,
                 {"serve", "--kubeconfig", kubeconfig, "--config", config, "--listen",
                  "127.0.0.1:" + std::to_string(port)},
                 log);
    const bool ready =
        WaitFor([&] { return !server.Alive() || Http(port, "GET", "/readyz").status == 200; },
                std::chrono::seconds(300));
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!ready || !server.Alive()) {
      std::fprintf(stderr, "gpusched did not become ready; log:\n%s\n", ReadAll(log).c_str());
      return 1;
    }
    std::printf("run %d: ready in %.2f s, peak RSS %.0f MiB\n", r + 1, s, PeakRssMib(server.pid()));
    seconds.push_back(s);
    server.Kill(SIGTERM);
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("api cold start (process start to /readyz): min %.2f s, median %.2f s, max %.2f s\n",
              seconds.front(), seconds[seconds.size() / 2], seconds.back());
  api.Stop();
  return 0;
}

}  // namespace
}  // namespace gpusched::testing

int main(int argc, char** argv) {
  gpusched::testing::Options o;
  if (!gpusched::testing::ParseOptions(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s GPUSCHED_BINARY [--nodes N] [--pending P] [--runs R]\n"
                 "  defaults: --nodes 20000 --pending 60000 --runs 3\n",
                 argv[0]);
    return 2;
  }
  return gpusched::testing::Run(o);
}
