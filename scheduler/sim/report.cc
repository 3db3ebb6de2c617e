#include "scheduler/sim/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_format.h"
#include "scheduler/sim/replay.h"

namespace gpusched::sim {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr int kCdfPoints = 400;

struct Series {
  std::string name;  // empty: not in the legend
  std::vector<std::pair<double, double>> points;
  int color = -1;  // index into kColors; -1: the series' position
  bool dashed = false;
};

struct ChartSpec {
  std::string title, xlabel, ylabel;
  bool log_x = false;                                // x > 0 only; ticks at powers of ten
  bool y_from_zero = true;                           // else the y range is the data's (a zoom)
  std::optional<std::pair<double, double>> x_range;  // only points inside
  std::string note;                                  // under the legend
};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '&') {
      out += "&amp;";
    } else if (c == '\'') {
      out += "&#39;";
    } else {
      out += c;
    }
  }
  return out;
}

// The x range, y range and the points drawn (inside x_range; x > 0 on a log
// axis).
struct Frame {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  double xstep = 1, ystep = 1;  // between ticks (linear axes)
};

// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
double NiceStep(double raw) {
  if (raw <= 0) return 1;
  const double p = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * p >= raw * 0.999) return m * p;
  }
  return 10 * p;
}

Frame FrameOf(const ChartSpec& spec, std::vector<Series>& series) {
  Frame f;
  for (Series& s : series) {
    std::erase_if(s.points, [&](const std::pair<double, double>& p) {
      if (spec.log_x && p.first <= 0) return true;
      return spec.x_range && (p.first < spec.x_range->first || p.first > spec.x_range->second);
    });
    for (auto [x, y] : s.points) {
      f.x0 = std::min(f.x0, x), f.x1 = std::max(f.x1, x);
      f.y0 = std::min(f.y0, y), f.y1 = std::max(f.y1, y);
    }
  }
  if (f.x0 > f.x1) f.x0 = spec.log_x ? 1 : 0, f.x1 = f.x0 + 1;
  if (f.y0 > f.y1) f.y0 = 0, f.y1 = 1;
  if (spec.y_from_zero) f.y0 = std::min(f.y0, 0.0), f.y1 = std::max(f.y1, 0.0);
  if (spec.log_x) {
    f.x0 = std::pow(10, std::floor(std::log10(f.x0)));
    f.x1 = std::pow(10, std::ceil(std::log10(f.x1)));
  }
  if (f.x1 <= f.x0) f.x1 = spec.log_x ? f.x0 * 10 : f.x0 + 1;
  if (f.y1 <= f.y0) f.y1 = f.y0 + 1;
  f.ystep = NiceStep((f.y1 - f.y0) / 4);
  f.y0 = std::floor(f.y0 / f.ystep) * f.ystep, f.y1 = std::ceil(f.y1 / f.ystep) * f.ystep;
  if (!spec.log_x) f.xstep = NiceStep((f.x1 - f.x0) / 6);  // ticks inside the data's range
  return f;
}

// A line chart as inline SVG: title on top, y-axis title turned along the
// axis, tick labels right of / under their ticks, legend to the right.
std::string Chart(const ChartSpec& spec, std::vector<Series> series) {
  const Frame f = FrameOf(spec, series);
  const double W = 760, H = 360, L = 78, R = 190, T = 44, B = 50;
  auto fx = [&](double x) {
    return spec.log_x ? (std::log10(x) - std::log10(f.x0)) / (std::log10(f.x1) - std::log10(f.x0))
                      : (x - f.x0) / (f.x1 - f.x0);
  };
  auto px = [&](double x) { return L + fx(x) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - f.y0) / (f.y1 - f.y0) * (H - T - B); };
  std::string svg = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 %d %d' font-size='11'>"
      "<rect width='100%%' height='100%%' fill='#fff'/>"
      "<text x='%d' y='20' font-size='14' font-weight='bold'>%s</text>"
      "<text x='%f' y='%f' text-anchor='middle'>%s</text>"
      "<text transform='translate(16,%f) rotate(-90)' text-anchor='middle'>%s</text>",
      static_cast<int>(W), static_cast<int>(H), static_cast<int>(L), Escape(spec.title),
      (L + W - R) / 2, H - 10, Escape(spec.xlabel), (T + H - B) / 2, Escape(spec.ylabel));
  auto tick = [](double v, double step) { return std::abs(v) < step * 1e-6 ? 0.0 : v; };
  for (double yv = f.y0; yv <= f.y1 + f.ystep * 1e-6; yv += f.ystep) {
    svg += absl::StrFormat(
        "<line x1='%f' y1='%f' x2='%f' y2='%f' stroke='#e4e4e4'/>"
        "<text x='%f' y='%f' text-anchor='end'>%.4g</text>",
        L, py(yv), W - R, py(yv), L - 6, py(yv) + 4, tick(yv, f.ystep));
  }
  std::vector<double> xticks;
  if (spec.log_x) {
    for (double x = f.x0; x <= f.x1 * 1.0001; x *= 10) xticks.push_back(x);
  } else {
    for (double x = std::ceil(f.x0 / f.xstep - 1e-9) * f.xstep; x <= f.x1 + f.xstep * 1e-6;
         x += f.xstep) {
      xticks.push_back(x);
    }
  }
  for (double xv : xticks) {
    svg += absl::StrFormat(
        "<line x1='%f' y1='%f' x2='%f' y2='%f' stroke='#e4e4e4'/>"
        "<text x='%f' y='%f' text-anchor='middle'>%.4g</text>",
        px(xv), T, px(xv), H - B, px(xv), H - B + 16, spec.log_x ? xv : tick(xv, f.xstep));
  }
  svg += absl::StrFormat(
      "<line x1='%f' y1='%f' x2='%f' y2='%f' stroke='#000'/>"
      "<line x1='%f' y1='%f' x2='%f' y2='%f' stroke='#000'/>",
      L, H - B, W - R, H - B, L, T, L, H - B);
  int legend = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const char* color = kColors[(s.color >= 0 ? s.color : static_cast<int>(i)) % 10];
    std::string pts;
    for (auto [x, y] : s.points) pts += absl::StrFormat("%.1f,%.1f ", px(x), py(y));
    svg += absl::StrFormat("<polyline fill='none' stroke='%s' stroke-width='1.6'%s points='%s'/>",
                           color, s.dashed ? " stroke-dasharray='5,3'" : "", pts);
    if (s.name.empty()) continue;
    svg += absl::StrFormat("<text x='%f' y='%f' fill='%s'>%s</text>", W - R + 10,
                           T + 14.0 * legend++ + 4, color, Escape(s.name));
  }
  if (!spec.note.empty()) {
    svg += absl::StrFormat("<text x='%f' y='%f' fill='#555'>%s</text>", W - R + 10,
                           T + 14.0 * legend + 12, Escape(spec.note));
  }
  return svg + "</svg>\n";
}

std::string ParamsTable(const ReportParams& params) {
  if (params.empty()) return "";
  std::string t = "<h2>Scenario</h2><table class='params'>";
  for (const auto& [k, v] : params) {
    t += "<tr><th>" + Escape(k) + "</th><td>" + Escape(v) + "</td></tr>";
  }
  return t + "</table>";
}

std::string Page(const std::string& title, const ReportParams& params, const std::string& body) {
  return "<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + Escape(title) +
         "</title><style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse;"
         "margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
         "table.params td,table.params th{text-align:left}svg{display:block;margin:10px "
         "0;width:100%;max-width:1400px;height:auto}"
         "</style></head><body><h1>" +
         Escape(title) + "</h1>" + ParamsTable(params) + body + "</body></html>\n";
}

// `sorted` ascending as a CDF: (value / unit, % of values <= it), at most
// kCdfPoints points; values below `floor` are drawn at `floor`.
Series Cdf(const std::string& name, const std::vector<double>& sorted, double unit, double floor) {
  Series s{name, {}};
  const size_t n = sorted.size();
  if (n == 0) return s;
  const size_t steps = std::min<size_t>(n, kCdfPoints);
  for (size_t k = 0; k < steps; ++k) {
    const size_t i = steps == 1 ? n - 1 : k * (n - 1) / (steps - 1);
    s.points.push_back({std::max(sorted[i], floor) / unit, 100.0 * (i + 1) / n});
  }
  return s;
}

// Per (trace, policy): arrived % -> mean allocated % and fragmentation %.
struct FgdCurves {
  std::map<std::string, std::map<int, double>> alloc, frag;
};

std::map<std::string, FgdCurves> MeanCurves(const std::vector<FgdResult>& runs) {
  std::map<std::string, std::map<std::string, std::map<int, std::vector<CurvePoint>>>> by;
  for (const FgdResult& r : runs) {
    for (const CurvePoint& c : r.curve) by[r.trace][r.policy][c.arrived_pct].push_back(c);
  }
  std::map<std::string, FgdCurves> out;
  for (const auto& [trace, policies] : by) {
    for (const auto& [policy, bins] : policies) {
      for (const auto& [k, v] : bins) {
        double sa = 0, sf = 0;
        for (const auto& c : v) sa += c.allocated_pct, sf += c.frag_total_pct;
        out[trace].alloc[policy][k] = sa / v.size();
        out[trace].frag[policy][k] = sf / v.size();
      }
    }
  }
  return out;
}

// The authors' FGD allocation curve for `trace` (mean over their seeds), as
// a dashed series; none when their results do not cover the trace.
std::optional<Series> AuthorsFgd(const std::string& trace, const AuthorsResults* authors) {
  if (authors == nullptr) return std::nullopt;
  auto it = authors->alloc_curve.find({trace, "fgd"});
  if (it == authors->alloc_curve.end()) return std::nullopt;
  Series s{"fgd (authors)", {}};
  s.dashed = true;
  for (const auto& [arrived, values] : it->second) {
    double sum = 0;
    for (double v : values) sum += v;
    if (!values.empty()) s.points.push_back({arrived, sum / values.size()});
  }
  return s;
}

std::string FgdTrace(const std::string& trace, const FgdCurves& c, const AuthorsResults* authors) {
  std::map<int, double> best;  // arrived % -> the highest allocation of any policy
  for (const auto& [policy, bins] : c.alloc) {
    for (auto [k, v] : bins) best[k] = std::max(best.count(k) ? best[k] : -1e300, v);
  }
  std::string table =
      "<table><tr><th>policy</th><th>unallocated % at 100</th><th>minus the best</th></tr>";
  std::vector<Series> alloc, diff, frag;
  for (const auto& [policy, bins] : c.alloc) {
    Series a{policy, {}}, d{policy, {}}, fr{policy, {}};
    for (auto [k, v] : bins) {
      a.points.push_back({k, v});
      d.points.push_back({k, v - best[k]});
    }
    for (auto [k, v] : c.frag.at(policy)) fr.points.push_back({k, v});
    if (auto it = bins.find(100); it != bins.end()) {
      table += absl::StrFormat("<tr><td>%s</td><td>%.2f</td><td>%+.2f</td></tr>", Escape(policy),
                               100 - it->second, best[100] - it->second);
    }
    alloc.push_back(std::move(a)), diff.push_back(std::move(d)), frag.push_back(std::move(fr));
  }
  if (auto theirs = AuthorsFgd(trace, authors)) {
    theirs->color = static_cast<int>(alloc.size());
    alloc.push_back(std::move(*theirs));
  }
  std::string body = "<h2>trace " + Escape(trace) + "</h2>" + table + "</table>";
  body += Chart({"GPU allocation vs arrived workload", "arrived % of GPU capacity", "allocated %"},
                alloc);
  if (diff.size() > 1) {  // one policy is always the best: nothing to draw
    body += Chart({.title = "Allocation minus the best policy at each point",
                   .xlabel = "arrived % of GPU capacity",
                   .ylabel = "allocated % - best",
                   .note = "0 = the best policy there"},
                  diff);
  }
  body += Chart({.title = "GPU allocation, zoomed (arrived 80-130 %)",
                 .xlabel = "arrived % of GPU capacity",
                 .ylabel = "allocated %",
                 .y_from_zero = false,
                 .x_range = std::make_pair(80.0, 130.0)},
                alloc);
  body += Chart({"Fragmentation (of total GPU)", "arrived % of GPU capacity", "frag %"}, frag);
  return body;
}

// "-" where a metric is not defined (< 0) or not computed.
std::string Cell(bool defined, const std::string& text) {
  return "<td>" + (defined ? text : std::string("-")) + "</td>";
}

std::string ReplayTable(const std::vector<ReplayResult>& runs) {
  std::string t =
      "<table><tr><th>policy</th><th>load</th><th>jobs</th><th>avg JCT s</th><th>p50</th>"
      "<th>p95</th><th>p99</th><th>avg queue s</th><th>makespan s</th><th>util</th>"
      "<th>util while jobs wait</th><th>preemptions</th><th>lost GPU-s</th>"
      "<th>quota violations</th><th>time to guarantee, mean s</th><th>p95 s</th>"
      "<th>surplus fairness (Jain)</th><th>longest gang wait s</th></tr>";
  for (const ReplayResult& r : runs) {
    const bool ttg = r.share_metrics && r.guarantee_episodes > 0;
    t += absl::StrFormat(
        "<tr><td>%s</td><td>%.2f</td><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f</td>"
        "<td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.3f</td>",
        Escape(r.policy), r.load, r.jobs, r.avg_jct, r.p50_jct, r.p95_jct, r.p99_jct, r.avg_queue,
        r.makespan, r.utilisation);
    t += Cell(r.share_metrics && r.util_while_waiting >= 0,
              absl::StrFormat("%.3f", r.util_while_waiting));
    t += absl::StrFormat("<td>%d</td><td>%.0f</td><td>%d</td>", r.preemptions, r.lost_gpu_seconds,
                         r.quota_violations);
    t += Cell(ttg, absl::StrFormat("%.0f", r.avg_time_to_guarantee));
    t += Cell(ttg, absl::StrFormat("%.0f", r.p95_time_to_guarantee));
    t += Cell(r.share_metrics && r.surplus_jain >= 0, absl::StrFormat("%.3f", r.surplus_jain));
    t += Cell(r.gang_jobs > 0, absl::StrFormat("%.0f", r.max_gang_wait)) + "</tr>";
  }
  return t + "</table>";
}

// Per namespace: GPUs in use (solid) and its guarantee (dashed, same
// colour) over time.
std::string UsageChart(const ReplayResult& r) {
  std::vector<Series> series;
  std::map<std::string, int> color;
  for (const auto& [ns, st] : r.per_ns) color[ns] = static_cast<int>(color.size());
  for (const auto& [ns, st] : r.per_ns) {
    Series used{ns, {}}, guarantee{"", {}};
    used.color = guarantee.color = color[ns];
    guarantee.dashed = true;
    for (const TimelinePoint& p : r.timeline) {
      auto it = p.used_gpus.find(ns);
      used.points.push_back({p.t / 86400, it == p.used_gpus.end() ? 0 : it->second});
      guarantee.points.push_back({p.t / 86400, static_cast<double>(st.quota_gpus)});
    }
    series.push_back(std::move(used));
    series.push_back(std::move(guarantee));
  }
  return Chart({.title = "GPUs in use per namespace against its guarantee (" + r.policy + ")",
                .xlabel = "day",
                .ylabel = "GPUs",
                .note = "dashed: guarantee"},
               std::move(series));
}

std::string WaitChart(const ReplayResult& r) {
  std::map<std::string, Series> per;
  bool any = false;
  for (const TimelinePoint& p : r.timeline) {
    for (const auto& [ns, w] : p.queue_wait) {
      per[ns].name = ns;
      per[ns].points.push_back({p.t / 86400, w / 3600});
      any = any || w > 0;
    }
  }
  if (per.empty()) return "";
  if (!any) return "<p>No job waited at any sample: every job started when it was submitted.</p>";
  std::vector<Series> waits;
  for (auto& [ns, s] : per) waits.push_back(std::move(s));
  return Chart({"Mean wait of queued jobs per namespace (" + r.policy + ")", "day", "hours"},
               std::move(waits));
}

}  // namespace

std::string FgdReportHtml(const std::vector<FgdResult>& runs, const ReportParams& params,
                          const AuthorsResults* authors) {
  std::string body =
      "<p>fgd protocol: pods arrive one by one until 130 % of GPU capacity has been requested; "
      "curves are means over seeds.</p>";
  for (const auto& [trace, curves] : MeanCurves(runs)) body += FgdTrace(trace, curves, authors);
  return Page("gpusched simulate: placement (fgd protocol)", params, body);
}

std::string ReplayReportHtml(const std::vector<ReplayResult>& runs, const ReportParams& params) {
  std::string body = ReplayTable(runs);
  std::vector<Series> jct, queue, util;
  for (const ReplayResult& r : runs) {
    jct.push_back(Cdf(r.policy, r.jct_sorted, 3600, 60));
    queue.push_back(Cdf(r.policy, r.queue_sorted, 3600, 60));
    if (r.timeline.empty()) continue;
    Series u{r.policy, {}};
    u.color = static_cast<int>(jct.size()) - 1;
    for (const TimelinePoint& p : r.timeline)
      u.points.push_back({p.t / 86400, p.utilisation * 100});
    util.push_back(std::move(u));
  }
  body += "<h2>Every policy</h2>";
  body += Chart({.title = "Job completion time (CDF)",
                 .xlabel = "hours from submission to completion (log)",
                 .ylabel = "% of jobs",
                 .log_x = true},
                jct);
  body += Chart({.title = "Queueing delay (CDF)",
                 .xlabel = "hours waiting (log; under a minute drawn at 1 min)",
                 .ylabel = "% of jobs",
                 .log_x = true},
                queue);
  if (!util.empty()) {
    body += Chart(
        {.title = "GPU utilisation over time", .xlabel = "day", .ylabel = "% of GPUs allocated"},
        util);
  }
  for (const ReplayResult& r : runs) {
    if (r.timeline.empty()) continue;
    body += "<h2>" + Escape(r.policy) + "</h2>" + UsageChart(r) + WaitChart(r);
  }
  return Page("gpusched simulate: queueing (replay protocol)", params, body);
}

}  // namespace gpusched::sim
