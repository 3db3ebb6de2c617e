#include "scheduler/queue/quota_coverage.h"

#include <algorithm>

#include "gpusched/util/strings.h"
#include "scheduler/queue/quota_ledger.h"

namespace gpusched::queue {

QuotaCoverage CoverageOf(const QuotaConfig& quotas, int64_t capacity_milli) {
  QuotaCoverage c;
  c.capacity_milli = capacity_milli;
  c.usable_milli = capacity_milli;
  if (!quotas.enabled) return c;
  int64_t limits = 0;
  for (const auto& [ns, q] : quotas.namespaces) {
    c.guaranteed_milli += q.gpus.guaranteed * 1000;
    limits += q.gpus.limit * 1000;
  }
  if (quotas.default_quota.gpus.limit == 0) c.usable_milli = std::min(capacity_milli, limits);
  c.unusable_milli = capacity_milli - c.usable_milli;
  c.overpromised_milli = std::max<int64_t>(0, c.guaranteed_milli - capacity_milli);
  return c;
}

std::vector<std::string> CoverageWarnings(const QuotaCoverage& c) {
  std::vector<std::string> out;
  if (c.unusable_milli > 0) {
    out.push_back(
        StrCat(FormatGpus(c.unusable_milli), " of the cluster's ", FormatGpus(c.capacity_milli),
               " GPUs can never be used: the listed limits add up to ", FormatGpus(c.usable_milli),
               " and quotas.default has limit 0 (unlisted namespaces hold nothing)"));
  }
  if (c.overpromised_milli > 0) {
    out.push_back(StrCat("guarantees add up to ", FormatGpus(c.guaranteed_milli), " GPUs, ",
                         FormatGpus(c.overpromised_milli), " more than the cluster's ",
                         FormatGpus(c.capacity_milli),
                         ": they cannot all be honoured at once (accepted: nodes come and go)"));
  }
  return out;
}

}  // namespace gpusched::queue
