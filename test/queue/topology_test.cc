// Topology-aware gangs in the queue (docs/queue.md, "Topology-aware
// gangs"): domains from node labels, required and preferred placement, the
// best-fit rule, the wait reason, and bad requests that place nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
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
using ::testing::SizeIs;

constexpr char kClique[] = "nvidia.com/gpu.clique";
constexpr char kRack[] = "cloud.provider.com/topology-rack";

// 8-GPU nodes named after their domain: {"a", 2} gives a0, a1 with clique
// label "a" (and rack label "rack-" + domain); domain "" gives unlabelled
// nodes named u0, u1, ...
std::vector<NodeSpec> Cluster(const std::vector<std::pair<std::string, int>>& domains) {
  std::vector<NodeSpec> out;
  for (const auto& [domain, count] : domains) {
    for (int i = 0; i < count; ++i) {
      NodeSpec n = Hgx8H100((domain.empty() ? "u" : domain) + std::to_string(i));
      if (!domain.empty()) {
        auto labels =
            std::make_shared<NodeLabels>(NodeLabels{{kRack, "rack-" + domain}, {kClique, domain}});
        std::sort(labels->begin(), labels->end());
        n.labels = std::move(labels);
      }
      out.push_back(std::move(n));
    }
  }
  return out;
}

QueueOptions Levels() {
  QueueOptions o;
  o.gang.topology_levels = {kClique, kRack};
  return o;
}

PodRequest Member(const std::string& name, int size, TopologyRule rule,
                  const std::string& level = kClique, int gpus = 8) {
  PodRequest p = PodBuilder(name, "team-a").Gpus(gpus).Gang("g", size).Build();
  if (rule != TopologyRule::kNone) {
    p.topology_request = {rule, level, 0,
                          rule == TopologyRule::kRequired ? kAnnotationTopologyRequired
                                                          : kAnnotationTopologyPreferred,
                          ""};
  }
  return p;
}

// The nodes holding the gang's reservation placeholders, by name.
std::multiset<std::string> ReservedNodes(Harness& h) {
  std::multiset<std::string> out;
  for (const NodeInfo* n : h.state().Snapshot()->nodes()) {
    for (const PodOnNode& p : n->pods) {
      if (p.reservation) out.insert(n->name);
    }
  }
  return out;
}

// The domains (first letter of the node name) the reservation spans.
std::set<char> ReservedDomains(Harness& h) {
  std::set<char> out;
  for (const std::string& n : ReservedNodes(h)) out.insert(n[0]);
  return out;
}

TEST(TopologyDomainsTest, NodesGroupByLabelAndUnlabelledAreInNone) {
  auto state = ::gpusched::testing::MakeState(Cluster({{"a", 2}, {"", 1}, {"b", 1}}));
  const auto snap = state->Snapshot();
  const TopologyDomains d = DomainsAt(*snap, kClique);
  ASSERT_EQ(d.names.size(), 2u);
  EXPECT_EQ(d.unlabelled, 1);
  std::map<std::string, std::vector<std::string>> by_domain;
  for (size_t i = 0; i < d.names.size(); ++i) {
    for (int32_t k : d.nodes[i]) by_domain[d.names[i]].push_back(snap->nodes()[k]->name);
  }
  EXPECT_EQ(by_domain["a"], (std::vector<std::string>{"a0", "a1"}));
  EXPECT_EQ(by_domain["b"], (std::vector<std::string>{"b0"}));
  EXPECT_EQ(d.domain_of[snap->FindIndex("u0")], -1);
  // The node level: every node is its own domain, labelled or not.
  const TopologyDomains hosts = DomainsAt(*snap, kHostnameLevel);
  EXPECT_EQ(hosts.names.size(), 4u);
  EXPECT_EQ(hosts.unlabelled, 0);
  // A level no node has: no domain, every node unlabelled.
  const TopologyDomains none = DomainsAt(*snap, "example.com/row");
  EXPECT_TRUE(none.names.empty());
  EXPECT_EQ(none.unlabelled, 4);
}

TEST(TopologyGangTest, RequiredGangLandsInTheOneDomainThatHoldsIt) {
  Harness h(Cluster({{"a", 2}, {"b", 4}}), {}, Levels());
  ASSERT_THAT(h.Filter(Member("m0", 3, TopologyRule::kRequired)), SizeIs(1));
  EXPECT_THAT(ReservedNodes(h), SizeIs(3));
  EXPECT_EQ(ReservedDomains(h), std::set<char>{'b'});
}

TEST(TopologyGangTest, RequiredGangWaitsWhenNoDomainHoldsItAndSaysWhy) {
  Harness h(Cluster({{"a", 2}, {"b", 2}, {"", 2}}), {}, Levels());
  std::string reason;
  EXPECT_THAT(h.Filter(Member("m0", 3, TopologyRule::kRequired), &reason), IsEmpty());
  EXPECT_EQ(reason.substr(0, reason.find("; position")),
            "gpusched: gang g needs 24 GPUs (3 x 8) in one nvidia.com/gpu.clique; the best, a, "
            "has 16 GPUs free, room for 2 of 3 members (2 domains; 2 nodes have no "
            "nvidia.com/gpu.clique label and are in none)");
  EXPECT_THAT(ReservedNodes(h), IsEmpty());
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 0);
  // /debug/pods says the same.
  auto report = h.queue->ExplainPod("team-a", "m0");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->reason, reason.substr(0, reason.find("; position")));
  // The same gang without the requirement fits across domains (6 nodes).
  Harness free(Cluster({{"a", 2}, {"b", 2}, {"", 2}}), {}, Levels());
  EXPECT_THAT(free.Filter(Member("m0", 3, TopologyRule::kNone)), SizeIs(1));
  EXPECT_THAT(ReservedNodes(free), SizeIs(3));
}

TEST(TopologyGangTest, BestFitLeavesTheBigDomainWhole) {
  // a: 4 free nodes, b: 2. A gang of 2 fits both: it goes to b, so a gang
  // of 4 can still start in a.
  for (TopologyRule rule : {TopologyRule::kRequired, TopologyRule::kPreferred}) {
    Harness h(Cluster({{"a", 4}, {"b", 2}}), {}, Levels());
    ASSERT_THAT(h.Filter(Member("m0", 2, rule)), SizeIs(1));
    EXPECT_EQ(ReservedDomains(h), std::set<char>{'b'}) << static_cast<int>(rule);
  }
  // Busy nodes count: b has 3 nodes but one is full, so b (16 free) is the
  // tighter fit than c (24 free).
  Harness h(Cluster({{"b", 3}, {"c", 3}}),
            {PodBuilder("busy", "team-z").Gpus(8).OnNode("b0", 0xff).Build()}, Levels());
  ASSERT_THAT(h.Filter(Member("m0", 2, TopologyRule::kRequired)), SizeIs(1));
  EXPECT_EQ(ReservedDomains(h), std::set<char>{'b'});
}

TEST(TopologyGangTest, EqualFitsTieByDomainName) {
  Harness h(Cluster({{"d", 2}, {"c", 2}}), {}, Levels());
  ASSERT_THAT(h.Filter(Member("m0", 2, TopologyRule::kRequired)), SizeIs(1));
  EXPECT_EQ(ReservedDomains(h), std::set<char>{'c'});
}

TEST(TopologyGangTest, PreferredSpansTheFewestDomainsWhenNoneHoldsIt) {
  // 4 members; a: 1 node, b: 2, c: 2. No domain holds 4: b and c do, a is
  // left alone.
  Harness h(Cluster({{"a", 1}, {"b", 2}, {"c", 2}}), {}, Levels());
  ASSERT_THAT(h.Filter(Member("m0", 4, TopologyRule::kPreferred)), SizeIs(1));
  EXPECT_THAT(ReservedNodes(h), SizeIs(4));
  EXPECT_EQ(ReservedDomains(h), (std::set<char>{'b', 'c'}));
}

TEST(TopologyGangTest, PreferredFallsBackToAnyNodeIncludingUnlabelled) {
  Harness h(Cluster({{"a", 1}, {"", 2}}), {}, Levels());
  ASSERT_THAT(h.Filter(Member("m0", 3, TopologyRule::kPreferred)), SizeIs(1));
  EXPECT_THAT(ReservedNodes(h), SizeIs(3));
}

TEST(TopologyGangTest, RequiredAtASecondLevelUsesThatLabel) {
  // Rack labels are "rack-" + the clique here, so racks and cliques
  // coincide: required rack behaves as required clique.
  Harness h(Cluster({{"a", 2}, {"b", 4}}), {}, Levels());
  ASSERT_THAT(h.Filter(Member("m0", 3, TopologyRule::kRequired, kRack)), SizeIs(1));
  EXPECT_EQ(ReservedDomains(h), std::set<char>{'b'});
}

TEST(TopologyGangTest, RunningMembersPinTheDomain) {
  // Gang of 3, one member already running in a: the other two must go to
  // a, although b is the tighter fit for two.
  PodRequest running = Member("run", 3, TopologyRule::kRequired);
  running.node_name = "a0";
  running.phase = PodPhase::kRunning;
  running.has_gpu_ids = true;
  running.gpu_ids = 0xff;
  Harness h(Cluster({{"a", 4}, {"b", 2}}), {running}, Levels());
  ASSERT_THAT(h.Filter(Member("m1", 3, TopologyRule::kRequired)), SizeIs(1));
  EXPECT_THAT(ReservedNodes(h), SizeIs(2));
  EXPECT_EQ(ReservedDomains(h), std::set<char>{'a'});
}

TEST(TopologyGangTest, NoLevelsConfiguredIgnoresRequestsAsBefore) {
  Harness h(Cluster({{"a", 2}, {"b", 2}}), {}, QueueOptions{});
  ASSERT_THAT(h.Filter(Member("m0", 3, TopologyRule::kRequired)), SizeIs(1));
  EXPECT_THAT(ReservedNodes(h), SizeIs(3));
}

TEST(TopologyGangTest, BadRequestsPlaceNoMemberAndSayWhy) {
  PodRequest unknown = Member("m0", 2, TopologyRule::kRequired, "example.com/row");
  PodRequest tier = Member("m0", 2, TopologyRule::kNone);
  tier.group_topology = {TopologyRule::kRequired, "", 3, "PodGroup g spec.networkTopology", ""};
  PodRequest conflict = Member("m0", 2, TopologyRule::kNone);
  conflict.topology_request.error = "annotations x and y ask for different topology; keep one";
  PodRequest disagree = Member("m0", 2, TopologyRule::kPreferred);
  disagree.group_topology = {TopologyRule::kRequired, "", 1, "PodGroup g spec.networkTopology", ""};
  const struct {
    const char* name;
    PodRequest first;  // submitted first, waits
    PodRequest second;
    std::string reason;
  } kCases[] = {
      {"level not configured", Member("w", 2, TopologyRule::kRequired, "example.com/row"), unknown,
       "level 'example.com/row' is not configured"},
      {"tier out of range", Member("w", 2, TopologyRule::kNone), tier,
       "PodGroup g spec.networkTopology: tier 3 is out of range"},
      {"conflicting annotations", Member("w", 2, TopologyRule::kNone), conflict,
       "annotations x and y ask for different topology"},
      {"annotation against the PodGroup", Member("w", 2, TopologyRule::kNone), disagree,
       "disagree"},
      {"members ask different levels", Member("w", 2, TopologyRule::kRequired, kRack),
       Member("m0", 2, TopologyRule::kRequired, kClique),
       "members ask different topology: m0 requires one nvidia.com/gpu.clique, w requires one "
       "cloud.provider.com/topology-rack"},
  };
  for (const auto& c : kCases) {
    Harness h(Cluster({{"a", 4}}), {}, Levels());
    h.Submit(c.first);
    std::string reason;
    EXPECT_THAT(h.Filter(c.second, &reason), IsEmpty()) << c.name;
    EXPECT_THAT(reason, HasSubstr("gpusched: gang g: ")) << c.name;
    EXPECT_THAT(reason, HasSubstr(c.reason)) << c.name;
    EXPECT_THAT(reason, HasSubstr("no member is placed until this is fixed")) << c.name;
    EXPECT_THAT(ReservedNodes(h), IsEmpty()) << c.name;
    EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 0) << c.name;
  }
}

PodRequest Low(const std::string& node, int32_t priority) {
  return PodBuilder("l-" + node, "u").Gpus(8).OnNode(node, 0xff).Priority(priority).Build();
}

// The victims of both members' preempt answers (kube-scheduler's
// candidates: every node with its lower-priority pods).
std::set<std::string> PreemptVictims(Harness& h, const std::vector<PodRequest>& members) {
  std::set<std::string> victims;
  for (const PodRequest& m : members) {
    EXPECT_THAT(h.Filter(m), IsEmpty());
  }
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

TEST(TopologyGangTest, PreemptionFreesOneDomainTheCheapest) {
  // Every node full. Node by node the cheapest victims are a0 and b0
  // (priority 1), in two cliques; inside one clique b (highest victim 3)
  // is cheaper than a (5).
  const std::vector<PodRequest> low = {Low("a0", 1), Low("a1", 5), Low("b0", 1), Low("b1", 3)};
  std::vector<PodRequest> members;
  for (const char* name : {"m0", "m1"}) {
    PodRequest m = Member(name, 2, TopologyRule::kRequired);
    m.priority = 100;
    members.push_back(m);
  }
  Harness h(Cluster({{"a", 2}, {"b", 2}}), low, Levels());
  EXPECT_EQ(PreemptVictims(h, members), (std::set<std::string>{"uid-u-l-b0", "uid-u-l-b1"}));
  // Without levels the same gang takes the two cheapest nodes, one per clique.
  Harness plain(Cluster({{"a", 2}, {"b", 2}}), low, QueueOptions{});
  EXPECT_EQ(PreemptVictims(plain, members), (std::set<std::string>{"uid-u-l-a0", "uid-u-l-b0"}));
}

// A member that never claimed its slot (never filtered) binds only into a
// free slot of its gang's reservation, not as if the gang had started (the
// holders count as members placed).
TEST(TopologyGangTest, UnclaimedMemberBindsOnlyIntoAFreeSlot) {
  Harness h(Cluster({{"a", 2}, {"b", 2}}), {}, Levels());
  const PodRequest m0 = Member("m0", 2, TopologyRule::kRequired);
  const PodRequest m1 = Member("m1", 2, TopologyRule::kRequired);
  h.Submit(m1);
  ASSERT_THAT(h.Filter(m0), SizeIs(1));
  const std::multiset<std::string> reserved = ReservedNodes(h);
  ASSERT_EQ(reserved, (std::multiset<std::string>{"a0", "a1"}));
  EXPECT_THAT(h.Bind(m1, "b0"), HasSubstr("reserved GPUs for its members on a"));
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 16000);  // the holders only
  // Filtered, it claims the other slot and binds there.
  const std::string m0_node = h.queue->ReservedNode(m0);
  const auto m1_nodes = h.Filter(m1);
  ASSERT_THAT(m1_nodes, SizeIs(1));
  EXPECT_NE(m1_nodes[0], m0_node);
  EXPECT_EQ(h.Bind(m1, m1_nodes[0]), "");
  EXPECT_EQ(h.Bind(m0, m0_node), "");
  EXPECT_EQ(h.state().Snapshot()->AllocatedGpuMilli(), 16000);
  EXPECT_THAT(ReservedNodes(h), IsEmpty());
}

// The pure pieces: room per domain and the best-fit order.
TEST(DomainPlacementTest, RoomCountsMembersPerNodeAndBestFitOrders) {
  auto state = ::gpusched::testing::MakeState(
      Cluster({{"a", 3}, {"b", 2}, {"c", 2}}),
      {PodBuilder("half", "team-z").Gpus(4).OnNode("a0", 0x0f).Build()});
  const auto snap = state->Snapshot();
  auto fw = policy::Framework::Create(ScoringConfig{});
  ASSERT_TRUE(fw.ok());
  const PodRequest four = Member("m", 5, TopologyRule::kRequired, kClique, 4);
  const TopologyDomains d = DomainsAt(*snap, kClique);
  const std::vector<DomainRoom> rooms = RoomPerDomain(*snap, **fw, four, d, 5);
  std::map<std::string, std::pair<int32_t, int64_t>> got;  // name -> (members, free)
  for (const DomainRoom& r : rooms) got[d.names[r.domain]] = {r.members, r.free_gpus};
  EXPECT_EQ(got["a"], std::make_pair(5, int64_t{20}));  // 1 + 2 + 2 members, capped at 5
  EXPECT_EQ(got["b"], std::make_pair(4, int64_t{16}));
  EXPECT_EQ(got["c"], std::make_pair(4, int64_t{16}));
  std::vector<std::string> order;
  for (int32_t i : BestFitOrder(rooms, d, 4)) order.push_back(d.names[i]);
  EXPECT_EQ(order, (std::vector<std::string>{"b", "c", "a"}));
  order.clear();
  for (int32_t i : BestFitOrder(rooms, d, 5)) order.push_back(d.names[i]);
  EXPECT_EQ(order, (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace gpusched::queue
