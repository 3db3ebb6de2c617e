// The replay half of the driver.
#include <cstdio>
#include <fstream>

#include "gpusched/util/strings.h"
#include "scheduler/codec/sim_codec.h"
#include "scheduler/sim/driver.h"
#include "scheduler/sim/replay.h"
#include "scheduler/sim/report.h"

namespace gpusched::sim {

absl::Status RunReplayDriver(const DriverOptions& o) {
  std::vector<Job> jobs;
  std::vector<std::pair<std::string, int>> pools;
  if (!o.vc_nodes.empty()) {
    auto text = ReadFile(o.vc_nodes);
    if (!text.ok()) return text.status();
    auto p = ParseVcNodes(*text);
    if (!p.ok()) return p.status();
    pools = std::move(*p);
  }
  std::vector<std::string> vcs;
  for (const auto& [ns, n] : pools) vcs.push_back(ns);
  if (!o.jobs_csv.empty()) {
    auto text = ReadFile(o.jobs_csv);
    if (!text.ok()) return text.status();
    auto j = ParsePhillyJobs(*text, vcs);
    if (!j.ok()) return j.status();
    jobs = std::move(*j);
  } else if (!o.jobs_json.empty()) {
    auto text = ReadFile(o.jobs_json);
    if (!text.ok()) return text.status();
    auto j = codec::DecodeJobs(*text);
    if (!j.ok()) return j.status();
    jobs = std::move(*j);
  } else {
    return absl::InvalidArgumentError("replay needs --jobs-csv or --jobs-json");
  }
  if (pools.empty()) return absl::InvalidArgumentError("replay needs --vc-nodes");
  std::vector<std::string> policies = o.policies;
  if (policies.empty()) policies.push_back(o.policy);
  std::vector<ReplayResult> results;
  for (const std::string& p : policies) {
    ReplayOptions ro;
    ro.policy = p;
    ro.load = o.load;
    ro.config = o.config;
    ro.kube_backoff = o.kube_backoff;
    if (o.progress)
      std::fprintf(stderr, "[replay] %s x%.1f: %zu jobs...\n", p.c_str(), o.load, jobs.size());
    auto r = RunReplay(jobs, pools, ro);
    if (!r.ok()) return r.status();
    std::fprintf(stderr,
                 "%s x%.1f: avg JCT %.0f s, avg queueing %.0f s, p99 %.0f s, preemptions %lld, "
                 "quota violations %lld\n",
                 p.c_str(), o.load, r->avg_jct, r->avg_queue, r->p99_jct,
                 static_cast<long long>(r->preemptions),
                 static_cast<long long>(r->quota_violations));
    if (r->guarantee_episodes > 0) {
      std::fprintf(
          stderr,
          "%s x%.1f: time to guarantee: %lld episodes, mean %.0f s, p95 %.0f s, max %.0f s\n",
          p.c_str(), o.load, static_cast<long long>(r->guarantee_episodes),
          r->avg_time_to_guarantee, r->p95_time_to_guarantee, r->max_time_to_guarantee);
    }
    results.push_back(std::move(*r));
  }
  if (!o.out.empty()) {
    std::string text = "[";
    for (size_t i = 0; i < results.size(); ++i) {
      text += (i ? ",\n" : "") + codec::EncodeReplayResult(results[i]);
    }
    text += "]\n";
    std::ofstream(o.out) << text;
  }
  if (!o.html.empty()) {
    ReportParams params = ScenarioParams(o);
    std::string pools_text;
    for (const auto& [ns, n] : pools)
      pools_text += StrCat(pools_text.empty() ? "" : ", ", ns, " ", n);
    params.push_back({"jobs", std::to_string(jobs.size())});
    params.push_back({"namespaces and guaranteed nodes (8 GPUs each)", pools_text});
    std::ofstream(o.html) << ReplayReportHtml(results, params);
  }
  return absl::OkStatus();
}

}  // namespace gpusched::sim
