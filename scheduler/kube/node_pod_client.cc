#include "scheduler/kube/node_pod_client.h"

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/util/strings.h"

namespace gpusched::kube {

NodePodClient::NodePodClient(KubeHttpClient* client, std::string node, EventRecorder* events,
                             std::chrono::milliseconds timeout)
    : client_(client), node_(std::move(node)), events_(events), timeout_(timeout) {}

absl::StatusOr<std::vector<codec::NodePodRecord>> NodePodClient::ListPods() {
  const std::string path = StrCat("/api/v1/pods?fieldSelector=spec.nodeName%3D", node_);
  auto r = client_->Do("GET", path, "", "", timeout_);
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return absl::UnavailableError(StrCat("list pods on ", node_, ": HTTP ", r->status));
  }
  auto list = codec::DecodeNodePodList(r->body);
  if (!list.ok()) return list.status();
  for (const std::string& e : list->errors) {
    std::cerr << "gpusched node-agent: pod list: " << e << " (skipped)\n";
  }
  std::vector<codec::NodePodRecord> out;
  out.reserve(list->pods.size());
  for (auto& p : list->pods) {
    if (p.node_name == node_) out.push_back(std::move(p));
  }
  return out;
}

absl::Status NodePodClient::PatchAnnotations(const codec::NodePodRecord& pod,
                                             const agent::AnnotationEdits& edits) {
  auto r =
      client_->Do("PATCH", PodPath(pod.ns, pod.name), codec::EncodeAnnotationsPatch(pod.uid, edits),
                  "application/merge-patch+json", timeout_);
  if (!r.ok()) return r.status();
  if (r->status == 404 || r->status == 409) {
    return absl::NotFoundError(StrCat("pod ", pod.Key(), " is gone (HTTP ", r->status, ")"));
  }
  if (r->status != 200) {
    return absl::UnavailableError(StrCat("patch pod ", pod.Key(), ": HTTP ", r->status));
  }
  return absl::OkStatus();
}

void NodePodClient::RecordEvent(const codec::NodePodRecord& pod, const std::string& type,
                                const std::string& reason, const std::string& message) {
  if (events_ == nullptr) return;
  PodRequest p;
  p.ns = pod.ns;
  p.name = pod.name;
  p.uid = pod.uid;
  events_->Record(p, type, reason, message);
}

}  // namespace gpusched::kube
