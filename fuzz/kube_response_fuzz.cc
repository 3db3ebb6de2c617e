// libFuzzer target: every decoder of what the Kubernetes API server (or a
// kubeconfig credential plugin) sends gpusched: list pages and watch lines of
// Nodes and Pods, Status bodies, a Pod's nodeName, Leases, ExecCredentials, and
// GPUQuota / ElasticQuota objects (lists, watch lines, single objects).
// A decoder must return a value or a Status, never crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "scheduler/codec/kube_codec.h"
#include "scheduler/codec/quota_object_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gpusched::codec::KubeDecoder decoder;
  const std::string input(reinterpret_cast<const char*>(data), size);
  for (auto kind : {gpusched::codec::ObjectKind::kNode, gpusched::codec::ObjectKind::kPod}) {
    std::string page = input;
    (void)decoder.DecodeListPage(page, kind);
    std::string line = input;
    (void)decoder.DecodeWatchEvent(line, kind);
  }
  (void)gpusched::codec::DecodeStatus(input);
  (void)gpusched::codec::DecodePodNodeName(input);
  (void)gpusched::codec::DecodeLease(input);
  (void)gpusched::codec::DecodeExecCredential(input, "client.authentication.k8s.io/v1");
  for (auto kind : {gpusched::queue::QuotaObjectKind::kGpuQuota,
                    gpusched::queue::QuotaObjectKind::kElasticQuota}) {
    (void)gpusched::codec::DecodeQuotaObjectList(kind, input);
    (void)gpusched::codec::DecodeQuotaObjectEvent(kind, input);
    (void)gpusched::codec::DecodeQuotaObject(kind, input);
  }
  return 0;
}
