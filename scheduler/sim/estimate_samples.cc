#include "scheduler/sim/estimate_samples.h"

#include <algorithm>
#include <cmath>

namespace gpusched::sim {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

void EstimateSampler::Offer(int unit, double t, double since, int32_t position, double predicted) {
  if (predicted < 0) return;
  std::vector<Sample>& s = open_[unit];
  const auto hour = static_cast<size_t>(std::max(0.0, std::floor((t - since) / 3600)));
  if (s.size() > hour) return;  // sampled at this hour of waiting already
  const double mean = runtimes_ > 0 ? runtime_sum_ / static_cast<double>(runtimes_) : 0;
  s.push_back({t, predicted, t + position * mean});
}

void EstimateSampler::Started(int unit, double t) {
  auto it = open_.find(unit);
  if (it == open_.end()) return;
  for (const Sample& s : it->second) {
    const double ahead = std::max(t - s.at, 1.0);  // the wait still ahead at the sample
    const double err = std::abs(s.predicted - t), naive = std::abs(s.naive - t);
    errors_.push_back(err);
    naive_errors_.push_back(naive);
    within_ += err <= 0.25 * ahead ? 1 : 0;
    naive_within_ += naive <= 0.25 * ahead ? 1 : 0;
    ++samples_;
  }
  open_.erase(it);
}

EstimateAccuracy EstimateSampler::Summary() const {
  EstimateAccuracy a;
  a.samples = samples_;
  if (samples_ == 0) return a;
  const auto n = static_cast<double>(samples_);
  a.median_abs_error_s = Median(errors_);
  a.within_25pct = static_cast<double>(within_) / n;
  a.naive_median_abs_error_s = Median(naive_errors_);
  a.naive_within_25pct = static_cast<double>(naive_within_) / n;
  return a;
}

}  // namespace gpusched::sim
