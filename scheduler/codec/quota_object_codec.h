// Quota objects on the wire: GPUQuota (gpusched.io/v1alpha1) and
// ElasticQuota (scheduling.x-k8s.io/v1alpha1) lists and watch events into
// queue::QuotaObject, the status patch the leader writes on a GPUQuota, and
// `gpusched quota export` (a policy file's quotas as GPUQuota manifests).
//
// A spec that does not validate is not a decode error: the object decodes
// with `spec` unset and `error` naming the field, so its status can say so.
// So does an object with a key repeated anywhere in it ("spec.guaranteed:
// duplicate key ..."): which value was meant is unknown, so none is used.
// Only a body that is not an object list / watch event at all fails, or one
// whose own keys repeat ("items", "type", "object").
// Thread-safe (pure functions).
#ifndef GPUSCHED_CODEC_QUOTA_OBJECT_CODEC_H_
#define GPUSCHED_CODEC_QUOTA_OBJECT_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/queue/quota_objects.h"

namespace gpusched::codec {

// Where each kind is served.
struct QuotaObjectApi {
  std::string_view group, version, plural, kind;
};
const QuotaObjectApi& QuotaObjectApiOf(queue::QuotaObjectKind kind);

struct QuotaObjectPage {
  std::string resource_version;
  std::string continue_token;
  std::vector<queue::QuotaObject> items;
};
absl::StatusOr<QuotaObjectPage> DecodeQuotaObjectList(queue::QuotaObjectKind kind,
                                                      std::string_view body);

struct QuotaObjectEvent {
  WatchEvent::Type type = WatchEvent::Type::kError;
  std::string resource_version;
  queue::QuotaObject object;  // for added, modified, deleted
  KubeStatus status;          // for kError
};
absl::StatusOr<QuotaObjectEvent> DecodeQuotaObjectEvent(queue::QuotaObjectKind kind,
                                                        std::string_view line);

// One object (tests, and `spec` validation of a manifest).
absl::StatusOr<queue::QuotaObject> DecodeQuotaObject(queue::QuotaObjectKind kind,
                                                     std::string_view body);

// The merge patch for .../gpuquotas/<name>/status. `since[i]` is the
// lastTransitionTime (RFC 3339) of status.conditions[i].
std::string EncodeQuotaObjectStatusPatch(const queue::QuotaObjectStatus& status,
                                         const std::vector<std::string>& since);

// The GPUQuota manifests (YAML, one document per namespace, named
// `object_name`) equivalent to `quotas.namespaces`.
std::string EncodeQuotaExport(const QuotaConfig& quotas, std::string_view object_name);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_QUOTA_OBJECT_CODEC_H_
