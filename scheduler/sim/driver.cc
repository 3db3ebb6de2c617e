#include "scheduler/sim/driver.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/sim_codec.h"
#include "scheduler/sim/extender_mode.h"
#include "scheduler/sim/fgd_protocol.h"
#include "scheduler/sim/grid.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/replay.h"
#include "scheduler/sim/report.h"
#include "scheduler/sim/sim_cluster.h"
#include "scheduler/sim/sim_policy.h"

namespace gpusched::sim {
namespace {

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::NotFoundError(StrCat("cannot write ", path));
  out << text;
  return out.good() ? absl::OkStatus() : absl::InternalError(StrCat("write failed: ", path));
}

absl::StatusOr<std::vector<NodeSpec>> LoadNodes(const DriverOptions& o) {
  if (!o.nodes_csv.empty()) {
    auto text = ReadFile(o.nodes_csv);
    if (!text.ok()) return text.status();
    return ParseOpenbNodes(*text);
  }
  if (!o.cluster_json.empty()) {
    auto text = ReadFile(o.cluster_json);
    if (!text.ok()) return text.status();
    return ParseClusterList(std::move(*text));
  }
  if (!o.nodes_spec.empty()) return GenerateNodes(o.nodes_spec);
  return absl::InvalidArgumentError("give a cluster: --nodes-csv, --cluster or --nodes");
}

absl::StatusOr<std::vector<PodRequest>> LoadPods(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseOpenbPods(*text);
}

// The authors' cached results beside the trace, if present.
std::optional<AuthorsResults> FindAuthors(const std::string& trace_path) {
  namespace fs = std::filesystem;
  fs::path p =
      fs::path(trace_path).parent_path() / "expected_results" / "analysis_allo_discrete.csv";
  auto text = ReadFile(p.string());
  if (!text.ok()) return std::nullopt;
  auto a = ParseAuthorsAllocation(*text);
  if (!a.ok()) return std::nullopt;
  return *a;
}

std::string JoinNames(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// --write-cluster: the cluster as a Kubernetes List (for `gpusched serve
// --cluster`). With a trace, the List also holds the GPU pods an --extender
// run with the same seed and tune sends, pending: the server's cluster
// source must show every pod it is asked about.
absl::Status WriteClusterList(const DriverOptions& o, const std::vector<NodeSpec>& nodes,
                              const SimCluster& cluster) {
  std::vector<PodRequest> pending;
  if (!o.grid && !o.pods_csv.empty()) {
    auto pods = LoadPods(o.pods_csv);
    if (!pods.ok()) return pods.status();
    FgdOptions fo;
    fo.seed = o.seed;
    fo.tune = o.tune;
    pending = ExtenderWorkload(cluster, *pods, fo);
  }
  GPUSCHED_RETURN_IF_ERROR(WriteText(o.write_cluster, ClusterListJson(nodes, pending)));
  if (o.progress) {
    std::fprintf(stderr, "wrote %zu nodes and %zu pending pods to %s\n", nodes.size(),
                 pending.size(), o.write_cluster.c_str());
  }
  return absl::OkStatus();
}

// One fgd run (in process, or through --extender): its summary line on
// stderr, the result in --out and the report in --html.
absl::Status RunOneFgd(const DriverOptions& o, const SimCluster& cluster) {
  if (o.pods_csv.empty()) return absl::InvalidArgumentError("--pods-csv is required");
  auto pods = LoadPods(o.pods_csv);
  if (!pods.ok()) return pods.status();
  FgdOptions fo;
  fo.policy = o.policy;
  fo.seed = o.seed;
  fo.tune = o.tune;
  fo.trace = o.trace_name.empty() ? TraceNameFromPath(o.pods_csv) : o.trace_name;
  fo.progress = o.progress;
  absl::StatusOr<FgdResult> r;
  if (!o.extender.empty()) {
    if (!o.transport) return absl::InvalidArgumentError("--extender: no HTTP transport");
    r = RunFgdViaExtender(cluster, *pods, o.config, fo, o.transport);
  } else {
    r = RunFgd(cluster, *pods, o.config, fo);
  }
  if (!r.ok()) return r.status();
  std::fprintf(stderr, "%s %s seed %llu: unallocated@100 %.2f%%, allocated@130 %.2f%% (%.2fs)\n",
               r->trace.c_str(), r->policy.c_str(), static_cast<unsigned long long>(r->seed),
               r->unallocated_at_100, r->allocated_at_130, r->seconds);
  if (!o.out.empty()) GPUSCHED_RETURN_IF_ERROR(WriteText(o.out, codec::EncodeFgdResult(*r)));
  if (!o.html.empty()) {
    auto authors = FindAuthors(o.pods_csv);
    GPUSCHED_RETURN_IF_ERROR(
        WriteText(o.html, FgdReportHtml({*r}, ScenarioParams(o), authors ? &*authors : nullptr)));
  }
  return absl::OkStatus();
}

// --grid: every policy x trace x seed; grid.csv and grid.md (with the
// calibration against the authors' results when they sit beside the first
// trace) in --out-dir, the markdown on stdout, the report in --html.
absl::Status RunFgdGrid(const DriverOptions& o, const SimCluster& cluster) {
  std::vector<std::string> trace_paths = o.traces;
  if (trace_paths.empty() && !o.pods_csv.empty()) trace_paths.push_back(o.pods_csv);
  if (trace_paths.empty()) return absl::InvalidArgumentError("--grid needs --traces");
  if (o.out_dir.empty()) {
    return absl::InvalidArgumentError(
        "--grid writes grid.csv and grid.md: give --out-dir DIR (e.g. build/grid)");
  }
  std::vector<GridTrace> traces;
  for (const std::string& p : trace_paths) {
    auto pods = LoadPods(p);
    if (!pods.ok()) return pods.status();
    traces.push_back({TraceNameFromPath(p), std::move(*pods)});
  }
  std::vector<std::string> policies = o.policies;
  if (policies.empty()) policies = PolicyNames();
  std::vector<uint64_t> seeds = o.seeds;
  if (seeds.empty()) seeds.push_back(o.seed);
  auto runs = RunGrid(cluster, traces, policies, seeds, o.config, o.threads, o.progress);
  if (!runs.ok()) return runs.status();
  std::filesystem::create_directories(o.out_dir);
  auto authors = FindAuthors(trace_paths[0]);
  const std::string dir = o.out_dir + "/";
  GPUSCHED_RETURN_IF_ERROR(WriteText(dir + "grid.csv", GridCsv(*runs)));
  std::string md = "## Unallocated GPU % at 100 % arrival (mean ± sd over seeds)\n\n" +
                   GridMarkdown(*runs, authors ? &*authors : nullptr);
  if (authors) {
    md += "\n## Calibration against the authors' results\n\n" +
          CalibrationMarkdown(Calibrate(*runs, *authors, policies));
  }
  GPUSCHED_RETURN_IF_ERROR(WriteText(dir + "grid.md", md));
  std::fputs(md.c_str(), stdout);
  if (!o.html.empty())
    GPUSCHED_RETURN_IF_ERROR(
        WriteText(o.html, FgdReportHtml(*runs, ScenarioParams(o), authors ? &*authors : nullptr)));
  return absl::OkStatus();
}

absl::Status RunFgdDriver(const DriverOptions& o) {
  auto nodes = LoadNodes(o);
  if (!nodes.ok()) return nodes.status();
  auto cluster = SimCluster::Create(*nodes, o.config.topology_templates);
  if (!cluster.ok()) return cluster.status();
  if (!o.write_cluster.empty()) {
    GPUSCHED_RETURN_IF_ERROR(WriteClusterList(o, *nodes, *cluster));
    if (o.extender.empty()) return absl::OkStatus();  // a preparation step
  }
  return o.grid ? RunFgdGrid(o, *cluster) : RunOneFgd(o, *cluster);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ScenarioParams(const DriverOptions& o) {
  namespace fs = std::filesystem;
  auto base = [](const std::string& p) { return fs::path(p).filename().string(); };
  std::vector<std::pair<std::string, std::string>> p = {{"protocol", o.protocol}};
  if (!o.nodes_csv.empty()) p.push_back({"cluster", "openb node list " + base(o.nodes_csv)});
  if (!o.cluster_json.empty()) p.push_back({"cluster", "Kubernetes List " + base(o.cluster_json)});
  if (!o.nodes_spec.empty()) p.push_back({"cluster", "generated: " + o.nodes_spec});
  std::vector<std::string> workload;
  for (const std::string& f : {o.pods_csv, o.jobs_csv, o.jobs_json}) {
    if (!f.empty()) workload.push_back(base(f));
  }
  for (const std::string& f : o.traces) workload.push_back(base(f));
  if (!workload.empty()) p.push_back({"workload", JoinNames(workload)});
  p.push_back({"policies", o.policies.empty() ? o.policy : JoinNames(o.policies)});
  if (o.protocol == "replay") {
    p.push_back({"load", StrCat("durations x ", o.load)});
  } else {
    std::vector<std::string> seeds;
    for (uint64_t s : o.seeds.empty() ? std::vector<uint64_t>{o.seed} : o.seeds) {
      seeds.push_back(std::to_string(s));
    }
    p.push_back({"seeds", JoinNames(seeds)});
    p.push_back({"tune", StrCat("requests up to ", o.tune, " x GPU capacity")});
  }
  std::vector<std::string> scorers;
  for (const policy::ScorerSpec& sc : o.config.scoring.scorers) {
    if (sc.weight != 0) scorers.push_back(StrCat(sc.name, " ", sc.weight));
  }
  p.push_back({"gpusched scorers (weight)", JoinNames(scorers)});
  if (!o.extender.empty()) p.push_back({"extender", "gpusched serve over HTTP"});
  return p;
}

absl::Status RunDriver(const DriverOptions& o) {
  if (!o.extender.empty() && (o.protocol != "fgd" || o.grid)) {
    return absl::InvalidArgumentError("--extender runs one fgd run (not --grid, not replay)");
  }
  if (o.protocol == "fgd") return RunFgdDriver(o);
  if (o.protocol == "replay") return RunReplayDriver(o);
  if (o.protocol == "topology") return RunTopologyDriver(o);
  return absl::InvalidArgumentError(StrCat("unknown --protocol '", o.protocol, "'"));
}

}  // namespace gpusched::sim
