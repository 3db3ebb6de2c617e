// `gpusched simulate`: runs the simulator (scheduler/sim) from the command
// line: one fgd run, a grid of runs, or a replay. See docs/simulator.md.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/http/client.h"
#include "scheduler/sim/driver.h"

namespace gpusched::cli {
namespace {

constexpr char kUsage[] =
    "usage: gpusched simulate --protocol fgd|replay|topology [flags]\n"
    "  cluster:  --nodes-csv FILE | --cluster LIST.json | --nodes dgx-a100:100,t4x4:200\n"
    "  workload: --pods-csv FILE (openb) | --jobs-csv FILE (Philly) | --jobs-json FILE\n"
    "  fgd:      --policy NAME --seed N --tune 1.3 --out result.json [--html report.html]\n"
    "            --grid --policies a,b --traces f1.csv,f2.csv --seeds 42-51 --out-dir DIR\n"
    "            (--grid writes DIR/grid.csv and DIR/grid.md; --out-dir is required)\n"
    "  replay:   --jobs-csv PHILLY.csv --vc-nodes FILE --load K --out r.json [--html r.html]\n"
    "            --policy P or --policies P1,P2,...: fifo, sjf, srtf (each VC on its own\n"
    "            nodes); fifo-pool, sjf-pool, srtf-pool, las-pool, kueue-like, kai-like,\n"
    "            gpusched (one pool); kueue-like-no-fill-back, kueue-like-no-ordering,\n"
    "            kueue-like-before (Kueue-like variants)\n"
    "            [--kube-backoff: failed pods wait kube-scheduler's backoff, 1 s doubling to 10 "
    "s]\n"
    "  topology: --topology racks:2x4x4|cliques:4 --jobs-csv PHILLY.csv --seed N --load 0.8\n"
    "            [--jobs 400 --gang-share 0.3 --required-share 0.5 --gangs-only --random-ties\n"
    "            --slowdown-model levels|span|levels,span (default levels: by the highest\n"
    "            level a gang crosses) --level-slowdown racks=1.2,blocks=2 (also nodes,\n"
    "            clique-nodes, cliques) --slowdown 0.25 (span: 1 + s per extra domain)\n"
    "            --policies gpusched,gpusched-topology,kueue-tas --out rows.csv]\n"
    "  e2e:      --write-cluster LIST.json (for `gpusched serve --cluster`; with --pods-csv,\n"
    "            --seed and --tune it holds the run's GPU pods, pending), then\n"
    "            --extender http://127.0.0.1:8888/scheduler [--policy gpusched-extender]\n"
    "  common:   --config FILE (gpusched policy) --threads 2 --quiet\n"
    "  Files are written only where --out, --out-dir, --html and --write-cluster say;\n"
    "  without them a run prints its summary and writes nothing.\n";

// --protocol topology's cluster shape and workload knobs into `o`.
absl::Status ReadTopologyFlags(const Flags& flags, sim::DriverOptions* o) {
  o->topology = flags.Get("topology", "racks:2x4x4");
  o->gangs_only = flags.Has("gangs-only");
  o->random_ties = flags.Has("random-ties");
  o->level_slowdown = flags.Get("level-slowdown");
  o->slowdown_models.clear();
  // Held here: StrSplit views it, and a temporary would end before the loop.
  const std::string models = flags.Get("slowdown-model", "levels");
  for (absl::string_view m : absl::StrSplit(ToAbsl(models), ',', absl::SkipEmpty())) {
    o->slowdown_models.emplace_back(m);
  }
  const bool ok =
      absl::SimpleAtoi(ToAbsl(flags.Get("jobs", "400")), &o->topo_jobs) &&
      absl::SimpleAtod(ToAbsl(flags.Get("gang-share", "0.3")), &o->gang_share) &&
      absl::SimpleAtod(ToAbsl(flags.Get("required-share", "0.5")), &o->required_share) &&
      absl::SimpleAtod(ToAbsl(flags.Get("slowdown", "0.25")), &o->span_slowdown);
  if (!ok || o->span_slowdown < 0) {
    return absl::InvalidArgumentError(
        "bad number in --jobs/--gang-share/--required-share/--slowdown (slowdown >= 0)");
  }
  return absl::OkStatus();
}

// The cluster, workload, output and number flags into `o`.
absl::Status ReadDriverFlags(const Flags& flags, sim::DriverOptions* o) {
  o->protocol = flags.Get("protocol", "fgd");
  o->nodes_csv = flags.Get("nodes-csv");
  o->cluster_json = flags.Get("cluster");
  o->nodes_spec = flags.Get("nodes");
  o->pods_csv = flags.Get("pods-csv");
  o->jobs_csv = flags.Get("jobs-csv");
  o->jobs_json = flags.Get("jobs-json");
  o->vc_nodes = flags.Get("vc-nodes");
  o->extender = flags.Get("extender");
  o->write_cluster = flags.Get("write-cluster");
  // The server's pipeline decides in end-to-end mode; its in-process twin
  // is gpusched-extender.
  o->policy = flags.Get("policy", o->extender.empty() ? "bestfit" : "gpusched-extender");
  o->out = flags.Get("out");
  o->out_dir = flags.Get("out-dir");
  o->html = flags.Get("html");
  o->trace_name = flags.Get("trace-name");
  o->grid = flags.Has("grid");
  o->progress = !flags.Has("quiet");
  o->kube_backoff = flags.Has("kube-backoff");
  bool ok = absl::SimpleAtoi(ToAbsl(flags.Get("seed", "42")), &o->seed) &&
            absl::SimpleAtod(ToAbsl(flags.Get("tune", "1.3")), &o->tune) &&
            absl::SimpleAtod(ToAbsl(flags.Get("load", "1")), &o->load) &&
            absl::SimpleAtoi(ToAbsl(flags.Get("threads", "2")), &o->threads);
  if (!ok) return absl::InvalidArgumentError("bad number in --seed/--tune/--load/--threads");
  return ReadTopologyFlags(flags, o);
}

// The grid's axes into `o`: --policies and --traces (comma-separated) and
// --seeds LO-HI.
absl::Status ReadGridFlags(const Flags& flags, sim::DriverOptions* o) {
  const std::string policies = flags.Get("policies");
  const std::string traces = flags.Get("traces");
  for (absl::string_view s : absl::StrSplit(ToAbsl(policies), ',', absl::SkipEmpty())) {
    o->policies.emplace_back(s);
  }
  for (absl::string_view s : absl::StrSplit(ToAbsl(traces), ',', absl::SkipEmpty())) {
    o->traces.emplace_back(s);
  }
  const std::string seeds = flags.Get("seeds", "42-51");
  std::vector<std::string> range = absl::StrSplit(ToAbsl(seeds), '-');
  uint64_t lo = 0, hi = 0;
  if (range.size() != 2 || !absl::SimpleAtoi(range[0], &lo) || !absl::SimpleAtoi(range[1], &hi) ||
      hi < lo) {
    return absl::InvalidArgumentError("--seeds must be LO-HI");
  }
  for (uint64_t s = lo; s <= hi; ++s) o->seeds.push_back(s);
  return absl::OkStatus();
}

// The gpusched policy into o->config: --config, else
// config/scheduler-policy.json if it is there, else the built-in defaults
// (said on stderr unless --quiet).
absl::Status ReadSimulateConfig(const Flags& flags, sim::DriverOptions* o) {
  const std::string config_path = flags.Get("config", "config/scheduler-policy.json");
  if (flags.Has("config") || std::ifstream(config_path).good()) {
    GPUSCHED_ASSIGN_OR_RETURN(o->config, codec::LoadConfigFile(config_path));
  } else if (o->progress) {
    std::cerr << "gpusched simulate: no --config and no " << config_path
              << " under the working directory: gpusched policies use the built-in defaults\n";
  }
  return absl::OkStatus();
}

}  // namespace

int Simulate(const std::vector<std::string>& args) {
  Flags flags({"protocol",   "nodes-csv",      "cluster",       "nodes",          "pods-csv",
               "jobs-csv",   "jobs-json",      "policy",        "policies",       "seed",
               "seeds",      "tune",           "out",           "out-dir",        "html",
               "traces",     "config",         "extender",      "threads",        "vc-nodes",
               "load",       "trace-name",     "write-cluster", "topology",       "jobs",
               "gang-share", "required-share", "slowdown",      "slowdown-model", "level-slowdown"},
              {"grid", "quiet", "kube-backoff", "gangs-only", "random-ties"}, kUsage);
  if (auto exit_code = flags.ParseOrExit("simulate", args)) return *exit_code;
  sim::DriverOptions o;
  for (auto read : {ReadDriverFlags, ReadGridFlags, ReadSimulateConfig}) {
    if (absl::Status s = read(flags, &o); !s.ok()) {
      std::cerr << "gpusched simulate: " << s.message() << "\n";
      return 2;
    }
  }
  std::unique_ptr<http::HttpClient> client;
  if (!o.extender.empty()) {
    auto c = http::HttpClient::Create(o.extender);
    if (!c.ok()) {
      std::cerr << "gpusched simulate: " << c.status().message() << "\n";
      return 2;
    }
    client = *std::move(c);
    o.transport = [&client](const std::string& path, const std::string& body) {
      return client->PostJson(path, body);
    };
  }
  absl::Status st = sim::RunDriver(o);
  if (!st.ok()) {
    std::cerr << "gpusched simulate: " << st.message() << "\n";
    return absl::IsInvalidArgument(st) || absl::IsNotFound(st) ? 2 : 1;
  }
  return 0;
}

}  // namespace gpusched::cli
