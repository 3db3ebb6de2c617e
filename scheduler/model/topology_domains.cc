#include "gpusched/model/topology_domains.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "gpusched/util/strings.h"

namespace gpusched {

TopologyDomains DomainsAt(const ClusterSnapshot& snapshot, std::string_view level) {
  TopologyDomains out;
  out.level = std::string(level);
  const auto& nodes = snapshot.nodes();
  out.domain_of.assign(nodes.size(), -1);
  const bool hostname = level == kHostnameLevel;
  absl::flat_hash_map<std::string_view, int32_t> ids;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::string* value =
        hostname ? &nodes[k]->name : FindLabel(nodes[k]->labels.get(), level);
    if (value == nullptr) {
      ++out.unlabelled;
      continue;
    }
    auto [it, added] = ids.try_emplace(*value, static_cast<int32_t>(out.names.size()));
    if (added) {
      out.names.push_back(*value);
      out.nodes.emplace_back();
    }
    out.domain_of[k] = it->second;
    out.nodes[it->second].push_back(static_cast<int32_t>(k));
  }
  return out;
}

namespace {

std::string LevelList(const std::vector<std::string>& levels) {
  std::string s = "[";
  for (size_t i = 0; i < levels.size(); ++i) StrAppend(&s, i ? ", " : "", levels[i]);
  return s + "]";
}

// One source's request resolved on its own.
ResolvedTopology ResolveOne(const TopologyRequest& r, const std::vector<std::string>& levels) {
  ResolvedTopology out;
  out.source = r.source;
  if (!r.error.empty()) {
    out.error = r.error;
    return out;
  }
  if (r.rule == TopologyRule::kNone || r.rule == TopologyRule::kUnconstrained) return out;
  out.rule = r.rule;
  if (r.tier != 0) {
    std::vector<std::string> tiers;  // tier 1 first
    for (auto it = levels.rbegin(); it != levels.rend(); ++it) {
      if (*it != kHostnameLevel) tiers.push_back(*it);
    }
    if (r.tier < 1 || r.tier > static_cast<int32_t>(tiers.size())) {
      out.error = StrCat(r.source, ": tier ", r.tier, " is out of range: the configured levels ",
                         LevelList(levels), " give tiers 1..", tiers.size(),
                         " (tier 1 = the level just above the node)");
      return out;
    }
    out.level = tiers[r.tier - 1];
    return out;
  }
  if (std::find(levels.begin(), levels.end(), r.level) == levels.end() &&
      r.level != kHostnameLevel) {
    out.error = StrCat(r.source, ": level '", r.level,
                       "' is not configured (gang.topologyLevels: ", LevelList(levels), ")");
    return out;
  }
  out.level = r.level;
  return out;
}

}  // namespace

ResolvedTopology ResolveTopology(const PodRequest& pod, const std::vector<std::string>& levels) {
  if (levels.empty()) return {};  // topology off: requests are ignored
  ResolvedTopology own = ResolveOne(pod.topology_request, levels);
  ResolvedTopology group = ResolveOne(pod.group_topology, levels);
  if (!own.error.empty()) return own;
  if (!group.error.empty()) return group;
  const bool own_set = pod.topology_request.rule != TopologyRule::kNone;
  const bool group_set = pod.group_topology.rule != TopologyRule::kNone;
  if (own_set && group_set &&
      (pod.topology_request.rule != pod.group_topology.rule || own.level != group.level)) {
    ResolvedTopology bad;
    bad.error = StrCat(pod.topology_request.source, " and ", pod.group_topology.source,
                       " disagree (", DescribeTopology(own), " vs ", DescribeTopology(group), ")");
    return bad;
  }
  return own_set ? own : group;
}

std::string DescribeTopology(const ResolvedTopology& t) {
  switch (t.rule) {
    case TopologyRule::kRequired:
      return StrCat("requires one ", t.level);
    case TopologyRule::kPreferred:
      return StrCat("prefers one ", t.level);
    case TopologyRule::kNone:
    case TopologyRule::kUnconstrained:
      break;
  }
  return "no topology constraint";
}

}  // namespace gpusched
