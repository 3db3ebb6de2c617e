#include "scheduler/agent/pod_resources_client.h"

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "gpusched/util/strings.h"
#include "podresources/v1/api.grpc.pb.h"
#include "scheduler/agent/device_plugin.h"

namespace gpusched::agent {

absl::StatusOr<std::vector<KubeletPod>> ListPodResources(const std::string& socket,
                                                         std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel(StrCat("unix:", socket), grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  grpc::Status s = stub->List(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(StrCat("PodResources List on ", socket, ": ", s.error_message()));
  }
  std::vector<KubeletPod> out;
  out.reserve(resp.pod_resources_size());
  for (const v1::PodResources& p : resp.pod_resources()) {
    KubeletPod k;
    k.ns = p.namespace_();
    k.name = p.name();
    for (const v1::ContainerResources& c : p.containers()) {
      for (const v1::ContainerDevices& d : c.devices()) {
        std::vector<std::string>* into = nullptr;
        if (d.resource_name() == ResourceName(ResourceKind::kWholeGpu)) into = &k.gpu_ids;
        if (d.resource_name() == ResourceName(ResourceKind::kGpuShare)) into = &k.share_ids;
        if (into == nullptr) continue;
        into->insert(into->end(), d.device_ids().begin(), d.device_ids().end());
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace gpusched::agent
