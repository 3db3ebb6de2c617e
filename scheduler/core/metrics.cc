#include "gpusched/util/metrics.h"

#include <algorithm>
#include <cstdio>

#include "gpusched/util/strings.h"

namespace gpusched {
namespace {

std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Inserts le="..." into a rendered label set.
std::string WithLe(const std::string& labels, std::string_view le) {
  if (labels.empty()) return StrCat("{le=\"", le, "\"}");
  return StrCat(labels.substr(0, labels.size() - 1), ",le=\"", le, "\"}");
}

}  // namespace

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    StrAppend(&out, i ? "," : "", labels[i].first, "=\"", Escape(labels[i].second), "\"");
  }
  out += "}";
  return out;
}

void GaugeWriter::Gauge(std::string_view name, std::string_view help, const Labels& labels,
                        double value) {
  if (std::find(declared_.begin(), declared_.end(), name) == declared_.end()) {
    declared_.emplace_back(name);
    StrAppend(out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " gauge\n");
  }
  StrAppend(out_, name, RenderLabels(labels), " ", Num(value), "\n");
}

void GaugeWriter::Histogram(std::string_view name, std::string_view help, const Labels& labels,
                            const std::vector<double>& bounds,
                            const std::vector<int64_t>& cumulative, int64_t count, double sum) {
  if (std::find(declared_.begin(), declared_.end(), name) == declared_.end()) {
    declared_.emplace_back(name);
    StrAppend(out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
  }
  const std::string rendered = RenderLabels(labels);
  for (size_t i = 0; i < bounds.size() && i < cumulative.size(); ++i) {
    StrAppend(out_, name, "_bucket", WithLe(rendered, Num(bounds[i])), " ", cumulative[i], "\n");
  }
  StrAppend(out_, name, "_bucket", WithLe(rendered, "+Inf"), " ", count, "\n");
  StrAppend(out_, name, "_sum", rendered, " ", Num(sum), "\n");
  StrAppend(out_, name, "_count", rendered, " ", count, "\n");
}

Metrics::Metrics()
    : bounds_{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
              0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10} {}

void Metrics::Inc(std::string_view name, std::string_view help, const Labels& labels, int64_t by) {
  std::string key = RenderLabels(labels);
  absl::MutexLock l(&mu_);
  auto it = families_.find(name);
  if (it == families_.end())
    it = families_.emplace(std::string(name), Family{std::string(help)}).first;
  it->second.counters[key] += by;
}

void Metrics::Observe(std::string_view name, std::string_view help, const Labels& labels,
                      double seconds) {
  std::string key = RenderLabels(labels);
  absl::MutexLock l(&mu_);
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(std::string(name), Family{std::string(help), true}).first;
  }
  Histogram& h = it->second.histograms[key];
  if (h.buckets.empty()) h.buckets.assign(bounds_.size(), 0);
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (seconds <= bounds_[i]) ++h.buckets[i];
  }
  ++h.count;
  h.sum += seconds;
}

void Metrics::AddCollector(std::function<void(GaugeWriter&)> collector) {
  absl::MutexLock l(&mu_);
  collectors_.push_back(std::move(collector));
}

int64_t Metrics::CounterValue(std::string_view name, const Labels& labels) const {
  absl::MutexLock l(&mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto c = it->second.counters.find(RenderLabels(labels));
  return c == it->second.counters.end() ? 0 : c->second;
}

std::string Metrics::Render() const {
  std::string out;
  std::vector<std::function<void(GaugeWriter&)>> collectors;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [name, f] : families_) {
      StrAppend(&out, "# HELP ", name, " ", f.help, "\n# TYPE ", name,
                f.histogram ? " histogram\n" : " counter\n");
      for (const auto& [labels, v] : f.counters) StrAppend(&out, name, labels, " ", v, "\n");
      for (const auto& [labels, h] : f.histograms) {
        for (size_t i = 0; i < bounds_.size(); ++i) {
          StrAppend(&out, name, "_bucket", WithLe(labels, Num(bounds_[i])), " ", h.buckets[i],
                    "\n");
        }
        StrAppend(&out, name, "_bucket", WithLe(labels, "+Inf"), " ", h.count, "\n");
        StrAppend(&out, name, "_sum", labels, " ", Num(h.sum), "\n");
        StrAppend(&out, name, "_count", labels, " ", h.count, "\n");
      }
    }
    collectors = collectors_;
  }
  GaugeWriter w(&out);
  for (const auto& c : collectors) c(w);
  return out;
}

}  // namespace gpusched
