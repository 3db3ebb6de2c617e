// Self-contained HTML reports with inline SVG charts (no scripts, no network),
// each opening with the scenario's parameters.
//  fgd: per trace, allocation vs arrived workload per policy (with the
//    authors' FGD curve dashed when their results are given), the same minus
//    the best policy at each point (with two policies or more), a zoom on
//    80-130 % arrived, and fragmentation.
// Charts scale to the page width.
//  replay: the metrics table of every policy; JCT and queueing-delay CDFs of
//    every policy; GPU utilisation over time and, per policy, GPUs in use
//    per namespace against its guarantee and (where the policy's replay
//    records it: gpusched and the FIFO/SJF/SRTF/LAS baselines) the mean wait
//    of queued jobs.
// Callers: the driver, tests. Pure; thread-safe.
#ifndef GPUSCHED_SIM_REPORT_H_
#define GPUSCHED_SIM_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "scheduler/sim/fgd_protocol.h"
#include "scheduler/sim/grid.h"

namespace gpusched::sim {

struct ReplayResult;

// (name, value) rows shown first, in order: the trace, cluster, load, seeds.
using ReportParams = std::vector<std::pair<std::string, std::string>>;

// Curves are averaged over seeds per (trace, policy).
// `authors` (may be null): their cached results, for the FGD line.
std::string FgdReportHtml(const std::vector<FgdResult>& runs, const ReportParams& params,
                          const AuthorsResults* authors = nullptr);
std::string ReplayReportHtml(const std::vector<ReplayResult>& runs, const ReportParams& params);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_REPORT_H_
