// Helpers over simdjson's DOM for the decoders in scheduler/codec: typed
// field access that reports the JSON path of anything missing or mistyped.
// Private to scheduler/codec. Thread-compatible.
#ifndef GPUSCHED_CODEC_INTERNAL_DOM_H_
#define GPUSCHED_CODEC_INTERNAL_DOM_H_

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpusched/model/node.h"
#include "gpusched/model/pod.h"

namespace gpusched::codec {

using Element = simdjson::dom::element;
using Object = simdjson::dom::object;

absl::Status TypeError(std::string_view path, std::string_view want);

// Returns the member `key` of `obj`, or nullopt if absent or JSON null.
std::optional<Element> Member(const Object& obj, std::string_view key);

// Each returns nullopt for absent/null, an error naming `path` for a wrong type.
absl::StatusOr<std::optional<Object>> OptObject(const Object& obj, std::string_view key,
                                                std::string_view path);
absl::StatusOr<std::optional<std::string_view>> OptString(const Object& obj, std::string_view key,
                                                          std::string_view path);
absl::StatusOr<std::optional<int64_t>> OptInt(const Object& obj, std::string_view key,
                                              std::string_view path);
absl::StatusOr<std::optional<bool>> OptBool(const Object& obj, std::string_view key,
                                            std::string_view path);

// Decodes a v1.Pod object. `path` prefixes error messages ("ExtenderArgs.Pod").
absl::StatusOr<PodRequest> DecodePod(const Element& pod, std::string_view path);
// What a pod that DecodePod refused still holds, if it is bound and not
// finished: its identity, node, phase, priority, framework gang and
// requests (unreadable requests: 64 GPUs, a whole node), with no gpusched
// annotation read and its devices unknown (has_gpu_ids false), so the
// cluster state counts its GPUs used and never free. An error if the pod
// holds nothing (not bound, finished) or has no name.
absl::StatusOr<PodRequest> DecodeHeldPod(const Element& pod, std::string_view path);
// Decodes a v1.Node object.
absl::StatusOr<NodeSpec> DecodeNode(const Element& node, std::string_view path);

// The batch/v1 Job controlling a pod, from the pod object (see
// PodItem::job_name); malformed owner data means no Job, never an error.
void ControllingJob(const Object& pod, std::string* name, std::string* uid);

// Returns seconds since the epoch of an RFC 3339 timestamp.
absl::StatusOr<int64_t> ParseTimestamp(std::string_view text, std::string_view path);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_INTERNAL_DOM_H_
