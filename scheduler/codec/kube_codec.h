// The Kubernetes API codec: the JSON bodies gpusched reads from and writes to
// the API server (scheduler/kube), kept here because scheduler/codec is the
// only directory that touches JSON.
//
//  - reading: list pages (items, metadata.resourceVersion/continue), watch
//    event lines {"type":..., "object":...}, metav1.Status bodies, Leases,
//    and a Pod's spec.nodeName;
//  - writing: the pod gpu-ids merge patch, Binding, policy/v1 Eviction,
//    core/v1 Event and coordination.k8s.io/v1 Lease bodies.
//
// KubeDecoder owns a reusable parser: one per thread, not thread-safe. The
// free Encode*/Decode* functions are pure and thread-safe.
#ifndef GPUSCHED_CODEC_KUBE_CODEC_H_
#define GPUSCHED_CODEC_KUBE_CODEC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"

namespace gpusched::codec {

enum class ObjectKind { kNode, kPod };

// A metav1.Status (error bodies, watch ERROR objects). code 0 = not a Status.
struct KubeStatus {
  int code = 0;
  std::string reason;
  std::string message;
};

// A decoded Pod plus what the model drops: the raw gpu-ids annotation, so a
// value that does not decode can be reported.
struct PodItem {
  PodRequest pod;
  std::optional<std::string> raw_gpu_ids;
  // Set when the Pod did not decode but is bound and not finished: `pod` is
  // what it still holds (its requests, devices unknown; never counted
  // free), and this is why it did not decode, naming the field.
  std::string decode_error;
  // The batch/v1 Job that controls the pod (its ownerReferences entry with
  // kind Job, apiVersion batch/v1 and controller true, else its
  // batch.kubernetes.io/job-name label, which carries no uid); "": none.
  std::string job_name, job_uid;
};

struct ListPage {
  std::string resource_version;
  std::string continue_token;
  std::vector<NodeSpec> nodes;
  std::vector<PodItem> pods;
  // Items that could not be decoded and hold nothing (or cannot be
  // identified): "namespace/name: why".
  std::vector<std::string> bad_items;
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kError;
  std::string resource_version;  // the object's (bookmarks carry only this)
  std::string ns, name, uid;     // identity, also when the object did not decode
  std::optional<NodeSpec> node;
  std::optional<PodItem> pod;  // also a held pod that did not decode (decode_error)
  std::string decode_error;    // set if the object is there, not decodable, holds nothing
  KubeStatus status;           // for kError
};

class KubeDecoder {
 public:
  KubeDecoder();
  ~KubeDecoder();
  KubeDecoder(const KubeDecoder&) = delete;
  KubeDecoder& operator=(const KubeDecoder&) = delete;

  // A NodeList or PodList page. Bad items are listed, not fatal.
  absl::StatusOr<ListPage> DecodeListPage(std::string& body, ObjectKind kind);
  // The same, calling `on_metadata` with the page's resourceVersion and
  // continue token (no items yet) once they are read and the page is known
  // to be well-formed, before its items are decoded: a lister starts the
  // next page's request there.
  absl::StatusOr<ListPage> DecodeListPage(std::string& body, ObjectKind kind,
                                          absl::FunctionRef<void(const ListPage&)> on_metadata);
  // One line of a watch stream.
  absl::StatusOr<WatchEvent> DecodeWatchEvent(std::string& line, ObjectKind kind);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Returns the Status in `body`, or code 0 if it is not one.
KubeStatus DecodeStatus(std::string_view body);

// The type of a watch event ("ADDED", "MODIFIED", "DELETED", "BOOKMARK",
// "ERROR"); an error naming `what` (the event's kind) for any other.
absl::StatusOr<WatchEvent::Type> WatchEventType(std::string_view type, std::string_view what);
// Returns spec.nodeName of a Pod body ("" if unset).
absl::StatusOr<std::string> DecodePodNodeName(std::string_view body);

// coordination.k8s.io/v1 Lease spec plus metadata.resourceVersion.
struct LeaseRecord {
  std::string holder;
  int64_t duration_seconds = 0;
  std::string acquire_time;  // RFC 3339 MicroTime as sent
  std::string renew_time;
  int64_t transitions = 0;
  std::string resource_version;
};
absl::StatusOr<LeaseRecord> DecodeLease(std::string_view body);
std::string EncodeLease(std::string_view ns, std::string_view name, const LeaseRecord& lease);

// {"metadata":{"annotations":{"gpusched.io/gpu-ids":"0,3"}}}
std::string EncodeGpuIdsPatch(DeviceMask devices);
// "0,3"
std::string FormatGpuIds(DeviceMask devices);
// {"metadata":{"annotations":{key:value}}}
std::string EncodeAnnotationPatch(std::string_view key, std::string_view value);
// The gpusched.io/gpu-topology annotation value: the compact JSON matrix of
// nvidia-smi codes, e.g. [["X","NV12"],["NV12","X"]].
std::string EncodeTopologyAnnotation(const std::vector<std::vector<std::string>>& matrix);
std::string EncodeBinding(std::string_view ns, std::string_view name, std::string_view uid,
                          std::string_view node);
std::string EncodeEviction(std::string_view ns, std::string_view name, std::string_view uid);

struct EventFields {
  std::string ns, pod_name, pod_uid;
  std::string name;  // unique event name
  std::string type;  // "Normal" | "Warning"
  std::string reason;
  std::string message;
  std::string timestamp;  // RFC 3339
  std::string instance;   // reporting instance (pod name)
};
std::string EncodeEvent(const EventFields& e);

// client.authentication.k8s.io ExecCredential, the protocol of kubeconfig
// credential plugins (users[].user.exec). The plugin reads the
// KUBERNETES_EXEC_INFO environment variable and prints a credential.
struct ExecClusterInfo {
  std::string server;  // https://host:port
  std::string ca_pem;  // sent base64-encoded as certificate-authority-data
  bool insecure_skip_verify = false;
};
// The KUBERNETES_EXEC_INFO value: spec.interactive false, and spec.cluster
// when `cluster` is not null (the kubeconfig's provideClusterInfo).
std::string EncodeExecInfo(std::string_view api_version, const ExecClusterInfo* cluster);

struct ExecCredentialStatus {
  std::string token;
  int64_t expiration_unix = 0;  // status.expirationTimestamp; 0 = does not expire
};
// A plugin's output: kind ExecCredential of `api_version` with status.token.
// Errors name the field; a credential that carries only a client
// certificate is refused (gpusched authenticates with tokens from plugins).
absl::StatusOr<ExecCredentialStatus> DecodeExecCredential(std::string_view body,
                                                          std::string_view api_version);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_KUBE_CODEC_H_
