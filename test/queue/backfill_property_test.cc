// Property: with exact runtime estimates, no unit Backfill lets pass delays
// an earlier unit. On generated clusters (H100 nodes, running pods with
// known runtimes) and queues (one namespace, queueingStrategy Backfill):
// estimate, filter every pod in queue order, bind the pods that pass while
// an earlier one waits (the backfilled ones), estimate again at the same
// time: no earlier unit's estimated start is later than before, and each
// backfilled pod ends before every earlier unit's estimated start.
// With cohorts: two or three Backfill namespaces of one cohort, each
// guaranteed 0, 2 or 4 GPUs, the running pods another namespace's (within
// its guarantee), the waiting pods spread over the cohort and taken in the
// estimator's order across namespaces, every pod that passes bound where
// the estimate places it (fewest free GPUs): the same, and each backfilled
// pod that borrows ends, with the margin, by the estimated start of every
// earlier unit of the other namespaces that still waits.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <random>

#include "scheduler/queue/runtime_estimates.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::PodBuilder;
using testing::Harness;
using testing::Quota;
using testing::Quotas;

constexpr int64_t kNowS = 1000;  // the harness's clock

struct World {
  std::unique_ptr<Harness> h;
  std::vector<PodRequest> queue;              // in queue order
  std::map<std::string, int64_t> guaranteed;  // GPUs, per waiting namespace
};

int Pick(std::mt19937& rng, std::initializer_list<int> v) {
  return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
}

// One to three H100 nodes, partly used by pods of `ns` with known runtimes.
std::vector<NodeSpec> Cluster(std::mt19937& rng, const std::string& ns,
                              std::vector<PodRequest>* running) {
  auto pick = [&](std::initializer_list<int> v) { return Pick(rng, v); };
  const int nodes = std::uniform_int_distribution<int>(1, 3)(rng);
  std::vector<NodeSpec> specs;
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "h" + std::to_string(n);
    specs.push_back(Hgx8H100(node));
    int used = 0;
    for (int i = 0; used < 8 && i < 4; ++i) {
      const int gpus = pick({1, 2, 4});
      if (used + gpus > 8 || rng() % 4 == 0) break;
      const DeviceMask mask = ((DeviceMask{1} << gpus) - 1) << used;
      PodRequest p = PodBuilder("run-" + node + "-" + std::to_string(i), ns)
                         .Gpus(gpus)
                         .OnNode(node, mask)
                         .Build();
      p.start_unix = kNowS - std::uniform_int_distribution<int>(0, 600)(rng);
      p.expected_runtime = FormatRuntime(std::uniform_int_distribution<int>(11, 180)(rng) * 60);
      running->push_back(p);
      used += gpus;
    }
  }
  return specs;
}

PodRequest Waiting(std::mt19937& rng, const std::string& name, const std::string& ns,
                   int64_t created) {
  PodRequest p = PodBuilder(name, ns).Gpus(Pick(rng, {1, 2, 4, 8})).Created(created).Build();
  p.expected_runtime = FormatRuntime(std::uniform_int_distribution<int>(1, 120)(rng) * 60);
  return p;
}

World Generate(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<PodRequest> running;
  std::vector<NodeSpec> specs = Cluster(rng, "team-a", &running);
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(1000, 1000)}});
  o.quotas.namespaces["team-a"].queueing = QueueingStrategy::kBackfill;
  o.estimate_min_step_s = 0;  // exact simulation
  o.estimate_step_share = 0;
  World w{std::make_unique<Harness>(specs, running, o), {}};
  const int waiting = std::uniform_int_distribution<int>(2, 8)(rng);
  for (int i = 0; i < waiting; ++i) {
    w.queue.push_back(Waiting(rng, "w" + std::to_string(i), "team-a", i));
  }
  return w;
}

World GenerateCohort(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<PodRequest> running;
  std::vector<NodeSpec> specs = Cluster(rng, "team-c", &running);
  QueueOptions o;
  o.quotas = Quotas({{"team-c", Quota(24, 24)}});
  std::map<std::string, int64_t> guaranteed;
  const int namespaces = std::uniform_int_distribution<int>(2, 3)(rng);
  std::vector<std::string> names;
  for (int n = 0; n < namespaces; ++n) {
    const std::string ns = std::string("ns-") + static_cast<char>('a' + n);
    names.push_back(ns);
    guaranteed[ns] = Pick(rng, {0, 0, 2, 4});
    o.quotas.namespaces[ns] = Quota(guaranteed[ns], 1000, "research");
    o.quotas.namespaces[ns].queueing = QueueingStrategy::kBackfill;
  }
  o.estimate_min_step_s = 0;  // exact simulation
  o.estimate_step_share = 0;
  World w{std::make_unique<Harness>(specs, running, o), {}, guaranteed};
  const int waiting = std::uniform_int_distribution<int>(3, 9)(rng);
  for (int i = 0; i < waiting; ++i) {
    const std::string& ns = names[std::uniform_int_distribution<size_t>(0, names.size() - 1)(rng)];
    w.queue.push_back(Waiting(rng, "w" + std::to_string(i), ns, i));
  }
  return w;
}

TEST(BackfillProperty, NoEarlierUnitIsDelayedByABackfilledOne) {
  int backfilled_total = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    World w = Generate(seed);
    Harness& h = *w.h;
    for (const PodRequest& p : w.queue) h.Filter(p);  // all asked, all waiting
    h.queue->RefreshEstimates();
    std::map<std::string, int64_t> before;
    for (const PodRequest& p : w.queue) {
      auto e = h.queue->EstimateOf(p.uid);
      ASSERT_TRUE(e.has_value());
      before[p.uid] = e->start.start_s;
    }
    std::vector<size_t> backfilled;
    bool earlier_waits = false;
    for (size_t i = 0; i < w.queue.size(); ++i) {
      const PodRequest& p = w.queue[i];
      std::vector<std::string> nodes = h.Filter(p);
      if (nodes.empty()) {
        earlier_waits = true;
        continue;
      }
      if (!earlier_waits) continue;  // starts now in both worlds: not bound here
      ASSERT_EQ(h.Bind(p, nodes.front()), "");
      backfilled.push_back(i);
      const int64_t end = kNowS + *ParseRuntime(p.expected_runtime);
      for (size_t j = 0; j < i; ++j) {
        if (before[w.queue[j].uid] == kNowS) continue;  // starts now: not passed
        EXPECT_LT(end, before[w.queue[j].uid]) << p.name << " passed " << w.queue[j].name;
      }
    }
    if (backfilled.empty()) continue;
    backfilled_total += static_cast<int>(backfilled.size());
    h.queue->RefreshEstimates();
    for (size_t j = 0; j < backfilled.back(); ++j) {
      const PodRequest& u = w.queue[j];
      auto e = h.queue->EstimateOf(u.uid);
      if (!e.has_value()) continue;  // the backfilled pod itself, bound
      EXPECT_LE(e->start.start_s, before[u.uid]) << u.name << " delayed";
    }
  }
  // The generator must exercise the rule.
  EXPECT_GT(backfilled_total, 30);
}

// A world's waiting pods in the estimator's order (StartEstimate::order),
// with their estimated starts, after one refresh.
std::vector<std::pair<PodRequest, int64_t>> InEstimatorOrder(World& w) {
  std::vector<std::pair<int64_t, std::pair<PodRequest, int64_t>>> by_order;
  for (const PodRequest& p : w.queue) {
    auto e = w.h->queue->EstimateOf(p.uid);
    if (!e.has_value()) continue;
    by_order.push_back({e->start.order, {p, e->start.start_s}});
  }
  std::sort(by_order.begin(), by_order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<PodRequest, int64_t>> out;
  for (auto& [order, pod] : by_order) out.push_back(std::move(pod));
  return out;
}

// Of `nodes` (names passing filter), the one the estimator would place on:
// the fewest wholly free GPUs, then the first.
std::string BestFit(Harness& h, const std::vector<std::string>& nodes) {
  auto snapshot = h.state().Snapshot();
  std::string best;
  int best_free = 1 << 30;
  for (const std::string& name : nodes) {
    const NodeInfo* n = snapshot->Find(name);
    const int free = std::popcount(n->whole_free & n->healthy);
    if (free < best_free) best = name, best_free = free;
  }
  return best;
}

TEST(BackfillProperty, NoEarlierUnitOfTheCohortIsDelayedByABackfilledOne) {
  int backfilled_total = 0, across_total = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    World w = GenerateCohort(seed);
    Harness& h = *w.h;
    for (const PodRequest& p : w.queue) h.Filter(p);  // all asked, all waiting
    h.queue->RefreshEstimates();
    const std::vector<std::pair<PodRequest, int64_t>> queue = InEstimatorOrder(w);
    ASSERT_EQ(queue.size(), w.queue.size());
    std::map<std::string, int64_t> used;  // GPUs bound here, per namespace
    std::vector<bool> bound(queue.size());
    bool earlier_waits = false;
    size_t last = 0;
    for (size_t i = 0; i < queue.size(); ++i) {
      const PodRequest& p = queue[i].first;
      std::vector<std::string> nodes = h.Filter(p);
      if (nodes.empty()) {
        earlier_waits = true;
        continue;
      }
      // Every admitted pod is bound, where the estimate placed it: across
      // namespaces, one within its guarantee starts now in both worlds.
      ASSERT_EQ(h.Bind(p, BestFit(h, nodes)), "");
      bound[i] = true;
      const bool borrows = used[p.ns] + p.gpu.count > w.guaranteed[p.ns];
      used[p.ns] += p.gpu.count;
      if (!earlier_waits) continue;  // nobody passed
      last = i;
      ++backfilled_total;
      const int64_t runtime = *ParseRuntime(p.expected_runtime);
      const int64_t end = kNowS + runtime + std::max<int64_t>(60, runtime / 10);
      for (size_t j = 0; j < i; ++j) {
        const auto& [u, start] = queue[j];
        if (bound[j] || start < 0) continue;
        if (u.ns == p.ns) {
          if (start != kNowS) {
            EXPECT_LE(end, start) << p.name << " passed " << u.name;
          }
        } else if (borrows) {
          EXPECT_LE(end, start) << p.name << " (" << p.ns << ") passed " << u.name << " (" << u.ns
                                << ")";
          ++across_total;
        }
      }
    }
    if (last == 0) continue;
    h.queue->RefreshEstimates();
    for (size_t j = 0; j < last; ++j) {
      const auto& [u, start] = queue[j];
      if (bound[j] || start < 0) continue;  // running now, or never estimated
      auto e = h.queue->EstimateOf(u.uid);
      ASSERT_TRUE(e.has_value());
      EXPECT_LE(e->start.start_s, start) << u.name << " (" << u.ns << ") delayed";
    }
  }
  // The generator must exercise the rule, across namespaces too.
  EXPECT_GT(backfilled_total, 30);
  EXPECT_GT(across_total, 10);
}

}  // namespace
}  // namespace gpusched::queue
