// The runtime history as gpusched keeps it across restarts: a ConfigMap
// (v1) in gpusched's own namespace whose data holds
//   version: "1"
//   history: one line per workload, the most recently run first:
//     "<namespace> <workload> <gpus> <seconds>.<tag> <seconds>.<tag> ..."
//     (its last runs, oldest first; <tag> the run's pod uid as RunTag, 8
//     hex digits), e.g. "team-a train 8 5400.1f3a9c02 5520.0b77e413".
// EncodeHistoryConfigMap stops adding workloads at `max_bytes` of history
// text (the least recently run ones are left out), so the object stays
// well under the 1 MiB limit of a ConfigMap.
// DecodeHistoryConfigMap refuses anything else (another version, a line
// that does not read, a count out of range), naming the field and line:
// the caller ignores the whole object, never part of it.
// Thread-safe (pure functions).
#ifndef GPUSCHED_CODEC_HISTORY_CODEC_H_
#define GPUSCHED_CODEC_HISTORY_CODEC_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/queue/runtime_estimates.h"

namespace gpusched::codec {

inline constexpr char kHistoryFormatVersion[] = "1";

struct HistoryEncoding {
  std::string body;          // the ConfigMap, JSON
  size_t workloads = 0;      // workloads written
  size_t history_bytes = 0;  // size of data.history
};
// `resource_version` empty: for a create.
HistoryEncoding EncodeHistoryConfigMap(std::string_view ns, std::string_view name,
                                       std::string_view resource_version,
                                       const std::vector<queue::PersistedWorkload>& history,
                                       size_t max_bytes);

struct HistoryConfigMap {
  std::string resource_version;
  std::vector<queue::PersistedWorkload> history;
};
// A ConfigMap as read back (GET). The object itself not reading (not JSON,
// no metadata) is an error too.
absl::StatusOr<HistoryConfigMap> DecodeHistoryConfigMap(std::string_view body);
// Only its metadata.resourceVersion ("" if none can be read).
std::string ConfigMapResourceVersion(std::string_view body);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_HISTORY_CODEC_H_
