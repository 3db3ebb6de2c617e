// Topology-aware gangs, the input side: the policy file's levels, the pod
// annotations (gpusched's and Kueue's), a Volcano PodGroup's
// networkTopology, node labels, and a request resolved against the levels.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpusched/model/topology_domains.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/extender_codec.h"
#include "scheduler/codec/gang_codec.h"

namespace gpusched {
namespace {

using Json = nlohmann::json;

constexpr char kClique[] = "nvidia.com/gpu.clique";
constexpr char kBlock[] = "cloud.provider.com/topology-block";
constexpr char kRack[] = "cloud.provider.com/topology-rack";

TEST(TopologyLevelsConfig, ValidListsAndAbsence) {
  auto none = codec::DecodeConfig(R"({"gang": {"reservationSeconds": 60}})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->gang.topology_levels.empty());
  auto c =
      codec::DecodeConfig(StrCat(R"({"gang": {"topologyLevels": [")", kClique, R"(", ")", kBlock,
                                 R"(", ")", kRack, R"(", "kubernetes.io/hostname"]}})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->gang.topology_levels,
            (std::vector<std::string>{kClique, kBlock, kRack, "kubernetes.io/hostname"}));
}

TEST(TopologyLevelsConfig, ErrorsNameTheField) {
  const struct {
    const char* levels;
    const char* error;
  } kCases[] = {
      {R"("rack")", "gang.topologyLevels: must be a list of node-label keys"},
      {R"({"a": 1})", "gang.topologyLevels: must be a list of node-label keys"},
      {R"([""])", "gang.topologyLevels[0]: '' is not a valid label key"},
      {R"(["rack", 3])", "gang.topologyLevels[1]: must be a string (a node-label key)"},
      {R"(["a/b/c"])", "gang.topologyLevels[0]: 'a/b/c' is not a valid label key"},
      {R"(["Example.com/rack"])",
       "gang.topologyLevels[0]: 'Example.com/rack' is not a valid label key"},
      {R"(["-rack"])", "gang.topologyLevels[0]: '-rack' is not a valid label key"},
      {R"(["rack", "block", "rack"])", "gang.topologyLevels[2]: 'rack' is listed twice"},
      {R"(["kubernetes.io/hostname", "rack"])",
       "gang.topologyLevels[1]: kubernetes.io/hostname must be the last level (it is the node)"},
      {R"(["nvidia.com/gpu.product"])",
       "gang.topologyLevels[0]: 'nvidia.com/gpu.product' describes hardware; gpusched does not "
       "keep such labels (nvidia.com/gpu.clique is the one nvidia.com/ level)"},
      {R"(["a","b","c","d","e","f","g","h","i"])", "gang.topologyLevels: at most 8 levels, got 9"},
  };
  for (const auto& c : kCases) {
    auto config = codec::DecodeConfig(StrCat(R"({"gang": {"topologyLevels": )", c.levels, "}}"));
    ASSERT_FALSE(config.ok()) << c.levels;
    EXPECT_EQ(config.status().message(), c.error) << c.levels;
  }
}

Json Pod(Json annotations) {
  Json meta = {{"name", "w-0"}, {"namespace", "train"}, {"uid", "u-0"}};
  if (!annotations.empty()) meta["annotations"] = std::move(annotations);
  return {{"metadata", meta},
          {"spec",
           {{"containers",
             {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "4"}}}}}}}}}}};
}

TEST(TopologyAnnotations, EachAnnotationAndEveryConflict) {
  const std::string gr = kAnnotationTopologyRequired, gp = kAnnotationTopologyPreferred,
                    kr = kAnnotationKueueRequired, kp = kAnnotationKueuePreferred,
                    ku = kAnnotationKueueUnconstrained;
  const struct {
    const char* name;
    Json annotations;
    TopologyRule rule;
    std::string level;
    std::string source;
    std::string error;  // "" = valid
  } kCases[] = {
      {"none", Json::object(), TopologyRule::kNone, "", "", ""},
      {"gpusched required", {{gr, kClique}}, TopologyRule::kRequired, kClique, gr, ""},
      {"gpusched preferred", {{gp, kRack}}, TopologyRule::kPreferred, kRack, gp, ""},
      {"kueue required", {{kr, kBlock}}, TopologyRule::kRequired, kBlock, kr, ""},
      {"kueue preferred", {{kp, kRack}}, TopologyRule::kPreferred, kRack, kp, ""},
      {"kueue unconstrained", {{ku, "true"}}, TopologyRule::kUnconstrained, "", ku, ""},
      {"kueue unconstrained false", {{ku, "false"}}, TopologyRule::kNone, "", "", ""},
      {"gpusched and kueue agree",
       {{gr, kClique}, {kr, kClique}},
       TopologyRule::kRequired,
       kClique,
       gr,
       ""},
      {"required and preferred",
       {{gr, kClique}, {gp, kRack}},
       TopologyRule::kNone,
       "",
       "",
       "annotations " + gr + " and " + gp + " ask for different topology; keep one"},
      {"gpusched and kueue disagree",
       {{gr, kClique}, {kr, kRack}},
       TopologyRule::kNone,
       "",
       "",
       "annotations " + gr + " and " + kr + " ask for different topology; keep one"},
      {"required and unconstrained",
       {{kr, kRack}, {ku, "true"}},
       TopologyRule::kNone,
       "",
       "",
       "annotations " + kr + " and " + ku + " ask for different topology; keep one"},
      {"empty level",
       {{gr, ""}},
       TopologyRule::kNone,
       "",
       "",
       "annotation " + gr + " is empty (it names a level)"},
      {"unconstrained not a bool",
       {{ku, "yes"}},
       TopologyRule::kNone,
       "",
       "",
       "annotation " + ku + " is not \"true\" or \"false\""},
  };
  codec::RequestDecoder d;
  for (const auto& c : kCases) {
    std::string body = Pod(c.annotations).dump();
    auto pod = d.DecodePodObject(body);
    ASSERT_TRUE(pod.ok()) << c.name << ": " << pod.status();
    EXPECT_EQ(pod->topology_request.rule, c.rule) << c.name;
    EXPECT_EQ(pod->topology_request.level, c.level) << c.name;
    EXPECT_EQ(pod->topology_request.source, c.source) << c.name;
    EXPECT_EQ(pod->topology_request.error, c.error) << c.name;
    EXPECT_EQ(pod->gpu.count, 4) << c.name;  // the rest of the pod decodes as before
  }
}

TEST(TopologyVolcano, PodGroupNetworkTopology) {
  const struct {
    const char* name;
    Json spec;
    TopologyRule rule;
    int32_t tier;
    std::string error;  // substring; "" = valid
  } kCases[] = {
      {"absent", {{"minMember", 4}}, TopologyRule::kNone, 0, ""},
      {"hard tier 2",
       {{"minMember", 4}, {"networkTopology", {{"mode", "hard"}, {"highestTierAllowed", 2}}}},
       TopologyRule::kRequired,
       2,
       ""},
      {"soft tier 1",
       {{"minMember", 4}, {"networkTopology", {{"mode", "soft"}, {"highestTierAllowed", 1}}}},
       TopologyRule::kPreferred,
       1,
       ""},
      {"defaults: hard, tier 1",
       {{"minMember", 4}, {"networkTopology", Json::object()}},
       TopologyRule::kRequired,
       1,
       ""},
      {"bad mode",
       {{"minMember", 4}, {"networkTopology", {{"mode", "strict"}}}},
       TopologyRule::kNone,
       0,
       "PodGroup pg spec.networkTopology.mode: 'strict' is not hard or soft"},
      {"tier 0",
       {{"minMember", 4}, {"networkTopology", {{"highestTierAllowed", 0}}}},
       TopologyRule::kRequired,
       0,
       "PodGroup pg spec.networkTopology.highestTierAllowed: tier 0 is out of range"},
      {"tier not a number",
       {{"minMember", 4}, {"networkTopology", {{"highestTierAllowed", "two"}}}},
       TopologyRule::kRequired,
       0,
       "spec.networkTopology.highestTierAllowed"},
      {"tier name",
       {{"minMember", 4}, {"networkTopology", {{"highestTierName", "spine"}}}},
       TopologyRule::kRequired,
       0,
       "highestTierName is not supported"},
      {"not an object",
       {{"minMember", 4}, {"networkTopology", "hard"}},
       TopologyRule::kNone,
       0,
       "PodGroup pg spec.networkTopology: not an object"},
  };
  for (const auto& c : kCases) {
    const Json body = {
        {"apiVersion", "scheduling.volcano.sh/v1beta1"}, {"kind", "PodGroup"}, {"spec", c.spec}};
    auto spec = codec::DecodeGangOwner(GangOwnerKind::kVolcanoPodGroup, "pg", body.dump());
    ASSERT_TRUE(spec.ok()) << c.name << ": " << spec.status();
    EXPECT_EQ(spec->size, 4) << c.name;  // a bad networkTopology never loses the size
    if (c.error.empty()) {
      EXPECT_EQ(spec->topology.error, "") << c.name;
      EXPECT_EQ(spec->topology.rule, c.rule) << c.name;
      EXPECT_EQ(spec->topology.tier, c.tier) << c.name;
    } else {
      EXPECT_NE(spec->topology.error.find(c.error), std::string::npos)
          << c.name << ": " << spec->topology.error;
    }
  }
  // Only Volcano's PodGroup has one.
  const Json pg = {{"spec", {{"minMember", 2}, {"networkTopology", {{"mode", "hard"}}}}}};
  auto plugins = codec::DecodeGangOwner(GangOwnerKind::kPodGroup, "pg", pg.dump());
  ASSERT_TRUE(plugins.ok());
  EXPECT_EQ(plugins->topology.rule, TopologyRule::kNone);
}

PodRequest WithRequests(TopologyRequest own, TopologyRequest group) {
  PodRequest p;
  p.topology_request = std::move(own);
  p.group_topology = std::move(group);
  return p;
}

TEST(TopologyResolve, LevelsTiersAndConflicts) {
  const std::vector<std::string> levels = {kClique, kBlock, kRack, kHostnameLevel};
  const TopologyRequest none;
  const TopologyRequest req_rack{TopologyRule::kRequired, kRack, 0, "ann-r", ""};
  const TopologyRequest pref_block{TopologyRule::kPreferred, kBlock, 0, "ann-p", ""};
  const TopologyRequest unknown{TopologyRule::kRequired, "example.com/row", 0, "ann-x", ""};
  const TopologyRequest unconstrained{TopologyRule::kUnconstrained, "", 0, "ann-u", ""};
  auto tier = [](TopologyRule r, int t) { return TopologyRequest{r, "", t, "PodGroup pg", ""}; };
  const struct {
    const char* name;
    PodRequest pod;
    TopologyRule rule;
    std::string level;
    std::string error;  // substring
  } kCases[] = {
      {"nothing", WithRequests(none, none), TopologyRule::kNone, "", ""},
      {"annotation", WithRequests(req_rack, none), TopologyRule::kRequired, kRack, ""},
      {"unconstrained", WithRequests(unconstrained, none), TopologyRule::kNone, "", ""},
      {"hostname is always a level",
       WithRequests({TopologyRule::kRequired, kHostnameLevel, 0, "a", ""}, none),
       TopologyRule::kRequired, kHostnameLevel, ""},
      {"tier 1 = the level above the node", WithRequests(none, tier(TopologyRule::kRequired, 1)),
       TopologyRule::kRequired, kRack, ""},
      {"tier 3 = the largest", WithRequests(none, tier(TopologyRule::kPreferred, 3)),
       TopologyRule::kPreferred, kClique, ""},
      {"tier out of range", WithRequests(none, tier(TopologyRule::kRequired, 4)),
       TopologyRule::kNone, "", "PodGroup pg: tier 4 is out of range"},
      {"level not configured", WithRequests(unknown, none), TopologyRule::kNone, "",
       "ann-x: level 'example.com/row' is not configured"},
      {"annotation and PodGroup agree", WithRequests(req_rack, tier(TopologyRule::kRequired, 1)),
       TopologyRule::kRequired, kRack, ""},
      {"annotation and PodGroup disagree",
       WithRequests(pref_block, tier(TopologyRule::kRequired, 1)), TopologyRule::kNone, "",
       "ann-p and PodGroup pg disagree (prefers one " + std::string(kBlock) + " vs requires one " +
           kRack + ")"},
      {"unconstrained against a PodGroup",
       WithRequests(unconstrained, tier(TopologyRule::kRequired, 1)), TopologyRule::kNone, "",
       "ann-u and PodGroup pg disagree"},
      {"decode error", WithRequests({TopologyRule::kNone, "", 0, "", "bad annotations"}, none),
       TopologyRule::kNone, "", "bad annotations"},
  };
  for (const auto& c : kCases) {
    const ResolvedTopology r = ResolveTopology(c.pod, levels);
    if (c.error.empty()) {
      EXPECT_EQ(r.error, "") << c.name;
      EXPECT_EQ(r.rule, c.rule) << c.name;
      EXPECT_EQ(r.level, c.level) << c.name;
    } else {
      EXPECT_NE(r.error.find(c.error), std::string::npos) << c.name << ": " << r.error;
    }
  }
  // No levels configured: every request is ignored, as before topology.
  for (const auto& c : kCases) {
    const ResolvedTopology r = ResolveTopology(c.pod, {});
    EXPECT_EQ(r, ResolvedTopology{}) << c.name;
  }
}

Json Node(const std::string& name, Json labels) {
  return {{"metadata", {{"name", name}, {"labels", std::move(labels)}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
}

TEST(TopologyNodeLabels, DecoderKeepsPlaceLabelsOnly) {
  codec::RequestDecoder d;
  const Json node = Node("n0", {{kClique, "c1"},
                                {kRack, "r7"},
                                {"kubernetes.io/hostname", "n0"},
                                {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                {"nvidia.com/gpu.count", "8"},
                                {"feature.node.kubernetes.io/cpu-cpuid.AVX512F", "true"}});
  std::string body = node.dump();
  auto spec = d.DecodeNodeObject(body);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_NE(spec->labels, nullptr);
  EXPECT_EQ(*spec->labels, (NodeLabels{{"cloud.provider.com/topology-rack", "r7"},
                                       {"kubernetes.io/hostname", "n0"},
                                       {kClique, "c1"}}));
  ASSERT_NE(FindLabel(spec->labels.get(), kClique), nullptr);
  EXPECT_EQ(*FindLabel(spec->labels.get(), kClique), "c1");
  EXPECT_EQ(FindLabel(spec->labels.get(), "nvidia.com/gpu.product"), nullptr);
  EXPECT_EQ(spec->product, "NVIDIA-H100-80GB-HBM3");  // still read as before
}

}  // namespace
}  // namespace gpusched
