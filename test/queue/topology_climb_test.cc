// Preferred topology gangs climb levels (docs/queue.md, "Topology-aware
// gangs"): a gang that prefers one rack and fits in none takes one block,
// else the fewest blocks; a required level stays strict. Preemption and
// reclaim plan a preferred gang inside one domain the same way, and without
// levels (or with one domain holding every node) answer as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpusched/model/topology_domains.h"
#include "scheduler/queue/domain_placement.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::PodBuilder;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr const char* kBlock = ::gpusched::testing::kBlockLabel;
constexpr const char* kRack = ::gpusched::testing::kRackLabel;
// A node of 8 H100s in `rack` of `block` ("" for either: no such label).
constexpr auto NodeIn = &::gpusched::testing::Hgx8H100InRack;

struct RackSpec {
  std::string rack, block;
  int nodes;
};

// Racks of whole free nodes named after the rack: {"a", "B1", 2} gives a0, a1.
std::vector<NodeSpec> Racks(const std::vector<RackSpec>& racks) {
  std::vector<NodeSpec> out;
  for (const RackSpec& r : racks) {
    for (int i = 0; i < r.nodes; ++i)
      out.push_back(NodeIn(r.rack + std::to_string(i), r.rack, r.block));
  }
  return out;
}

QueueOptions Levels() {
  QueueOptions o;
  o.gang.topology_levels = {kBlock, kRack};
  return o;
}

PodRequest Member(const std::string& name, int size, TopologyRule rule, const char* source,
                  int32_t priority = 0, const std::string& ns = "team-a") {
  PodRequest p = PodBuilder(name, ns).Gpus(8).Priority(priority).Gang("g", size).Build();
  p.topology_request = {rule, kRack, 0, source, ""};
  return p;
}

// The labels of the nodes holding the gang's reservation.
std::set<std::string> ReservedLabels(Harness& h, const char* key) {
  std::set<std::string> out;
  for (const NodeInfo* n : h.state().Snapshot()->nodes()) {
    for (const PodOnNode& p : n->pods) {
      if (!p.reservation) continue;
      const std::string* v = FindLabel(n->labels.get(), key);
      out.insert(v != nullptr ? *v : "-");
    }
  }
  return out;
}

TEST(TopologyClimbTest, ResolvedPreferredRequestsListTheLargerLevels) {
  const std::vector<std::string> levels = {kBlock, kRack, kHostnameLevel};
  auto resolve = [&](TopologyRule rule, const std::string& level, int32_t tier = 0) {
    PodRequest p = PodBuilder("p", "ns").Gpus(8).Gang("g", 2).Build();
    p.topology_request = {rule, level, tier, "src", ""};
    return ResolveTopology(p, levels).climb;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(resolve(TopologyRule::kPreferred, kHostnameLevel), (V{kRack, kBlock}));
  EXPECT_EQ(resolve(TopologyRule::kPreferred, kRack), (V{kBlock}));
  EXPECT_EQ(resolve(TopologyRule::kPreferred, kBlock), V{});
  EXPECT_EQ(resolve(TopologyRule::kRequired, kRack), V{});           // required stays strict
  EXPECT_EQ(resolve(TopologyRule::kPreferred, "", 1), (V{kBlock}));  // Volcano soft, tier 1
  // The node level unlisted is below every listed level.
  PodRequest p = PodBuilder("p", "ns").Gpus(8).Gang("g", 2).Build();
  p.topology_request = {TopologyRule::kPreferred, kHostnameLevel, 0, "src", ""};
  EXPECT_EQ(ResolveTopology(p, {kBlock, kRack}).climb, (V{kRack, kBlock}));
}

// Hand-computed clusters; every rack's nodes are whole and free.
TEST(TopologyClimbTest, PreferredGangClimbsFromRackToBlockThenFewestBlocks) {
  const struct {
    const char* name;
    std::vector<RackSpec> racks;
    int members;
    TopologyRule rule;
    const char* source;
    std::set<std::string> racks_used, blocks_used;
  } kCases[] = {
      // Racks b (3) and c (4) hold 3: best fit b.
      {"a rack fits: the tightest rack",
       {{"a", "B1", 2}, {"b", "B1", 3}, {"c", "B2", 4}},
       3,
       TopologyRule::kPreferred,
       kAnnotationTopologyPreferred,
       {"b"},
       {"B1"}},
      // No rack holds 4 (at most 3); blocks B1 (4 nodes) and B2 (6) do:
      // best fit B1. Spreading over the fewest racks instead would take c
      // and d, in B2.
      {"no rack fits: one block, the tightest",
       {{"a", "B1", 2}, {"b", "B1", 2}, {"c", "B2", 3}, {"d", "B2", 3}},
       4,
       TopologyRule::kPreferred,
       kAnnotationKueuePreferred,
       {"a", "b"},
       {"B1"}},
      // No rack (at most 2) and no block (at most 3) holds 5: the fewest
      // blocks, most room first (B1: 3, then B2 before B3 by name). The
      // fewest racks would have been b, c, d over three blocks.
      {"no block fits: the fewest blocks",
       {{"a", "B1", 1}, {"b", "B1", 2}, {"c", "B2", 2}, {"d", "B3", 2}},
       5,
       TopologyRule::kPreferred,
       kAnnotationTopologyPreferred,
       {"a", "b", "c"},
       {"B1", "B2"}},
  };
  for (const auto& c : kCases) {
    Harness h(Racks(c.racks), {}, Levels());
    ASSERT_THAT(h.Filter(Member("m0", c.members, c.rule, c.source)), SizeIs(1)) << c.name;
    EXPECT_EQ(ReservedLabels(h, kRack), c.racks_used) << c.name;
    EXPECT_EQ(ReservedLabels(h, kBlock), c.blocks_used) << c.name;
  }
}

TEST(TopologyClimbTest, RequiredRackStaysStrictWhereAPreferredGangClimbs) {
  const std::vector<RackSpec> racks = {{"a", "B1", 2}, {"b", "B1", 2}, {"c", "B2", 3}};
  for (const char* source : {kAnnotationTopologyRequired, kAnnotationKueueRequired}) {
    Harness h(Racks(racks), {}, Levels());
    std::string reason;
    EXPECT_THAT(h.Filter(Member("m0", 4, TopologyRule::kRequired, source), &reason), IsEmpty());
    EXPECT_THAT(reason, HasSubstr("in one cloud.provider.com/topology-rack; the best, c, has 24 "
                                  "GPUs free, room for 3 of 4 members"))
        << source;
    EXPECT_THAT(ReservedLabels(h, kRack), IsEmpty()) << source;
  }
}

// The pure placement says which level it used.
TEST(TopologyClimbTest, PlacementNamesTheLevelItClimbedTo) {
  auto state = ::gpusched::testing::MakeState(
      Racks({{"a", "B1", 2}, {"b", "B1", 2}, {"c", "B2", 3}, {"d", "B2", 3}}));
  const auto snap = state->Snapshot();
  auto fw = policy::Framework::Create(ScoringConfig{});
  ASSERT_TRUE(fw.ok());
  const QuotaConfig no_quotas;
  const QuotaLedger ledger(no_quotas, *snap);
  const PodRequest pod = Member("m", 4, TopologyRule::kPreferred, "src");
  ResolvedTopology t = ResolveTopology(pod, {kBlock, kRack});
  TopologyPlacement p = PlaceInDomains(*snap, **fw, pod, ledger, 4, false, t);
  EXPECT_EQ(p.picks.size(), 4u);
  EXPECT_EQ(p.level, kBlock);
  EXPECT_EQ(p.domain, "B1");
  EXPECT_EQ(p.domains_used, 1);
  // Three members fit one rack: no climbing.
  p = PlaceInDomains(*snap, **fw, pod, ledger, 3, false, t);
  EXPECT_EQ(p.level, kRack);
  EXPECT_EQ(p.domain, "c");
  // Without the climb (one level only), four members span the fewest racks.
  t.climb.clear();
  p = PlaceInDomains(*snap, **fw, pod, ledger, 4, false, t);
  EXPECT_EQ(p.domain, "");
  EXPECT_EQ(p.level, kRack);
  EXPECT_EQ(p.domains_used, 2);
}

PodRequest Low(const std::string& node, int32_t priority, const std::string& ns = "u") {
  return PodBuilder("l-" + node, ns).Gpus(8).OnNode(node, 0xff).Priority(priority).Build();
}

// Every member asks to preempt, kube-scheduler offering every node with
// its lower-priority pods; the victims of all answers.
std::set<std::string> PreemptVictims(Harness& h, const std::vector<PodRequest>& members) {
  std::set<std::string> victims;
  for (const PodRequest& m : members) EXPECT_THAT(h.Filter(m), IsEmpty());
  for (const PodRequest& m : members) {
    PreemptionArgs a;
    a.pod = m;
    for (const NodeInfo* node : h.state().Snapshot()->nodes()) {
      PreemptionArgs::Candidate c{node->name, {}, 0};
      for (const PodOnNode& p : node->pods) {
        if (p.priority < m.priority) c.victim_uids.push_back(p.uid);
      }
      if (!c.victim_uids.empty()) a.candidates.push_back(std::move(c));
    }
    for (const auto& nv : h.service->Preempt(a).nodes) {
      victims.insert(nv.victim_uids.begin(), nv.victim_uids.end());
    }
  }
  return victims;
}

// n0 and n2 in rack r1, n1 and n3 in r2, one block; every node full at the
// same priority. Node by node the cheapest plan takes n0 and n1 (snapshot
// order), two racks; a one-rack plan costs the same.
std::vector<NodeSpec> Interleaved() {
  return {NodeIn("n0", "r1", "B1"), NodeIn("n1", "r2", "B1"), NodeIn("n2", "r1", "B1"),
          NodeIn("n3", "r2", "B1")};
}

TEST(TopologyClimbTest, PreferredGangPreemptsInsideOneRackAtEqualCost) {
  const std::vector<PodRequest> low = {Low("n0", 1), Low("n1", 1), Low("n2", 1), Low("n3", 1)};
  const std::vector<PodRequest> members = {
      Member("m0", 2, TopologyRule::kPreferred, kAnnotationTopologyPreferred, 100),
      Member("m1", 2, TopologyRule::kPreferred, kAnnotationTopologyPreferred, 100)};
  Harness h(Interleaved(), low, Levels());
  h.capture_log = true;
  EXPECT_EQ(PreemptVictims(h, members), (std::set<std::string>{"uid-u-l-n0", "uid-u-l-n2"}));
  ASSERT_THAT(h.log, SizeIs(1));
  EXPECT_THAT(h.log[0], HasSubstr("gang team-a/g preempts as one plan of 2 victims: the victims "
                                  "free one cloud.provider.com/topology-rack (r1) for all 2 "
                                  "members"));
  // Without levels: today's plan, across both racks.
  Harness plain(Interleaved(), low, QueueOptions{});
  EXPECT_EQ(PreemptVictims(plain, members), (std::set<std::string>{"uid-u-l-n0", "uid-u-l-n1"}));
}

TEST(TopologyClimbTest, PreferredGangClimbsToOneBlockForItsVictimsElseSaysSo) {
  // Racks of one node: no rack can hold 2 members; block B1 (n0, n1) can.
  // n2 (B2) has the cheapest victim, so node by node the plan would span
  // the blocks.
  const std::vector<NodeSpec> nodes = {NodeIn("n0", "r0", "B1"), NodeIn("n1", "r1", "B1"),
                                       NodeIn("n2", "r2", "B2")};
  const std::vector<PodRequest> low = {Low("n0", 3), Low("n1", 3), Low("n2", 1)};
  const std::vector<PodRequest> members = {
      Member("m0", 2, TopologyRule::kPreferred, kAnnotationTopologyPreferred, 100),
      Member("m1", 2, TopologyRule::kPreferred, kAnnotationTopologyPreferred, 100)};
  Harness h(nodes, low, Levels());
  h.capture_log = true;
  EXPECT_EQ(PreemptVictims(h, members), (std::set<std::string>{"uid-u-l-n0", "uid-u-l-n1"}));
  ASSERT_THAT(h.log, SizeIs(1));
  EXPECT_THAT(h.log[0], HasSubstr("free one cloud.provider.com/topology-block (B1) for all 2 "
                                  "members; no single cloud.provider.com/topology-rack could be "
                                  "freed for them"));
  // Three members: no block holds them; today's plan, and the log says so.
  std::vector<PodRequest> three;
  for (const char* name : {"m0", "m1", "m2"}) {
    three.push_back(Member(name, 3, TopologyRule::kPreferred, kAnnotationTopologyPreferred, 100));
  }
  Harness wide(nodes, low, Levels());
  wide.capture_log = true;
  EXPECT_THAT(PreemptVictims(wide, three), SizeIs(3));
  ASSERT_THAT(wide.log, SizeIs(1));
  EXPECT_THAT(wide.log[0], HasSubstr("no single cloud.provider.com/topology-block could be freed "
                                     "for all 3 members: they go where victims cost least"));
}

TEST(TopologyClimbTest, PreferredGangReclaimsInsideOneRackAndTheReasonSaysSo) {
  QueueOptions o = Levels();
  o.quotas = testing::Quotas(
      {{"team-a", testing::Quota(0, 32, "r")}, {"team-b", testing::Quota(16, 16, "r")}});
  const std::vector<PodRequest> low = {Low("n0", -1, "team-a"), Low("n1", -1, "team-a"),
                                       Low("n2", -1, "team-a"), Low("n3", -1, "team-a")};
  for (bool levels : {true, false}) {
    QueueOptions opts = o;
    if (!levels) opts.gang.topology_levels.clear();
    Harness h(Interleaved(), low, opts);
    const PodRequest b0 = Member("b0", 2, TopologyRule::kPreferred, "src", 0, "team-b");
    const PodRequest b1 = Member("b1", 2, TopologyRule::kPreferred, "src", 0, "team-b");
    EXPECT_THAT(h.Filter(b0), IsEmpty());
    EXPECT_THAT(h.Filter(b1), IsEmpty());
    EXPECT_EQ(h.queue->Tick(), 2) << levels;
    const std::set<std::string> evicted(h.writer.evicted.begin(), h.writer.evicted.end());
    if (levels) {
      EXPECT_EQ(evicted, (std::set<std::string>{"uid-team-a-l-n0", "uid-team-a-l-n2"}));
      for (const std::string& r : h.writer.reasons) {
        EXPECT_THAT(r, HasSubstr("reclaim: namespace team-b is below its guarantee"));
        EXPECT_THAT(r, HasSubstr("; the victims free one cloud.provider.com/topology-rack (r1) "
                                 "for all 2 members"));
      }
    } else {
      EXPECT_EQ(evicted, (std::set<std::string>{"uid-team-a-l-n0", "uid-team-a-l-n1"}));
      for (const std::string& r : h.writer.reasons) EXPECT_THAT(r, Not(HasSubstr("victims free")));
    }
  }
}

// Generated clusters: six full nodes in two or three racks, each half of a
// node holding a pod of priority 1-4 or 200; a gang of 2-3 x 4 GPUs preempts. Three ways
// with no topology to honour must give today's answer exactly: no levels
// configured, levels but a gang that asks nothing, and a preferred gang on
// a cluster whose nodes share one rack and one block. With racks, the
// preferred gang's victims lie in one rack whenever a required gang's do.
TEST(TopologyClimbTest, GeneratedClustersAnswerAsBeforeWithoutDomainsToChoose) {
  std::mt19937 rng(30);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int one_rack = 0, answered = 0;
  for (int round = 0; round < 120; ++round) {
    const int racks = 2 + pick(2);
    std::vector<NodeSpec> split, together, bare;
    std::map<std::string, std::string> rack_of;
    std::vector<PodRequest> low;
    for (int n = 0; n < 6; ++n) {
      const std::string name = "n" + std::to_string(n);
      rack_of[name] = "r" + std::to_string(pick(racks));
      split.push_back(NodeIn(name, rack_of[name], "B" + rack_of[name]));
      together.push_back(NodeIn(name, "r", "B"));
      bare.push_back(Hgx8H100(name));
      for (DeviceMask half : {DeviceMask{0x0f}, DeviceMask{0xf0}}) {
        const int32_t kPriorities[] = {1, 2, 3, 4, 200};  // 200: never a victim
        low.push_back(PodBuilder("l" + std::to_string(n) + "-" + std::to_string(half), "u")
                          .Gpus(4)
                          .OnNode(name, half)
                          .Priority(kPriorities[pick(5)])
                          .Build());
      }
    }
    const int size = 2 + pick(2);
    auto gang = [&](TopologyRule rule) {
      std::vector<PodRequest> m;
      for (int i = 0; i < size; ++i) {
        PodRequest p =
            PodBuilder("m" + std::to_string(i), "t").Gpus(4).Priority(100).Gang("g", size).Build();
        if (rule != TopologyRule::kNone) p.topology_request = {rule, kRack, 0, "src", ""};
        m.push_back(p);
      }
      return m;
    };
    Harness before(bare, low, QueueOptions{});
    const std::set<std::string> today = PreemptVictims(before, gang(TopologyRule::kPreferred));
    Harness asks_nothing(split, low, Levels());
    EXPECT_EQ(PreemptVictims(asks_nothing, gang(TopologyRule::kNone)), today) << round;
    Harness one_domain(together, low, Levels());
    EXPECT_EQ(PreemptVictims(one_domain, gang(TopologyRule::kPreferred)), today) << round;
    // With racks: one rack whenever a required gang finds one.
    Harness required(split, low, Levels());
    const std::set<std::string> strict = PreemptVictims(required, gang(TopologyRule::kRequired));
    Harness preferred(split, low, Levels());
    const std::set<std::string> soft = PreemptVictims(preferred, gang(TopologyRule::kPreferred));
    answered += today.empty() ? 0 : 1;
    if (strict.empty()) continue;
    ++one_rack;
    std::set<std::string> racks_hit;
    for (const std::string& uid : soft) {  // uid-u-l<node>-<half>
      racks_hit.insert(rack_of["n" + uid.substr(std::string("uid-u-l").size(), 1)]);
    }
    EXPECT_THAT(racks_hit, SizeIs(1)) << round;
  }
  EXPECT_GE(answered, 60);
  EXPECT_GE(one_rack, 30);
}

}  // namespace
}  // namespace gpusched::queue
