// Self-contained HTML reports with inline SVG charts (no scripts, no network):
// allocation and fragmentation vs arrived workload per policy (fgd), queue
// wait per namespace over time and GPU utilisation (replay).
// Callers: the driver. Pure; thread-safe.
#ifndef GPUSCHED_SIM_REPORT_H_
#define GPUSCHED_SIM_REPORT_H_

#include <string>
#include <vector>

#include "scheduler/sim/fgd_protocol.h"

namespace gpusched::sim {

struct ReplayResult;

// Curves are averaged over seeds per (trace, policy).
std::string FgdReportHtml(const std::vector<FgdResult>& runs);
std::string ReplayReportHtml(const std::vector<ReplayResult>& runs);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_REPORT_H_
