// The quota entry of the policy file (quotas.namespaces.<ns>: guaranteed,
// limit, cohort, models, queueingStrategy), shared with the GPUQuota object's spec, which has
// the same fields. Private to scheduler/codec (config_codec.cc defines it,
// quota_object_codec.cc calls it).
#ifndef GPUSCHED_CODEC_INTERNAL_QUOTA_FIELDS_H_
#define GPUSCHED_CODEC_INTERNAL_QUOTA_FIELDS_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/status/status.h"
#include "gpusched/core/config.h"

namespace gpusched::codec {

// Decodes `j` into `q`; an error names the field under `path`
// ("spec.limit: must be >= guaranteed (8), got 4").
absl::Status DecodeNamespaceQuotaJson(const nlohmann::json& j, std::string_view path,
                                      NamespaceQuota& q);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_INTERNAL_QUOTA_FIELDS_H_
