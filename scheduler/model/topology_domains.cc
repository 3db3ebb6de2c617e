#include "gpusched/model/topology_domains.h"

#include <algorithm>
#include <iterator>

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

std::shared_ptr<const TopologyDomains> CachedDomainsAt(const ClusterSnapshot& snapshot,
                                                       std::string_view level) {
  auto& slot = snapshot.labels_epoch().domains;
  std::shared_ptr<const DomainMemo> memo = slot.load(std::memory_order_acquire);
  auto find = [&](const DomainMemo* m) -> std::shared_ptr<const TopologyDomains> {
    if (m == nullptr) return nullptr;
    for (const auto& d : m->levels) {
      if (d->level == level) return d;
    }
    return nullptr;
  };
  if (auto hit = find(memo.get())) return hit;
  auto computed = std::make_shared<const TopologyDomains>(DomainsAt(snapshot, level));
  for (;;) {
    auto next = std::make_shared<DomainMemo>();
    if (memo != nullptr) next->levels = memo->levels;
    next->levels.push_back(computed);
    std::shared_ptr<const DomainMemo> publish = std::move(next);
    if (slot.compare_exchange_weak(memo, publish, std::memory_order_acq_rel)) return computed;
    // Another reader published meanwhile (`memo` is its memo now).
    if (auto hit = find(memo.get())) return hit;
  }
}

namespace {

std::string LevelList(const std::vector<std::string>& levels) {
  std::string s = "[";
  for (size_t i = 0; i < levels.size(); ++i) StrAppend(&s, i ? ", " : "", levels[i]);
  return s + "]";
}

// The levels a preferred request climbs to: those listed before its own
// (larger), the next larger first. The node level, unlisted, is below all.
std::vector<std::string> Climb(const ResolvedTopology& t, const std::vector<std::string>& levels) {
  std::vector<std::string> out;
  if (t.rule != TopologyRule::kPreferred) return out;
  auto own = std::find(levels.begin(), levels.end(), t.level);
  for (auto it = std::make_reverse_iterator(own); it != levels.rend(); ++it) {
    if (*it != kHostnameLevel) out.push_back(*it);
  }
  return out;
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
    out.climb = Climb(out, levels);
    return out;
  }
  if (std::find(levels.begin(), levels.end(), r.level) == levels.end() &&
      r.level != kHostnameLevel) {
    out.error = StrCat(r.source, ": level '", r.level,
                       "' is not configured (gang.topologyLevels: ", LevelList(levels), ")");
    return out;
  }
  out.level = r.level;
  out.climb = Climb(out, levels);
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
