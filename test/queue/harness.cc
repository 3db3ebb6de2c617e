#include "test/queue/harness.h"

#include <iostream>

namespace gpusched::queue::testing {

std::vector<NodeSpec> H100s(int n) {
  std::vector<NodeSpec> out;
  for (int i = 0; i < n; ++i) out.push_back(gpusched::testing::Hgx8H100("h" + std::to_string(i)));
  return out;
}

QuotaConfig Quotas(std::vector<std::pair<std::string, NamespaceQuota>> namespaces,
                   NamespaceQuota default_quota) {
  QuotaConfig q;
  q.enabled = true;
  q.default_quota = std::move(default_quota);
  for (auto& [ns, quota] : namespaces) q.namespaces[ns] = std::move(quota);
  return q;
}

NamespaceQuota Quota(int64_t guaranteed, int64_t limit, std::string cohort) {
  NamespaceQuota q;
  q.gpus = {guaranteed, limit};
  q.queueing = QueueingStrategy::kStrictFifo;
  q.cohort = std::move(cohort);
  return q;
}

Harness::Harness(std::vector<NodeSpec> n, std::vector<PodRequest> pods, QueueOptions o)
    : nodes(std::move(n)), options(std::move(o)) {
  state_owner = gpusched::testing::MakeState(nodes, std::move(pods));
  state_ptr = state_owner.get();
  Restart();
}

void Harness::Restart() {
  std::vector<PodRequest> real;
  for (PodRequest& p : state_ptr->Pods()) {
    if (!p.reservation) real.push_back(std::move(p));
  }
  auto fresh = gpusched::testing::MakeState(nodes, std::move(real));
  queue.reset();
  service.reset();
  state_owner = std::move(fresh);
  state_ptr = state_owner.get();
  auto fw = policy::Framework::Create(ScoringConfig{});
  service = std::make_unique<ExtenderService>(
      state_ptr, std::shared_ptr<const policy::Framework>(std::move(*fw)));
  service->SetReady(true);
  QueueDeps deps;
  deps.state = state_ptr;
  deps.writer = &writer;
  deps.framework = [svc = service.get()] { return svc->framework(); };
  deps.now_ms = [this] { return now_ms; };
  deps.log = [this](const std::string& line) {
    if (capture_log) {
      log.push_back(line);
    } else {
      std::cerr << line << "\n";
    }
  };
  deps.metrics = metrics;
  deps.after_unlocked_placement = [this](const auto& picks) {
    if (after_unlocked_placement) after_unlocked_placement(picks);
  };
  deps.reuse_failed_placements = reuse_failed_placements;
  queue = std::make_unique<QueueManager>(std::move(deps), options);
  queue->Resync();
  service->SetGate(queue.get());
}

void Harness::Submit(const PodRequest& pod) {
  auto known = state_ptr->FindPod(pod.uid);
  if (known.has_value() && known->HoldsGpus()) return;  // the watch never undoes a bind
  state_ptr->UpsertPod(pod);
  state_ptr->Commit();
}

std::vector<std::string> Harness::Filter(const PodRequest& pod, std::string* reason) {
  Submit(pod);
  return FilterOnly(pod, reason);
}

std::vector<std::string> Harness::FilterOnly(const PodRequest& pod, std::string* reason) {
  ExtenderArgs args;
  args.pod = pod;
  for (const NodeSpec& n : nodes) args.node_names.push_back(n.name);
  FilterOutcome out = service->Filter(args);
  std::vector<std::string> passed;
  for (int32_t i : out.passed) passed.push_back(nodes[i].name);
  if (reason != nullptr) {
    *reason = !out.error.empty()          ? out.error
              : !out.failed.empty()       ? out.reason(out.failed.front())
              : !out.unresolvable.empty() ? out.reason(out.unresolvable.front())
                                          : "";
  }
  return passed;
}

std::string Harness::Bind(const PodRequest& pod, const std::string& node) {
  return service->Bind(BindingArgs{pod.name, pod.ns, pod.uid, node});
}

}  // namespace gpusched::queue::testing
