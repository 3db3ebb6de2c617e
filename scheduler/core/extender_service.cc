#include "gpusched/core/extender_service.h"

#include "gpusched/policy/placement.h"
#include "gpusched/util/strings.h"

namespace gpusched {

ExtenderService::ExtenderService(ClusterState* state,
                                 std::shared_ptr<const policy::Framework> framework)
    : state_(state), framework_(std::move(framework)) {}

void ExtenderService::SetFramework(std::shared_ptr<const policy::Framework> framework) {
  absl::MutexLock l(&mu_);
  framework_ = std::move(framework);
}

std::shared_ptr<const policy::Framework> ExtenderService::framework() const {
  absl::MutexLock l(&mu_);
  return framework_;
}

void ExtenderService::SetGate(PodGate* gate) { gate_ = gate; }

FilterOutcome ExtenderService::Filter(const ExtenderArgs& args) const {
  FilterOutcome out;
  if (!ready_) {
    out.error = "gpusched: cluster state not synced yet";
    return out;
  }
  const PodRequest& pod = args.pod;
  const int32_t n = static_cast<int32_t>(args.node_names.size());
  if (pod.gpu.count == 0) {
    out.passed.reserve(n);
    for (int32_t i = 0; i < n; ++i) out.passed.push_back(i);
    return out;
  }
  if (!pod.HoldsGpus()) state_->NotePending(pod);
  auto snapshot = state_->Snapshot();
  if (PodGate* gate = gate_.load()) {
    std::string reason = gate->Admit(pod, *snapshot);
    if (!reason.empty()) {
      // Waiting for quota: freeing GPUs elsewhere does not help, but the
      // queue will admit the pod later; FailedNodes keeps kube-scheduler
      // retrying on cluster events.
      for (int32_t i = 0; i < n; ++i) out.failed.emplace_back(i, reason);
      return out;
    }
  }
  auto fw = framework();
  policy::PodContext ctx = fw->Prepare(pod, *snapshot);
  out.passed.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const NodeInfo* node = snapshot->Find(args.node_names[i]);
    if (node == nullptr) {
      out.unresolvable.emplace_back(i, "gpusched: node is not in gpusched's cluster view");
      continue;
    }
    policy::FilterResult r = fw->Filter(ctx, *node);
    switch (r.verdict) {
      case policy::Verdict::kFits:
        out.passed.push_back(i);
        break;
      case policy::Verdict::kUnschedulable:
        out.failed.emplace_back(i, std::move(r.reason));
        break;
      case policy::Verdict::kUnresolvable:
        out.unresolvable.emplace_back(i, std::move(r.reason));
        break;
    }
  }
  return out;
}

std::vector<int64_t> ExtenderService::Prioritize(const ExtenderArgs& args) const {
  std::vector<int64_t> scores(args.node_names.size(), 0);
  if (args.pod.gpu.count == 0) return scores;
  auto snapshot = state_->Snapshot();
  auto fw = framework();
  policy::PodContext ctx = fw->Prepare(args.pod, *snapshot);
  for (size_t i = 0; i < args.node_names.size(); ++i) {
    const NodeInfo* node = snapshot->Find(args.node_names[i]);
    if (node == nullptr || !fw->Filter(ctx, *node).fits()) continue;
    // 0..100 -> 0..10, rounded to nearest.
    scores[i] = (fw->Score(ctx, *node) + 5) / 10;
  }
  return scores;
}

std::string ExtenderService::Bind(const BindingArgs& args, DeviceMask* devices) {
  if (!ready_) return "gpusched: cluster state not synced yet";
  auto pod = state_->FindPodByName(args.pod_namespace, args.pod_name);
  if (!pod.has_value()) {
    return StrCat("gpusched: pod ", args.pod_namespace, "/", args.pod_name,
                  " is unknown (never filtered by gpusched)");
  }
  if (!args.pod_uid.empty() && pod->uid != args.pod_uid) {
    return StrCat("gpusched: pod ", args.pod_namespace, "/", args.pod_name, " has UID ", pod->uid,
                  ", bind asked for ", args.pod_uid);
  }
  if (pod->HoldsGpus()) {
    if (pod->node_name == args.node) return "";  // idempotent: already bound there
    return StrCat("gpusched: pod ", pod->Key(), " is already bound to ", pod->node_name);
  }
  auto snapshot = state_->Snapshot();
  const NodeInfo* node = snapshot->Find(args.node);
  if (node == nullptr) return StrCat("gpusched: node ", args.node, " is not in gpusched's cluster view");
  auto fw = framework();
  policy::PodContext ctx = fw->Prepare(*pod, *snapshot);
  policy::FilterResult fit = fw->Filter(ctx, *node);
  if (!fit.fits()) return StrCat(fit.reason, " (bind to ", args.node, ")");
  auto placement = policy::ChoosePlacement(pod->gpu, *node);
  if (!placement.has_value()) return StrCat("gpusched: no devices for ", pod->Key(), " on ", args.node);
  absl::Status s = state_->Assume(*pod, args.node, placement->devices);
  if (!s.ok()) return StrCat("gpusched: ", FromAbsl(s.message()));
  if (devices != nullptr) *devices = placement->devices;
  if (PodGate* gate = gate_.load()) gate->OnBound(*pod);
  return "";
}

}  // namespace gpusched
