#include "scheduler/sim/grid.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gpusched/util/strings.h"

namespace gpusched::sim {

absl::StatusOr<std::vector<FgdResult>> RunGrid(const SimCluster& cluster,
                                               const std::vector<GridTrace>& traces,
                                               const std::vector<std::string>& policies,
                                               const std::vector<uint64_t>& seeds,
                                               const SchedulerConfig& config, int threads,
                                               bool progress) {
  struct Task {
    size_t trace;
    std::string policy;
    uint64_t seed;
  };
  std::vector<Task> tasks;
  for (size_t t = 0; t < traces.size(); ++t) {
    for (const std::string& p : policies) {
      for (uint64_t s : seeds) tasks.push_back({t, p, s});
    }
  }
  std::vector<FgdResult> results(tasks.size());
  std::vector<absl::Status> errors(tasks.size());
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex out_mu;
  auto worker = [&] {
    for (size_t i = next++; i < tasks.size(); i = next++) {
      FgdOptions o;
      o.policy = tasks[i].policy;
      o.seed = tasks[i].seed;
      o.trace = traces[tasks[i].trace].name;
      auto r = RunFgd(cluster, traces[tasks[i].trace].pods, config, o);
      if (r.ok()) {
        results[i] = std::move(*r);
      } else {
        errors[i] = r.status();
      }
      const size_t d = ++done;
      if (progress) {
        std::lock_guard<std::mutex> l(out_mu);
        std::fprintf(stderr, "\r[grid] %zu/%zu runs (%s %s seed %llu)      ", d, tasks.size(),
                     o.trace.c_str(), o.policy.c_str(), static_cast<unsigned long long>(o.seed));
      }
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < std::max(1, threads); ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (progress) std::fprintf(stderr, "\n");
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  return results;
}

Stat MeanSd(const std::vector<double>& v) {
  Stat s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= s.n;
  if (s.n > 1) {
    double q = 0;
    for (double x : v) q += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(q / (s.n - 1));
  }
  return s;
}

std::string PolicyFromAuthorsLabel(std::string_view label) {
  if (label == "01-Random") return "random";
  if (label == "02-DotProd") return "dotprod";
  if (label == "03-GpuClustering") return "clustering";
  if (label == "04-GpuPacking") return "packing";
  if (label == "05-BestFit") return "bestfit";
  if (label == "06-FGD") return "fgd";
  return "";
}

std::string TraceNameFromPath(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  if (path.size() > 4 && path.substr(path.size() - 4) == ".csv") path.remove_suffix(4);
  constexpr std::string_view kPrefix = "openb_pod_list_";
  if (path.substr(0, kPrefix.size()) == kPrefix) path.remove_prefix(kPrefix.size());
  return std::string(path);
}

absl::StatusOr<AuthorsResults> ParseAuthorsAllocation(std::string_view csv) {
  AuthorsResults out;
  std::vector<std::string_view> lines;
  for (absl::string_view l : absl::StrSplit(ToAbsl(csv), '\n', absl::SkipEmpty())) {
    lines.push_back(FromAbsl(l));
  }
  if (lines.empty()) return absl::InvalidArgumentError("empty authors' CSV");
  std::vector<std::string> header = absl::StrSplit(ToAbsl(lines[0]), ',');
  int c100 = -1, c130 = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "100") c100 = static_cast<int>(i);
    if (header[i] == "130") c130 = static_cast<int>(i);
  }
  if (c100 < 0 || header.size() < 2 || header[0] != "workload" || header[1] != "sc_policy") {
    return absl::InvalidArgumentError("authors' CSV needs workload,sc_policy,...,100");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(ToAbsl(lines[i]), ',');
    if (static_cast<int>(f.size()) <= std::max(c100, c130)) continue;
    const std::string policy = PolicyFromAuthorsLabel(f[1]);
    double v100 = 0, v130 = 0;
    if (policy.empty() || !absl::SimpleAtod(f[c100], &v100)) continue;
    auto key = std::make_pair(TraceNameFromPath(f[0]), policy);
    out.unalloc_100[key].push_back(100 - v100);
    if (c130 >= 0 && absl::SimpleAtod(f[c130], &v130)) out.alloc_130[key].push_back(v130);
    for (size_t c = 2; c < header.size() && c < f.size(); ++c) {
      int arrived = 0;
      double v = 0;
      if (absl::SimpleAtoi(header[c], &arrived) && absl::SimpleAtod(f[c], &v)) {
        out.alloc_curve[key][arrived].push_back(v);
      }
    }
  }
  return out;
}

std::vector<CalibrationCell> Calibrate(const std::vector<FgdResult>& runs,
                                       const AuthorsResults& authors,
                                       const std::vector<std::string>& policies) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> ours;
  std::vector<std::string> order;
  for (const FgdResult& r : runs) {
    if (std::find(order.begin(), order.end(), r.trace) == order.end()) order.push_back(r.trace);
    ours[{r.trace, r.policy}].push_back(r.unallocated_at_100);
  }
  std::vector<CalibrationCell> cells;
  for (const std::string& t : order) {
    for (const std::string& p : policies) {
      auto a = authors.unalloc_100.find({t, p});
      auto o = ours.find({t, p});
      if (a == authors.unalloc_100.end() || o == ours.end()) continue;
      CalibrationCell c;
      c.trace = t;
      c.policy = p;
      c.ours = MeanSd(o->second);
      c.authors = MeanSd(a->second);
      const double se = std::sqrt(c.ours.sd * c.ours.sd / std::max(1, c.ours.n) +
                                  c.authors.sd * c.authors.sd / std::max(1, c.authors.n));
      c.z = se > 0 ? (c.ours.mean - c.authors.mean) / se : 0;
      c.pass = std::fabs(c.z) < 3;
      cells.push_back(c);
    }
  }
  return cells;
}

std::string GridCsv(const std::vector<FgdResult>& runs) {
  std::string out =
      "trace,policy,seed,unallocated_gpu_pct_at_100,allocated_gpu_pct_at_130,"
      "frag_total_pct_at_90,frag_idle_pct_at_90,pods,failed_pods,seconds\n";
  for (const FgdResult& r : runs) {
    out += absl::StrFormat("%s,%s,%d,%.2f,%.2f,%.2f,%.2f,%d,%d,%.3f\n", r.trace, r.policy, r.seed,
                           r.unallocated_at_100, r.allocated_at_130, r.frag_total_at_90,
                           r.frag_idle_at_90, r.pods, r.failed, r.seconds);
  }
  return out;
}

std::string GridMarkdown(const std::vector<FgdResult>& runs, const AuthorsResults* authors) {
  std::vector<std::string> traces, policies;
  std::map<std::pair<std::string, std::string>, std::vector<double>> v;
  for (const FgdResult& r : runs) {
    if (std::find(traces.begin(), traces.end(), r.trace) == traces.end()) {
      traces.push_back(r.trace);
    }
    if (std::find(policies.begin(), policies.end(), r.policy) == policies.end()) {
      policies.push_back(r.policy);
    }
    v[{r.trace, r.policy}].push_back(r.unallocated_at_100);
  }
  std::string out = "| trace |";
  for (const auto& p : policies) out += " " + p + " |";
  out += "\n|---|";
  for (size_t i = 0; i < policies.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& t : traces) {
    out += "| " + t + " |";
    for (const auto& p : policies) {
      Stat s = MeanSd(v[{t, p}]);
      out += absl::StrFormat(" %.2f ± %.2f", s.mean, s.sd);
      if (authors != nullptr) {
        auto a = authors->unalloc_100.find({t, p});
        if (a != authors->unalloc_100.end()) {
          out += absl::StrFormat(" (authors %.2f)", MeanSd(a->second).mean);
        }
      }
      out += " |";
    }
    out += "\n";
  }
  return out;
}

std::string CalibrationMarkdown(const std::vector<CalibrationCell>& cells) {
  std::string out =
      "| trace | policy | ours mean ± sd | authors mean ± sd | diff | z | gate |z|<3 |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const CalibrationCell& c : cells) {
    out += absl::StrFormat("| %s | %s | %.2f ± %.2f | %.2f ± %.2f | %+.2f | %+.2f | %s |\n",
                           c.trace, c.policy, c.ours.mean, c.ours.sd, c.authors.mean, c.authors.sd,
                           c.ours.mean - c.authors.mean, c.z, c.pass ? "pass" : "FAIL");
  }
  return out;
}

}  // namespace gpusched::sim
