// `gpusched simulate --protocol topology`: builds the topology-shaped
// cluster and the Philly-derived training workload, runs every listed
// placement under every listed slowdown model on the same workload
// (topo_compare.h, topo_slowdown.h) and writes one CSV row per placement
// and model to --out (docs/simulator.md, "Topology").
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gpusched/util/strings.h"
#include "scheduler/sim/driver.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/topo_compare.h"
#include "scheduler/sim/topo_slowdown.h"

namespace gpusched::sim {
namespace {

constexpr char kCsvHeader[] =
    "topology,seed,load,gang_share,required_share,singles,slowdown,jobs,policy,gangs,"
    "gangs_started,unfinished,one_domain_share,required_gangs,required_spread,gang_wait_mean_s,"
    "gang_wait_p95_s,avg_jct_s,avg_gang_jct_s,utilisation,whole_top,whole_group,whole_top_end,"
    "whole_group_end,makespan_s,single_wait_mean_s,avg_single_jct_s,ties,seconds,slowdown_model,"
    "level_factors,top_spread_share\n";

std::string CsvRow(const DriverOptions& o, const SlowdownOptions& m, const TopoResult& r,
                   double seconds) {
  const LevelSlowdowns& f = m.levels;
  return absl::StrFormat(
      "%s,%d,%.2f,%.2f,%.2f,%s,%.2f,%d,%s,%d,%d,%d,%.4f,%d,%d,%.1f,%.1f,%.1f,%.1f,%.4f,%.4f,%.4f,"
      "%.4f,%.4f,%.1f,%.1f,%.1f,%s,%.2f,%s,%.3f:%.3f:%.3f:%.3f:%.3f,%.4f\n",
      o.topology, o.seed, o.load, o.gang_share, o.required_share, o.gangs_only ? "no" : "yes",
      o.span_slowdown, r.jobs, r.policy, r.gangs, r.gangs_started, r.unfinished, r.one_domain_share,
      r.required_gangs, r.required_spread, r.gang_wait_mean, r.gang_wait_p95, r.avg_jct,
      r.avg_gang_jct, r.utilisation, r.whole_top, r.whole_group, r.whole_top_end, r.whole_group_end,
      r.makespan, r.single_wait_mean, r.avg_single_jct, o.random_ties ? "random" : "index", seconds,
      std::string(SlowdownModelName(m.model)), f.nodes, f.racks, f.blocks, f.clique_nodes,
      f.cliques, r.top_spread_share);
}

absl::StatusOr<std::vector<TopoJob>> Workload(const DriverOptions& o, const TopoCluster& c) {
  if (o.jobs_csv.empty()) {
    return absl::InvalidArgumentError("topology needs --jobs-csv (the Philly job trace)");
  }
  auto text = ReadFile(o.jobs_csv);
  if (!text.ok()) return text.status();
  auto philly = ParsePhillyJobs(*text, {});
  if (!philly.ok()) return philly.status();
  TopoWorkloadOptions w;
  w.seed = o.seed;
  w.jobs = o.topo_jobs;
  w.load = o.load;
  w.gang_share = o.gang_share;
  w.required_share = o.required_share;
  auto jobs = MakeTopoWorkload(*philly, c, w);
  if (!jobs.ok()) return jobs.status();
  if (o.gangs_only) return GangsOnly(*jobs);
  return jobs;
}

// The slowdown models of --slowdown-model, each with --slowdown and
// --level-slowdown.
absl::StatusOr<std::vector<SlowdownOptions>> SlowdownModels(const DriverOptions& o) {
  auto levels = ParseLevelSlowdowns(o.level_slowdown);
  if (!levels.ok()) return levels.status();
  std::vector<SlowdownOptions> out;
  for (const std::string& name : o.slowdown_models) {
    auto model = ParseSlowdownModel(name);
    if (!model.ok()) return model.status();
    out.push_back({.model = *model, .span = o.span_slowdown, .levels = *levels});
  }
  if (out.empty()) return absl::InvalidArgumentError("--slowdown-model: name levels or span");
  return out;
}

}  // namespace

absl::Status RunTopologyDriver(const DriverOptions& o) {
  auto shape = ParseTopoShape(o.topology);
  if (!shape.ok()) return shape.status();
  const TopoCluster cluster = MakeTopoCluster(*shape);
  auto jobs = Workload(o, cluster);
  if (!jobs.ok()) return jobs.status();
  auto models = SlowdownModels(o);
  if (!models.ok()) return models.status();
  std::vector<std::string> policies = o.policies;
  if (policies.empty()) policies = {"gpusched", "kueue-tas"};
  std::string csv = kCsvHeader;
  for (const SlowdownOptions& m : *models) {
    for (const std::string& p : policies) {
      TopoCompareOptions co;
      co.policy = p;
      co.slowdown = m;
      co.config = o.config;
      co.tie_seed = o.random_ties ? o.seed + 1 : 0;
      const absl::Time began = absl::Now();
      auto r = RunTopoCompare(cluster, *jobs, co);
      if (!r.ok()) return r.status();
      const double seconds = absl::ToDoubleSeconds(absl::Now() - began);
      std::fprintf(stderr,
                   "%s %s (%s slowdown): %lld gangs, %.1f %% in one domain, gang wait mean %.0f s "
                   "p95 %.0f s, avg JCT %.0f s, util %.3f, whole domains %.3f (%.1f s)\n",
                   o.topology.c_str(), p.c_str(), std::string(SlowdownModelName(m.model)).c_str(),
                   static_cast<long long>(r->gangs), 100 * r->one_domain_share, r->gang_wait_mean,
                   r->gang_wait_p95, r->avg_jct, r->utilisation, r->whole_group, seconds);
      csv += CsvRow(o, m, *r, seconds);
    }
  }
  if (o.out.empty()) return absl::OkStatus();
  std::ofstream f(o.out);
  f << csv;
  if (!f.good()) return absl::InternalError(StrCat("cannot write ", o.out));
  return absl::OkStatus();
}

}  // namespace gpusched::sim
