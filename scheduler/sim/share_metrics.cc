#include "scheduler/sim/share_metrics.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace gpusched::sim {
namespace {

constexpr double kEps = 1e-9;

// What a namespace can take: its demand, at most its limit.
double Cap(const ShareSpec& s, double demand) {
  return std::max(0.0, std::min(demand, static_cast<double>(s.limit)));
}

// Gives `left` GPUs to `active` in proportion to weight, none beyond
// cap[i]; a namespace that fills up leaves its part to the others.
void WaterFill(const std::vector<ShareSpec>& ns, const std::vector<double>& cap, double left,
               std::vector<int> active, std::vector<double>* share) {
  while (left > kEps && !active.empty()) {
    double wsum = 0;
    for (int i : active) wsum += ns[i].weight;
    if (wsum <= 0) return;
    std::vector<int> rest;
    double given = 0;
    for (int i : active) {
      const double part = left * ns[i].weight / wsum;
      const double room = cap[i] - (*share)[i];
      if (room <= part) {
        (*share)[i] = cap[i];
        given += room;
      } else {
        rest.push_back(i);
      }
    }
    if (rest.size() == active.size()) {  // nobody filled up: the level is final
      for (int i : rest) (*share)[i] += left * ns[i].weight / wsum;
      return;
    }
    left -= given;
    active = std::move(rest);
  }
}

}  // namespace

std::vector<double> WeightedFairShares(const std::vector<ShareSpec>& ns,
                                       const std::vector<double>& demand, double capacity) {
  const size_t n = ns.size();
  std::vector<double> cap(n), share(n);
  double base = 0;
  for (size_t i = 0; i < n; ++i) {
    cap[i] = Cap(ns[i], demand[i]);
    share[i] = std::min(static_cast<double>(std::max<int64_t>(0, ns[i].guarantee)), cap[i]);
    base += share[i];
  }
  if (base >= capacity) {  // guarantees over-promised: scaled down alike
    const double f = base > 0 ? std::max(0.0, capacity) / base : 0;
    for (double& s : share) s *= f;
    return share;
  }
  std::vector<int> active;
  for (size_t i = 0; i < n; ++i) {
    if (cap[i] > share[i] + kEps && ns[i].weight > 0) active.push_back(static_cast<int>(i));
  }
  WaterFill(ns, cap, capacity - base, std::move(active), &share);
  return share;
}

double JainIndex(const std::vector<double>& x) {
  double sum = 0, sq = 0;
  for (double v : x) sum += v, sq += v * v;
  if (x.empty() || sq <= 0) return -1;
  return sum * sum / (static_cast<double>(x.size()) * sq);
}

double SurplusJain(const std::vector<ShareSpec>& ns, const std::vector<int64_t>& used,
                   const std::vector<int64_t>& waiting, double capacity) {
  std::vector<double> demand(ns.size());
  for (size_t i = 0; i < ns.size(); ++i) demand[i] = static_cast<double>(used[i] + waiting[i]);
  const std::vector<double> fair = WeightedFairShares(ns, demand, capacity);
  std::vector<double> x;
  for (size_t i = 0; i < ns.size(); ++i) {
    const double base =
        std::min(static_cast<double>(std::max<int64_t>(0, ns[i].guarantee)), Cap(ns[i], demand[i]));
    if (fair[i] <= base + kEps) continue;  // not entitled to any surplus
    x.push_back(std::max(0.0, static_cast<double>(used[i]) - base) / (fair[i] - base));
  }
  return x.size() < 2 ? -1 : JainIndex(x);
}

ShareMetrics::ShareMetrics(std::vector<ShareSpec> ns, int64_t capacity)
    : ns_(std::move(ns)),
      capacity_(capacity),
      used_(ns_.size(), 0),
      waiting_(ns_.size(), 0),
      owed_since_(ns_.size(), -1) {}

void ShareMetrics::CloseInterval(double t) {
  const double dt = t - last_t_;
  if (dt <= 0) return;
  const int64_t waiting = std::accumulate(waiting_.begin(), waiting_.end(), int64_t{0});
  if (waiting > 0) {
    waiting_seconds_ += dt;
    used_while_waiting_ +=
        static_cast<double>(std::accumulate(used_.begin(), used_.end(), int64_t{0})) * dt;
  }
  if (jain_now_ >= 0) {
    jain_seconds_ += dt;
    jain_sum_ += jain_now_ * dt;
  }
}

void ShareMetrics::Observe(double t, const std::vector<int64_t>& used,
                           const std::vector<int64_t>& waiting) {
  if (started_) CloseInterval(t);
  started_ = true;
  last_t_ = t;
  used_ = used;
  waiting_ = waiting;
  jain_now_ = SurplusJain(ns_, used_, waiting_, static_cast<double>(capacity_));
  for (size_t n = 0; n < ns_.size(); ++n) {
    const bool owed = used_[n] < ns_[n].guarantee && waiting_[n] > 0;
    if (owed && owed_since_[n] < 0) owed_since_[n] = t;
    if (!owed && owed_since_[n] >= 0) {
      guarantee_waits_.push_back(t - owed_since_[n]);
      owed_since_[n] = -1;
    }
  }
}

void ShareMetrics::Finish(double t) {
  if (started_) CloseInterval(t);
  last_t_ = t;
  for (double& since : owed_since_) {
    if (since >= 0) guarantee_waits_.push_back(std::max(0.0, t - since));
    since = -1;
  }
}

double ShareMetrics::UtilisationWhileWaiting() const {
  if (waiting_seconds_ <= 0 || capacity_ <= 0) return -1;
  return used_while_waiting_ / (static_cast<double>(capacity_) * waiting_seconds_);
}

double ShareMetrics::MeanSurplusJain() const {
  return jain_seconds_ > 0 ? jain_sum_ / jain_seconds_ : -1;
}

}  // namespace gpusched::sim
