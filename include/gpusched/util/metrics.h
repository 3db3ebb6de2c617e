// Metrics: a small Prometheus registry (text exposition format 0.0.4).
// Counters and histograms are created on first use and keyed by a label set;
// collectors add gauges computed at scrape time (cluster size, quota usage)
// so no gauge can go stale. Thread-safe: one mutex, held for a few hundred
// nanoseconds per update.
#ifndef GPUSCHED_UTIL_METRICS_H_
#define GPUSCHED_UTIL_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace gpusched {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Receives gauges from collectors at scrape time.
class GaugeWriter {
 public:
  explicit GaugeWriter(std::string* out) : out_(out) {}
  // Writes HELP/TYPE once per name, then the sample.
  void Gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
  // Writes HELP/TYPE histogram once per name, then name_bucket{le=...} for
  // each caller-given upper bound (cumulative counts, one per bound), +Inf
  // (= count), name_sum and name_count.
  void Histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const std::vector<double>& bounds, const std::vector<int64_t>& cumulative,
                 int64_t count, double sum);

 private:
  std::string* out_;
  std::vector<std::string> declared_;
};

class Metrics {
 public:
  Metrics();
  void Inc(std::string_view name, std::string_view help, const Labels& labels, int64_t by = 1);
  // Histogram in seconds with latency buckets 50us .. 10s.
  void Observe(std::string_view name, std::string_view help, const Labels& labels, double seconds);
  void AddCollector(std::function<void(GaugeWriter&)> collector);
  // Returns the exposition text.
  std::string Render() const;
  // Returns the counter's value (tests).
  int64_t CounterValue(std::string_view name, const Labels& labels) const;

 private:
  struct Histogram {
    std::vector<int64_t> buckets;
    int64_t count = 0;
    double sum = 0;
  };
  struct Family {
    std::string help;
    bool histogram = false;
    std::map<std::string, int64_t> counters;      // by rendered label set
    std::map<std::string, Histogram> histograms;  // by rendered label set
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Family, std::less<>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(GaugeWriter&)>> collectors_ ABSL_GUARDED_BY(mu_);
  std::vector<double> bounds_;
};

// Renders {a="x",b="y"} with escaping; "" for no labels.
std::string RenderLabels(const Labels& labels);

}  // namespace gpusched

#endif  // GPUSCHED_UTIL_METRICS_H_
