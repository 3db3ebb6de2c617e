// The simulator's topology comparison: the cluster generator's labels and
// domains, the Philly-derived workload, the Kueue-TAS-like placement on hand-computed cases, and
// small end-to-end replays.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "gtest/gtest.h"
#include "scheduler/sim/kueue_tas.h"
#include "scheduler/sim/topo_cluster.h"
#include "scheduler/sim/topo_compare.h"
#include "scheduler/sim/topo_slowdown.h"
#include "scheduler/sim/topo_workload.h"

namespace gpusched::sim {
namespace {

std::map<std::string, std::string> Labels(const TopoCluster& c, int node) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : c.labels[node]) out[k] = v;
  return out;
}

TEST(TopoCluster, RacksLabelBlockRackAndHostname) {
  auto shape = ParseTopoShape("racks:2x3x2");
  ASSERT_TRUE(shape.ok()) << shape.status();
  const TopoCluster c = MakeTopoCluster(*shape);
  ASSERT_EQ(c.nodes.size(), 12u);
  EXPECT_EQ(c.levels, (std::vector<std::string>{kBlockLabel, kRackLabel, kHostnameLabel}));
  EXPECT_EQ(c.domain_count, (std::vector<int>{2, 6, 12}));
  EXPECT_EQ(c.Capacity(), 96);
  EXPECT_EQ(c.DomainGpus(0), 48);
  EXPECT_EQ(c.DomainGpus(1), 16);
  // Node 9: block 1, its second rack (rack 4 of 6), second node.
  const NodeSpec& n = c.nodes[9];
  EXPECT_EQ(n.gpu_count, 8);
  const auto l = Labels(c, 9);
  EXPECT_EQ(l.at(kBlockLabel), "block-1");
  EXPECT_EQ(l.at(kRackLabel), "block-1-rack-1");
  EXPECT_EQ(l.at(kHostnameLabel), n.name);
  EXPECT_EQ(c.domain_of[0][9], 1);
  EXPECT_EQ(c.domain_of[1][9], 4);
  EXPECT_EQ(c.domain_of[2][9], 9);
  // Every rack lies in one block; rack values are unique cluster-wide.
  std::map<std::string, std::set<std::string>> blocks_of_rack;
  std::set<std::string> hosts;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const auto li = Labels(c, static_cast<int>(i));
    blocks_of_rack[li.at(kRackLabel)].insert(li.at(kBlockLabel));
    hosts.insert(li.at(kHostnameLabel));
  }
  EXPECT_EQ(blocks_of_rack.size(), 6u);
  for (const auto& [rack, blocks] : blocks_of_rack) EXPECT_EQ(blocks.size(), 1u) << rack;
  EXPECT_EQ(hosts.size(), 12u);
}

TEST(TopoCluster, CliquesOfFourGpuNodes) {
  auto shape = ParseTopoShape("cliques:3");
  ASSERT_TRUE(shape.ok()) << shape.status();
  const TopoCluster c = MakeTopoCluster(*shape);
  ASSERT_EQ(c.nodes.size(), 54u);  // 3 x 18
  EXPECT_EQ(c.levels, (std::vector<std::string>{kCliqueLabel, kHostnameLabel}));
  EXPECT_EQ(c.DomainGpus(0), 72);
  std::map<std::string, int> per_clique;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    EXPECT_EQ(c.nodes[i].gpu_count, 4);
    ++per_clique[Labels(c, static_cast<int>(i)).at(kCliqueLabel)];
  }
  ASSERT_EQ(per_clique.size(), 3u);
  for (const auto& [v, n] : per_clique) {
    EXPECT_EQ(n, 18) << v;
    // GPU Feature Discovery's form: <cluster UUID>.<clique id>.
    EXPECT_NE(v.find('.'), std::string::npos) << v;
  }
  EXPECT_EQ(Labels(c, 20).at(kCliqueLabel).back(), '1');
  auto small = ParseTopoShape("cliques:2x3");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(MakeTopoCluster(*small).nodes.size(), 6u);
}

TEST(TopoCluster, BadShapesNameTheFlag) {
  for (const char* bad :
       {"racks:2x4", "racks:2x0x4", "cliques:", "cliques:1x2x3", "torus:4", "racks:axbxc"}) {
    auto s = ParseTopoShape(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("--topology"), std::string::npos) << s.status();
  }
}

TEST(TopoCluster, DomainsSpannedAndWholeDomains) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));
  EXPECT_EQ(c.DomainsSpanned(1, {0, 1}), 1);
  EXPECT_EQ(c.DomainsSpanned(1, {0, 2}), 2);
  EXPECT_EQ(c.DomainsSpanned(0, {0, 2}), 1);
  EXPECT_EQ(c.DomainsSpanned(0, {0, 7}), 2);
  std::vector<int> free(8, 8);
  EXPECT_EQ(c.WholeDomains(1, free), 4);
  free[5] = 7;  // one GPU used in rack 2 (block 1)
  EXPECT_EQ(c.WholeDomains(1, free), 3);
  EXPECT_EQ(c.WholeDomains(0, free), 1);
}

// One block of three racks of two 8-GPU nodes. Free GPUs: rack 0 = nodes
// 0,1 with 8 and 8; rack 1 = nodes 2,3 with 8 and 0; rack 2 = nodes 4,5
// with 4 and 4.
class KueueTasTest : public ::testing::Test {
 protected:
  TopoCluster c_ = MakeTopoCluster(*ParseTopoShape("racks:1x3x2"));
  std::vector<int> free_ = {8, 8, 8, 0, 4, 4};
};

TEST_F(KueueTasTest, RequiredRackTakesTheBestFitRack) {
  // 8-GPU pods per rack: 2, 1, 0. One pod: the smallest rack that holds it
  // is rack 1 (node 2), so rack 0 stays whole.
  auto one = KueueTasPlace(c_, free_, {.pods = 1, .per_pod = 8, .level = 1, .required = true});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(*one, (std::vector<std::pair<int, int>>{{2, 1}}));
  // 4-GPU pods per rack: 4, 2, 2. Two pods: racks 1 and 2 tie at 2; the
  // first in order (rack 1) is taken, both on node 2.
  auto two = KueueTasPlace(c_, free_, {.pods = 2, .per_pod = 4, .level = 1, .required = true});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(*two, (std::vector<std::pair<int, int>>{{2, 2}}));
  // Three 8-GPU pods fit no rack: a required request waits.
  EXPECT_FALSE(KueueTasPlace(c_, free_, {.pods = 3, .per_pod = 8, .level = 1, .required = true}));
}

TEST_F(KueueTasTest, PreferredRackFallsBackToTheFewestRacksOfTheBlock) {
  // Three 8-GPU pods, rack preferred: no rack holds them; the block does
  // (2 + 1 + 0). Racks largest first: rack 0 gives 2, then the best fit for
  // the last pod is rack 1.
  auto p = KueueTasPlace(c_, free_, {.pods = 3, .per_pod = 8, .level = 1, .required = false});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (std::vector<std::pair<int, int>>{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_FALSE(KueueTasPlace(c_, free_, {.pods = 5, .per_pod = 8, .level = 1, .required = false}));
}

TEST_F(KueueTasTest, ImpliedSinglePodGoesToTheNodeWithLeastRoom) {
  // 4-GPU pods per node: 2, 2, 2, 0, 1, 1: the first node with the least
  // room that fits is node 4.
  auto p = KueueTasPlace(c_, free_, {.pods = 1, .per_pod = 4});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (std::vector<std::pair<int, int>>{{4, 1}}));
  auto eight = KueueTasPlace(c_, free_, {.pods = 1, .per_pod = 8});
  ASSERT_TRUE(eight.has_value());
  EXPECT_EQ(*eight, (std::vector<std::pair<int, int>>{{0, 1}}));
}

std::vector<Job> PhillyLike() {
  std::vector<Job> out;
  const int gpus[] = {1, 1, 2, 4, 8, 16, 1, 32, 8, 1};
  for (int i = 0; i < 200; ++i) {
    Job j;
    j.id = std::to_string(i);
    j.gpus_per_pod = gpus[i % 10];
    j.submit = 37.0 * i + (i % 7) * 11;
    j.duration = 600 + 97 * (i % 13);
    out.push_back(j);
  }
  return out;
}

TEST(TopoWorkload, SeededShapesLevelsAndOfferedLoad) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));  // racks of 16 GPUs
  TopoWorkloadOptions o{.seed = 7, .jobs = 300, .load = 0.6, .gang_share = 0.4};
  auto a = MakeTopoWorkload(PhillyLike(), c, o);
  auto b = MakeTopoWorkload(PhillyLike(), c, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 300u);
  double work = 0;
  int gangs = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    const TopoJob& j = (*a)[i];
    EXPECT_EQ(j.submit, (*b)[i].submit);
    EXPECT_EQ(j.gpus(), (*b)[i].gpus());
    work += j.duration * static_cast<double>(j.gpus());
    if (!j.gang) {
      EXPECT_LE(j.gpus(), 8);
      EXPECT_TRUE(j.level.empty());
      continue;
    }
    ++gangs;
    EXPECT_GT(j.gpus(), 8);
    EXPECT_EQ(j.gpus_per_pod, 8);
    // 16 GPUs fit a rack; 32 only a block (both may be required).
    EXPECT_EQ(j.level, j.gpus() <= 16 ? kRackLabel : kBlockLabel) << j.gpus();
  }
  EXPECT_GT(gangs, 80);
  EXPECT_LT(gangs, 160);
  EXPECT_NEAR(work / (0.6 * 64 * a->back().submit), 1.0, 1e-9);
  auto other = MakeTopoWorkload(PhillyLike(), c, {.seed = 8, .jobs = 300});
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)[5].submit, (*a)[5].submit);
  EXPECT_EQ(GangsOnly(*a).size(), static_cast<size_t>(gangs));
  EXPECT_FALSE(MakeTopoWorkload(PhillyLike(), c, {.gang_share = 1.5}).ok());
}

TEST(TopoWorkload, GangsLargerThanEveryDomainOnlyPrefer) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x1x2"));  // blocks of 16
  auto w = MakeTopoWorkload(PhillyLike(), c, {.jobs = 200, .gang_share = 1, .required_share = 1});
  ASSERT_TRUE(w.ok()) << w.status();
  for (const TopoJob& j : *w) {
    ASSERT_TRUE(j.gang);
    EXPECT_EQ(j.required, j.gpus() <= 16) << j.gpus();
  }
}

// A small end-to-end replay: both placements run every job; Kueue's TAS
// never spreads a required gang.
TEST(TopoCompare, SmallReplayBothPlacements) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));
  auto jobs = MakeTopoWorkload(PhillyLike(), c, {.seed = 3, .jobs = 80, .load = 0.7});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  for (const char* policy : {"gpusched", "kueue-tas"}) {
    auto r = RunTopoCompare(c, *jobs, {.policy = policy});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->jobs, 80) << policy;
    EXPECT_EQ(r->unfinished, 0) << policy;
    EXPECT_EQ(r->gangs_started, r->gangs) << policy;
    EXPECT_GT(r->utilisation, 0.1) << policy;
    EXPECT_LE(r->utilisation, 1.0) << policy;
    EXPECT_GE(r->whole_group, 0) << policy;
    EXPECT_LE(r->whole_group, 1) << policy;
    double mean_duration = 0;
    for (const TopoJob& j : *jobs) mean_duration += j.duration / static_cast<double>(jobs->size());
    EXPECT_GE(r->avg_jct, mean_duration) << policy;
    EXPECT_GE(r->gang_wait_p95, r->gang_wait_mean * 0.5) << policy;
    if (std::string(policy) == "kueue-tas") {
      EXPECT_EQ(r->required_spread, 0);
      EXPECT_GT(r->required_gangs, 0);
    }
  }
  EXPECT_FALSE(RunTopoCompare(c, *jobs, {.policy = "spread"}).ok());
}

// gpusched with the cluster's levels configured, every gang requiring its
// rack or block: every gang lands in one domain of its level; without the
// levels (today's node-by-node placement) the same workload spreads some.
TEST(TopoCompare, GpuschedWithRequiredTopologyPlacesEveryGangInOneDomain) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));
  auto jobs =
      MakeTopoWorkload(PhillyLike(), c, {.seed = 5, .jobs = 120, .load = 0.8, .required_share = 1});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  auto with = RunTopoCompare(c, *jobs, {.policy = "gpusched-topology"});
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->unfinished, 0);
  EXPECT_EQ(with->gangs_started, with->gangs);
  EXPECT_EQ(with->required_gangs, with->gangs);  // every gang here fits a block
  EXPECT_EQ(with->required_spread, 0);
  EXPECT_EQ(with->gangs_one_domain, with->gangs);
  auto without = RunTopoCompare(c, *jobs, {.policy = "gpusched"});
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_GT(without->required_spread, 0);
  // DomainFit scoring the single pods keeps every required gang in one domain.
  auto fit = RunTopoCompare(c, *jobs, {.policy = kTopologyDomainFit});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->unfinished, 0);
  EXPECT_EQ(fit->gangs_one_domain, fit->gangs);
}

// The slowdown model reaches the runtimes: the levels model with every
// factor 1 is the span model with s = 0; today's placement, which spreads
// gangs over blocks, runs its gangs longer when crossing blocks costs more.
TEST(TopoCompare, SlowdownModelSetsTheRuntimes) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));
  auto jobs = MakeTopoWorkload(PhillyLike(), c, {.seed = 5, .jobs = 120, .load = 0.8});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  auto run = [&](SlowdownOptions m) {
    auto r = RunTopoCompare(c, *jobs, {.policy = "gpusched", .slowdown = m});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : TopoResult{};
  };
  const LevelSlowdowns ones{.nodes = 1, .racks = 1, .blocks = 1, .clique_nodes = 1, .cliques = 1};
  const TopoResult flat = run({.model = SlowdownModel::kLevels, .levels = ones});
  EXPECT_DOUBLE_EQ(flat.avg_jct, run({.model = SlowdownModel::kSpan, .span = 0}).avg_jct);
  ASSERT_GT(flat.top_spread_share, 0);
  LevelSlowdowns blocks = ones;
  blocks.blocks = 3;
  EXPECT_GT(run({.model = SlowdownModel::kLevels, .levels = blocks}).avg_gang_jct,
            flat.avg_gang_jct);
}

// Random tie-breaking in the kube cycle (kube-scheduler's selectHost) is
// seeded: the same seed gives the same run, and it changes placements
// against giving every tie to the lowest node index.
TEST(TopoCompare, RandomTiesAreSeeded) {
  const TopoCluster c = MakeTopoCluster(*ParseTopoShape("racks:2x2x2"));
  auto jobs = MakeTopoWorkload(PhillyLike(), c, {.seed = 5, .jobs = 120, .load = 0.8});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  auto run = [&](uint64_t seed) {
    auto r = RunTopoCompare(c, *jobs, {.policy = "gpusched-topology", .tie_seed = seed});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::make_tuple(r->avg_jct, r->whole_group, r->single_wait_mean)
                  : std::make_tuple(0.0, 0.0, 0.0);
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(0));
}

}  // namespace
}  // namespace gpusched::sim
