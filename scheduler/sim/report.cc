#include "scheduler/sim/report.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "scheduler/sim/replay.h"

namespace gpusched::sim {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

// A line chart as inline SVG.
std::string Chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                  const std::vector<Series>& series) {
  double x0 = 1e300, x1 = -1e300, y0 = 0, y1 = -1e300;
  for (const auto& s : series) {
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const double W = 640, H = 320, L = 60, R = 160, T = 30, B = 40;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::string svg = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-size='11'>"
      "<text x='%d' y='18' font-size='14'>%s</text>"
      "<line x1='%f' y1='%f' x2='%f' y2='%f' stroke='#000'/>"
      "<line x1='%f' y1='%f' x2='%f' y2='%f' stroke='#000'/>"
      "<text x='%f' y='%f'>%s</text><text x='4' y='%f'>%s</text>",
      static_cast<int>(W), static_cast<int>(H), static_cast<int>(L), Escape(title), L, H - B, W - R,
      H - B, L, T, L, H - B, (W - R) / 2, H - 6, Escape(xlabel), T - 4, Escape(ylabel));
  for (int k = 0; k <= 4; ++k) {
    const double yv = y0 + (y1 - y0) * k / 4, xv = x0 + (x1 - x0) * k / 4;
    svg += absl::StrFormat("<text x='4' y='%f'>%.4g</text><text x='%f' y='%f'>%.4g</text>",
                           py(yv) + 4, yv, px(xv) - 10, H - B + 14, xv);
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % 10];
    std::string pts;
    for (auto [x, y] : series[i].points) pts += absl::StrFormat("%.1f,%.1f ", px(x), py(y));
    svg += absl::StrFormat("<polyline fill='none' stroke='%s' stroke-width='1.5' points='%s'/>",
                           color, pts);
    svg += absl::StrFormat("<text x='%f' y='%f' fill='%s'>%s</text>", W - R + 8, T + 14.0 * i + 10,
                           color, Escape(series[i].name));
  }
  return svg + "</svg>\n";
}

std::string Page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + Escape(title) +
         "</title><style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body><h1>" +
         Escape(title) + "</h1>" + body + "</body></html>\n";
}

}  // namespace

std::string FgdReportHtml(const std::vector<FgdResult>& runs) {
  // Mean curve per (trace, policy).
  std::map<std::string, std::map<std::string, std::map<int, std::vector<CurvePoint>>>> by;
  for (const FgdResult& r : runs) {
    for (const CurvePoint& c : r.curve) by[r.trace][r.policy][c.arrived_pct].push_back(c);
  }
  std::string body =
      "<p>fgd protocol: pods arrive one by one until 130 % of GPU capacity has been requested; "
      "curves are means over seeds.</p>";
  for (const auto& [trace, policies] : by) {
    std::vector<Series> alloc, frag, unalloc;
    std::string table = "<table><tr><th>policy</th><th>unallocated % at 100</th></tr>";
    for (const auto& [policy, bins] : policies) {
      Series a{policy, {}}, f{policy, {}};
      for (const auto& [k, v] : bins) {
        double sa = 0, sf = 0;
        for (const auto& c : v) sa += c.allocated_pct, sf += c.frag_total_pct;
        a.points.push_back({k, sa / v.size()});
        f.points.push_back({k, sf / v.size()});
        if (k == 100)
          table +=
              absl::StrFormat("<tr><td>%s</td><td>%.2f</td></tr>", policy, 100 - sa / v.size());
      }
      alloc.push_back(std::move(a));
      frag.push_back(std::move(f));
    }
    body += "<h2>trace " + Escape(trace) + "</h2>" + table + "</table>";
    body += Chart("GPU allocation vs arrived workload", "arrived % of GPU capacity", "allocated %",
                  alloc);
    body += Chart("Fragmentation (of total GPU)", "arrived % of GPU capacity", "frag %", frag);
  }
  return Page("gpusched simulate: placement (fgd protocol)", body);
}

std::string ReplayReportHtml(const std::vector<ReplayResult>& runs) {
  std::string body =
      "<table><tr><th>policy</th><th>load</th><th>jobs</th><th>avg JCT s</th><th>p50</th>"
      "<th>p95</th><th>p99</th><th>avg queue s</th><th>makespan s</th><th>util</th>"
      "<th>preemptions</th><th>lost GPU-s</th><th>quota violations</th></tr>";
  for (const ReplayResult& r : runs) {
    body += absl::StrFormat(
        "<tr><td>%s</td><td>%.1f</td><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f</td>"
        "<td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.3f</td><td>%d</td><td>%.0f</td>"
        "<td>%d</td></tr>",
        r.policy, r.load, r.jobs, r.avg_jct, r.p50_jct, r.p95_jct, r.p99_jct, r.avg_queue,
        r.makespan, r.utilisation, r.preemptions, r.lost_gpu_seconds, r.quota_violations);
  }
  body += "</table>";
  for (const ReplayResult& r : runs) {
    if (r.timeline.empty()) continue;
    std::vector<Series> waits;
    Series util{"utilisation %", {}};
    std::map<std::string, Series> per;
    for (const TimelinePoint& p : r.timeline) {
      util.points.push_back({p.t / 86400, p.utilisation * 100});
      for (const auto& [ns, w] : p.queue_wait) {
        per[ns].name = ns;
        per[ns].points.push_back({p.t / 86400, w / 3600});
      }
    }
    for (auto& [ns, s] : per) waits.push_back(std::move(s));
    body += "<h2>" + Escape(r.policy) + "</h2>";
    body += Chart("Mean wait of queued jobs per namespace", "day", "hours", waits);
    body += Chart("GPU utilisation", "day", "%", {util});
  }
  return Page("gpusched simulate: queueing (replay protocol)", body);
}

}  // namespace gpusched::sim
