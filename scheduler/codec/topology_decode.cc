// Topology requests from pod annotations and Volcano PodGroups
// (internal/topology_decode.h).
#include "scheduler/codec/internal/topology_decode.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <string>

#include "gpusched/util/strings.h"

namespace gpusched::codec {
namespace {

// A string annotation; nullopt if absent; `*bad` set if present but not a
// string.
std::optional<std::string_view> StringAnnotation(const Object& ann, std::string_view key,
                                                 bool* bad) {
  auto m = Member(ann, key);
  if (!m) return std::nullopt;
  std::string_view v;
  if (m->get_string().get(v) != simdjson::SUCCESS) {
    *bad = true;
    return std::nullopt;
  }
  return v;
}

struct LevelAnnotation {
  const char* key;
  TopologyRule rule;
};

constexpr std::array<LevelAnnotation, 4> kLevelAnnotations = {{
    {kAnnotationTopologyRequired, TopologyRule::kRequired},
    {kAnnotationTopologyPreferred, TopologyRule::kPreferred},
    {kAnnotationKueueRequired, TopologyRule::kRequired},
    {kAnnotationKueuePreferred, TopologyRule::kPreferred},
}};

TopologyRequest Invalid(std::string why) {
  TopologyRequest r;
  r.error = std::move(why);
  return r;
}

}  // namespace

TopologyRequest DecodeTopologyAnnotations(const Object& ann) {
  TopologyRequest out;
  auto take = [&out](TopologyRequest r) -> bool {  // false: conflict (out says why)
    if (out.rule == TopologyRule::kNone) {
      out = std::move(r);
      return true;
    }
    if (out.rule == r.rule && out.level == r.level) return true;
    out = Invalid(StrCat("annotations ", out.source, " and ", r.source,
                         " ask for different topology; keep one"));
    return false;
  };
  for (const LevelAnnotation& a : kLevelAnnotations) {
    bool bad = false;
    auto v = StringAnnotation(ann, a.key, &bad);
    if (bad) return Invalid(StrCat("annotation ", a.key, " is not a string"));
    if (!v) continue;
    if (v->empty()) return Invalid(StrCat("annotation ", a.key, " is empty (it names a level)"));
    if (!take({a.rule, std::string(*v), 0, a.key, ""})) return out;
  }
  bool bad = false;
  auto u = StringAnnotation(ann, kAnnotationKueueUnconstrained, &bad);
  if (bad || (u && *u != "true" && *u != "false")) {
    return Invalid(
        StrCat("annotation ", kAnnotationKueueUnconstrained, " is not \"true\" or \"false\""));
  }
  if (u && *u == "true")
    take({TopologyRule::kUnconstrained, "", 0, kAnnotationKueueUnconstrained, ""});
  return out;
}

TopologyRequest DecodeNetworkTopology(const Object& spec, std::string_view group_name) {
  const std::string path = "spec.networkTopology";
  TopologyRequest out;
  out.source = StrCat("PodGroup ", group_name, " ", path);
  auto nt = Member(spec, "networkTopology");
  if (!nt) return {};
  Object o;
  if (nt->get_object().get(o) != simdjson::SUCCESS) {
    out.error = StrCat(out.source, ": not an object");
    return out;
  }
  auto mode = OptString(o, "mode", path);
  if (!mode.ok()) {
    out.error = StrCat("PodGroup ", group_name, " ", FromAbsl(mode.status().message()));
    return out;
  }
  const std::string_view m = mode->value_or("hard");
  if (m != "hard" && m != "soft") {
    out.error = StrCat(out.source, ".mode: '", m, "' is not hard or soft");
    return out;
  }
  out.rule = m == "hard" ? TopologyRule::kRequired : TopologyRule::kPreferred;
  auto tier = OptInt(o, "highestTierAllowed", path);
  if (!tier.ok()) {
    out.error = StrCat("PodGroup ", group_name, " ", FromAbsl(tier.status().message()));
    return out;
  }
  if (Member(o, "highestTierName")) {
    out.error = StrCat(out.source, ".highestTierName is not supported (HyperNode tier names ",
                       "are not node labels); use highestTierAllowed");
    return out;
  }
  const int64_t t = tier->value_or(1);
  if (t < 1 || t > 1000) {
    out.error = StrCat(out.source, ".highestTierAllowed: tier ", t,
                       " is out of range (tier 1 is the level just above the node)");
    return out;
  }
  out.tier = static_cast<int32_t>(t);
  return out;
}

}  // namespace gpusched::codec
