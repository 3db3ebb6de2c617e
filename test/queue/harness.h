// Test harness for the queue manager: a ClusterState, an ExtenderService
// with the default framework, a QueueManager on a fake clock and a writer
// that applies evictions to the state. Not thread-safe.
#ifndef GPUSCHED_TEST_QUEUE_HARNESS_H_
#define GPUSCHED_TEST_QUEUE_HARNESS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/core/cluster_source.h"
#include "gpusched/core/extender_service.h"
#include "scheduler/queue/queue_manager.h"
#include "test/testing/builders.h"

namespace gpusched::queue::testing {

class StateWriter final : public ClusterWriter {
 public:
  explicit StateWriter(ClusterState** state) : state_(state) {}
  absl::Status Evict(const PodRequest& pod, const std::string& reason) override {
    (*state_)->RemovePod(pod.uid);
    (*state_)->Commit();
    evicted.push_back(pod.uid);
    reasons.push_back(reason);
    calls.push_back("evict " + pod.uid);
    return absl::OkStatus();
  }
  bool AwaitSent(std::chrono::milliseconds) override {
    calls.push_back("await");
    if (on_await) on_await();
    return true;
  }
  // Run by every AwaitSent when set (a test's stand-in for a slow wait).
  std::function<void()> on_await;
  std::vector<std::string> evicted;
  std::vector<std::string> reasons;  // per eviction, as `evicted`
  std::vector<std::string> calls;    // Evict and AwaitSent, in order

 private:
  ClusterState** state_;
};

struct Harness {
  Harness(std::vector<NodeSpec> nodes, std::vector<PodRequest> pods, QueueOptions options);
  // Rebuilds state (from the real pods only), service and queue: a restart.
  void Restart();

  // The cluster source shows `pod` (created or changed; a pod the state
  // holds as bound stays bound, as a stale watch event never undoes a bind).
  void Submit(const PodRequest& pod);
  // Submit(pod), then filter over every node; returns the passing node names.
  std::vector<std::string> Filter(const PodRequest& pod, std::string* reason = nullptr);
  // Filter only: the request may name a pod the source has not shown.
  std::vector<std::string> FilterOnly(const PodRequest& pod, std::string* reason = nullptr);
  std::string Bind(const PodRequest& pod, const std::string& node);
  ClusterState& state() { return *state_ptr; }

  std::vector<NodeSpec> nodes;
  QueueOptions options;
  int64_t now_ms = 1'000'000;
  std::unique_ptr<ClusterState> state_owner;
  ClusterState* state_ptr = nullptr;
  StateWriter writer{&state_ptr};
  std::unique_ptr<ExtenderService> service;
  std::unique_ptr<QueueManager> queue;
  // The queue's metrics (QueueDeps::metrics); takes effect at Restart().
  Metrics* metrics = nullptr;
  // Called between a gang placement found without the queue mutex and its
  // commit (QueueDeps::after_unlocked_placement), when set.
  std::function<void(const std::vector<std::pair<std::string, DeviceMask>>&)>
      after_unlocked_placement;
  // QueueDeps::reuse_failed_placements; takes effect at Restart().
  bool reuse_failed_placements = true;
  // The queue's log lines go to `log` while set (single-threaded tests
  // only), else to stderr.
  bool capture_log = false;
  std::vector<std::string> log;
};

// `n` HGX H100 nodes named h0, h1, ...
std::vector<NodeSpec> H100s(int n);

QuotaConfig Quotas(std::vector<std::pair<std::string, NamespaceQuota>> namespaces,
                   NamespaceQuota default_quota = {});
// A StrictFIFO quota entry: the queue tests' order rules are StrictFIFO's
// (the shipped default, BestEffortFIFO, is set where a test is about it).
NamespaceQuota Quota(int64_t guaranteed, int64_t limit, std::string cohort = "");

}  // namespace gpusched::queue::testing

#endif  // GPUSCHED_TEST_QUEUE_HARNESS_H_
