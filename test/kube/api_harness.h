// The set-up the fake-API tests of scheduler/kube share: a started
// FakeApiServer (bookmarks every 200 ms) with a client for it, over one
// throw-away PKI per test binary; a KubeClusterSource with short watch
// timeouts, started and synced on a ClusterState; and a QueueManager with
// the default framework on that state. For tests only; not thread-safe.
#ifndef GPUSCHED_TEST_KUBE_API_HARNESS_H_
#define GPUSCHED_TEST_KUBE_API_HARNESS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "gpusched/core/cluster_state.h"
#include "gpusched/policy/framework.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/kube_source.h"
#include "scheduler/queue/queue_manager.h"
#include "test/kube/kube_test_util.h"

namespace gpusched::testing {

// The PKI of every fake API server of this test binary.
inline const TestPki& SharedPki() {
  static const TestPki pki = MakeTestPki();
  return pki;
}

// A fixture with a started fake API server `api_`, a client `client_` for
// it and a metrics registry; Base is ::testing::Test or a TestWithParam.
template <typename Base = ::testing::Test>
class FakeApiTestBase : public Base {
 protected:
  void SetUp() override {
    api_ = std::make_unique<FakeApiServer>(SharedPki(), kToken);
    api_->SetBookmarkIntervalMs(200);
    api_->Start();
    client_ = ClientFor(*api_, SharedPki());
  }

  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<kube::KubeHttpClient> client_;
  Metrics metrics_;
};
using FakeApiTest = FakeApiTestBase<>;

// A KubeClusterSource with 2 s watches and a 20 ms first backoff, not
// started (set its gang sizes or Jobs' deadlines first).
inline std::unique_ptr<kube::KubeClusterSource> NewSource(kube::KubeHttpClient* client,
                                                          Metrics* metrics) {
  kube::SourceOptions so;
  so.watch_timeout_seconds = 2;
  so.backoff_initial = std::chrono::milliseconds(20);
  return std::make_unique<kube::KubeClusterSource>(client, so, metrics);
}

// Starts `src` on `state` and waits (up to 10 s) until it has synced.
inline ::testing::AssertionResult StartSynced(kube::KubeClusterSource& src, ClusterState& state) {
  if (absl::Status s = src.Start(&state, nullptr); !s.ok()) {
    return ::testing::AssertionFailure() << "source start: " << s;
  }
  if (!WaitFor([&] { return src.synced(); })) {
    return ::testing::AssertionFailure() << "the source did not sync in 10 s";
  }
  return ::testing::AssertionSuccess();
}

inline std::shared_ptr<const policy::Framework> DefaultFramework() {
  auto fw = policy::Framework::Create(ScoringConfig{});
  EXPECT_TRUE(fw.ok()) << fw.status();
  return fw.ok() ? std::shared_ptr<const policy::Framework>(std::move(*fw)) : nullptr;
}

// What a test's queue differs in.
struct QueueSetup {
  queue::QueueOptions options;
  std::function<int64_t()> now_ms;  // the wall clock if empty
  ClusterWriter* writer = nullptr;  // evictions
  bool quiet = false;               // drop the queue's log lines
};

// A QueueManager on `state` deciding with `framework`.
inline std::unique_ptr<queue::QueueManager> NewQueue(
    ClusterState* state, std::shared_ptr<const policy::Framework> framework,
    QueueSetup setup = {}) {
  queue::QueueDeps deps;
  deps.state = state;
  deps.writer = setup.writer;
  deps.framework = [framework] { return framework; };
  deps.now_ms = std::move(setup.now_ms);
  if (setup.quiet) deps.log = [](const std::string&) {};
  return std::make_unique<queue::QueueManager>(std::move(deps), std::move(setup.options));
}

// Why pod `ns/name` of `state` may not start now: "" when admitted,
// "missing" when the state does not have it.
inline std::string AdmitReason(queue::QueueManager& queue, const ClusterState& state,
                               const policy::Framework& framework, const std::string& ns,
                               const std::string& name) {
  auto p = state.FindPodByName(ns, name);
  if (!p.has_value()) return "missing";
  return queue.Admit(*p, state.Snapshot(), framework).reason;
}

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_KUBE_API_HARNESS_H_
