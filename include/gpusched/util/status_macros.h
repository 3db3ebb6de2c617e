// Status propagation macros (abseil 20220623 ships none). Semantics match the
// later ABSL_RETURN_IF_ERROR / ABSL_ASSIGN_OR_RETURN so an upgrade is a rename.
#ifndef GPUSCHED_UTIL_STATUS_MACROS_H_
#define GPUSCHED_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPUSCHED_RETURN_IF_ERROR(expr)       \
  do {                                       \
    ::absl::Status _gs_status = (expr);      \
    if (!_gs_status.ok()) return _gs_status; \
  } while (0)

#define GPUSCHED_STATUS_CONCAT_INNER(a, b) a##b
#define GPUSCHED_STATUS_CONCAT(a, b) GPUSCHED_STATUS_CONCAT_INNER(a, b)

#define GPUSCHED_ASSIGN_OR_RETURN(lhs, expr) \
  GPUSCHED_ASSIGN_OR_RETURN_IMPL(GPUSCHED_STATUS_CONCAT(_gs_or_, __LINE__), lhs, expr)

#define GPUSCHED_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // GPUSCHED_UTIL_STATUS_MACROS_H_
