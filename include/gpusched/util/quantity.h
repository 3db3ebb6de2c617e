// Kubernetes resource quantities ("4", "500m", "16Gi", "1.5e3") parsed into
// integers. Every resource in gpusched is an integer: milli-units for CPU and
// GPU shares, MiB for memory. Parsing never throws and never uses floating
// point, so "0.1" is exactly 100 milli.
//
// Any layer may call these; they are pure. Thread-safe.
#ifndef GPUSCHED_UTIL_QUANTITY_H_
#define GPUSCHED_UTIL_QUANTITY_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpusched {

// Returns the quantity in milli-units, rounded up like resource.Quantity's
// MilliValue() (e.g. "2" -> 2000, "250m" -> 250, "1Ki" -> 1024000).
absl::StatusOr<int64_t> ParseQuantityMilli(std::string_view text);

// Returns the quantity as a whole number of units, rounded up ("1500m" -> 2).
absl::StatusOr<int64_t> ParseQuantityValue(std::string_view text);

// Returns the quantity as a whole count and fails if it has a fractional part
// ("4" -> 4, "4000m" -> 4, "0.5" -> error). Extended resources such as
// nvidia.com/gpu must be integers.
absl::StatusOr<int64_t> ParseQuantityInteger(std::string_view text);

// Returns the quantity (bytes) in MiB, rounded up ("40Gi" -> 40960).
absl::StatusOr<int64_t> ParseQuantityMiB(std::string_view text);

}  // namespace gpusched

#endif  // GPUSCHED_UTIL_QUANTITY_H_
