// Helpers for the kube tests: a client for a FakeApiServer, waiting, and a
// canonical fingerprint of a ClusterState (for "equals a cold start").
// Not thread-safe.
#ifndef GPUSCHED_TEST_KUBE_KUBE_TEST_UTIL_H_
#define GPUSCHED_TEST_KUBE_KUBE_TEST_UTIL_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "gpusched/core/cluster_state.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/kube_config.h"
#include "test/kube/fake_apiserver.h"
#include "test/testing/child_process.h"

namespace gpusched::testing {

inline constexpr char kToken[] = "test-token-0123456789";

inline std::unique_ptr<kube::KubeHttpClient> ClientFor(const FakeApiServer& api,
                                                       const TestPki& pki) {
  kube::KubeConfig cfg;
  cfg.host = "127.0.0.1";
  cfg.port = std::to_string(api.port());
  cfg.ca_pem = pki.ca_pem;
  cfg.token = kToken;
  kube::ClientOptions o;
  o.qps = 0;  // unlimited in tests
  o.timeout = std::chrono::milliseconds(3000);
  return *kube::KubeHttpClient::Create(cfg, o);
}

// Pods (uid, node, ids, phase) and per-node device usage, sorted.
inline std::string Fingerprint(const ClusterState& state) {
  std::vector<std::string> lines;
  for (const PodRequest& p : state.Pods()) {
    std::ostringstream os;
    os << "pod " << p.uid << " node=" << p.node_name << " ids=" << (p.has_gpu_ids ? p.gpu_ids : 0)
       << " phase=" << static_cast<int>(p.phase) << " gpus=" << p.gpu.count;
    lines.push_back(os.str());
  }
  for (const auto& n : state.Snapshot()->nodes()) {
    std::ostringstream os;
    os << "node " << n->name << " used=";
    for (auto u : n->used_milli) os << u << ",";
    os << " conflicts=" << n->device_conflicts;
    lines.push_back(os.str());
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_KUBE_KUBE_TEST_UTIL_H_
