// Property: with exact runtime estimates, no unit Backfill lets pass delays
// an earlier unit. On generated clusters (H100 nodes, running pods with
// known runtimes) and queues (one namespace, queueingStrategy Backfill):
// estimate, filter every pod in queue order, bind the pods that pass while
// an earlier one waits (the backfilled ones), estimate again at the same
// time: no earlier unit's estimated start is later than before, and each
// backfilled pod ends before every earlier unit's estimated start.
#include <gtest/gtest.h>

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
  std::vector<PodRequest> queue;  // in queue order
};

World Generate(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](std::initializer_list<int> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  const int nodes = std::uniform_int_distribution<int>(1, 3)(rng);
  std::vector<NodeSpec> specs;
  std::vector<PodRequest> running;
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "h" + std::to_string(n);
    specs.push_back(Hgx8H100(node));
    int used = 0;
    for (int i = 0; used < 8 && i < 4; ++i) {
      const int gpus = pick({1, 2, 4});
      if (used + gpus > 8 || rng() % 4 == 0) break;
      const DeviceMask mask = ((DeviceMask{1} << gpus) - 1) << used;
      PodRequest p = PodBuilder("run-" + node + "-" + std::to_string(i), "team-a")
                         .Gpus(gpus)
                         .OnNode(node, mask)
                         .Build();
      p.start_unix = kNowS - std::uniform_int_distribution<int>(0, 600)(rng);
      p.expected_runtime = FormatRuntime(std::uniform_int_distribution<int>(11, 180)(rng) * 60);
      running.push_back(p);
      used += gpus;
    }
  }
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(1000, 1000)}});
  o.quotas.namespaces["team-a"].queueing = QueueingStrategy::kBackfill;
  o.estimate_min_step_s = 0;  // exact simulation
  o.estimate_step_share = 0;
  World w{std::make_unique<Harness>(specs, running, o), {}};
  const int waiting = std::uniform_int_distribution<int>(2, 8)(rng);
  for (int i = 0; i < waiting; ++i) {
    PodRequest p =
        PodBuilder("w" + std::to_string(i), "team-a").Gpus(pick({1, 2, 4, 8})).Created(i).Build();
    p.expected_runtime = FormatRuntime(std::uniform_int_distribution<int>(1, 120)(rng) * 60);
    w.queue.push_back(p);
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

}  // namespace
}  // namespace gpusched::queue
