// config/scheduler-policy.json <-> SchedulerConfig. Every field is checked;
// an error names the field by its JSON path ("quotas.namespaces.team-a.limit:
// must be >= guaranteed (16)"); unknown fields are errors too, so a typo
// never silently falls back to a default. The schema is documented in the
// README ("Configuration"). Thread-safe (pure functions).
#ifndef GPUSCHED_CODEC_CONFIG_CODEC_H_
#define GPUSCHED_CODEC_CONFIG_CODEC_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpusched/core/config.h"

namespace gpusched::codec {

absl::StatusOr<SchedulerConfig> DecodeConfig(std::string_view json_text);
// Reads and decodes a file; errors name the file.
absl::StatusOr<SchedulerConfig> LoadConfigFile(const std::string& path);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_CONFIG_CODEC_H_
