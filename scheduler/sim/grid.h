// Grid runs (policies x traces x seeds of the fgd protocol on worker
// threads), their summary statistics, and the calibration against the FGD
// authors' cached results (analysis_allo_discrete.csv: unallocated at 100 =
// 100 - column "100"; z = diff / sqrt(sd_ours^2/n + sd_auth^2/m), sample sd).
//
// Callers: the driver, tests, benchmarks. RunGrid spawns its own threads and
// joins them; the functions are otherwise pure; thread-safe.
#ifndef GPUSCHED_SIM_GRID_H_
#define GPUSCHED_SIM_GRID_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/sim/fgd_protocol.h"

namespace gpusched::sim {

struct GridTrace {
  std::string name;  // e.g. "default" (from openb_pod_list_default.csv)
  std::vector<PodRequest> pods;
};

// Runs every (trace, policy, seed) on `threads` workers. Results are in
// (trace, policy, seed) order.
absl::StatusOr<std::vector<FgdResult>> RunGrid(const SimCluster& cluster,
                                               const std::vector<GridTrace>& traces,
                                               const std::vector<std::string>& policies,
                                               const std::vector<uint64_t>& seeds,
                                               const SchedulerConfig& config, int threads,
                                               bool progress);

struct Stat {
  double mean = 0, sd = 0;  // sample sd
  int n = 0;
};
Stat MeanSd(const std::vector<double>& v);

// Authors' results: (trace name, our policy name) -> values per seed.
struct AuthorsResults {
  std::map<std::pair<std::string, std::string>, std::vector<double>> unalloc_100;
  std::map<std::pair<std::string, std::string>, std::vector<double>> alloc_130;
  // Allocated % at each arrived % (the file's columns 0..130), per seed.
  std::map<std::pair<std::string, std::string>, std::map<int, std::vector<double>>> alloc_curve;
};
absl::StatusOr<AuthorsResults> ParseAuthorsAllocation(std::string_view csv);
// "01-Random" -> "random", ... ("" if unknown).
std::string PolicyFromAuthorsLabel(std::string_view label);
// "openb_pod_list_gpushare20.csv" or a path -> "gpushare20".
std::string TraceNameFromPath(std::string_view path);

struct CalibrationCell {
  std::string trace, policy;
  Stat ours, authors;
  double z = 0;
  bool pass = false;  // |z| < 3
};
std::vector<CalibrationCell> Calibrate(const std::vector<FgdResult>& runs,
                                       const AuthorsResults& authors,
                                       const std::vector<std::string>& policies);

// One CSV row per run; a markdown table of mean +- sd of unallocated % at 100
// (rows traces, columns policies) with the authors' means where known; and the
// calibration table.
std::string GridCsv(const std::vector<FgdResult>& runs);
std::string GridMarkdown(const std::vector<FgdResult>& runs, const AuthorsResults* authors);
std::string CalibrationMarkdown(const std::vector<CalibrationCell>& cells);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_GRID_H_
