#include "scheduler/queue/domain_placement.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"
#include "gpusched/util/strings.h"
#include "scheduler/queue/room_finder.h"

namespace gpusched::queue {
namespace {

// Copies of `pod` that fit one after another on `node`'s devices, at most
// `cap`.
int32_t DeviceCopies(const NodeInfo& node, const PodRequest& pod, int32_t cap) {
  int32_t copies = 0;
  std::optional<NodeInfo> cur;
  while (copies < cap) {
    const NodeInfo& n = cur ? *cur : node;
    auto p = policy::ChoosePlacement(pod.gpu, n);
    if (!p.has_value()) break;
    cur = policy::WithPod(n, pod, p->devices);
    ++copies;
  }
  return copies;
}

int32_t BoundBy(int64_t have, int64_t each, int32_t cap) {
  if (each <= 0) return cap;
  return static_cast<int32_t>(std::clamp<int64_t>(have / each, 0, cap));
}

}  // namespace

std::vector<int32_t> HeldDomains(const ClusterSnapshot& snapshot, const PodRequest& pod,
                                 const TopologyDomains& domains, int32_t missing) {
  std::vector<int32_t> held;
  if (missing >= pod.gang_size) return held;
  const auto& nodes = snapshot.nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (const PodOnNode& p : nodes[k]->pods) {
      if (p.reservation || p.gang != pod.gang || p.ns != pod.ns) continue;
      if (std::find(held.begin(), held.end(), domains.domain_of[k]) == held.end()) {
        held.push_back(domains.domain_of[k]);
      }
    }
  }
  return held;
}

namespace {

std::string NoDomainReason(const PodRequest& pod, int32_t missing, const TopologyDomains& domains,
                           const std::vector<DomainRoom>& rooms) {
  const int64_t each = DemandMilli(pod.gpu);
  std::string why = StrCat("gang ", pod.gang, " needs ", FormatGpus(each * missing), " GPUs (",
                           missing, " x ", FormatGpus(each), ") in one ", domains.level);
  if (rooms.empty()) {
    StrAppend(&why, "; no node has the label ", domains.level);
  } else {
    const DomainRoom& best =
        *std::max_element(rooms.begin(), rooms.end(), [](const DomainRoom& a, const DomainRoom& b) {
          return a.members != b.members ? a.members < b.members : a.free_gpus < b.free_gpus;
        });
    StrAppend(&why, "; the best, ", domains.names[best.domain], ", has ", best.free_gpus,
              " GPUs free, room for ", best.members, " of ", missing, " members (", rooms.size(),
              rooms.size() == 1 ? " domain" : " domains");
    if (domains.unlabelled > 0) {
      StrAppend(&why, "; ", domains.unlabelled, " nodes have no ", domains.level,
                " label and are in none");
    }
    StrAppend(&why, ")");
  }
  return why;
}

}  // namespace

NodeRooms RoomPerNode(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                      const PodRequest& pod, int32_t missing) {
  const size_t count = snapshot.nodes().size();
  NodeRooms out;
  out.copies.assign(count, 0);
  out.free_gpus.assign(count, 0);
  out.healthy_gpus.assign(count, 0);
  const policy::PodContext ctx = fw.Prepare(pod, snapshot);
  policy::FilterMemo memo(fw, ctx);
  absl::flat_hash_map<int32_t, int32_t> copies_by_state;  // filter entry id -> device copies
  for (size_t k = 0; k < count; ++k) {
    const NodeHot& hot = snapshot.hot(static_cast<int32_t>(k));
    const NodeInfo& n = *hot.info;
    if (!n.unschedulable) {
      out.free_gpus[k] = PopCount(hot.whole_free);
      out.healthy_gpus[k] = PopCount(hot.healthy);
    }
    if (missing <= 0) continue;
    const policy::FilterMemo::Entry e = memo.FilterEntry(hot);
    if (!e.result->fits()) continue;
    int32_t copies = 0;
    auto it = e.id >= 0 ? copies_by_state.find(e.id) : copies_by_state.end();
    if (it != copies_by_state.end()) {
      copies = it->second;
    } else {
      copies = DeviceCopies(n, pod, missing);
      if (e.id >= 0) copies_by_state.emplace(e.id, copies);
    }
    if (copies > 0) out.usable.push_back(static_cast<int32_t>(k));
    copies = std::min({copies, BoundBy(hot.cpu_free_milli, pod.cpu_milli, missing),
                       BoundBy(n.memory_mib - n.memory_used_mib, pod.memory_mib, missing)});
    out.copies[k] = std::max(copies, 0);
  }
  return out;
}

std::vector<DomainRoom> RoomIn(const NodeRooms& nodes, const TopologyDomains& domains,
                               int32_t missing) {
  std::vector<DomainRoom> rooms(domains.names.size());
  for (size_t d = 0; d < rooms.size(); ++d) {
    DomainRoom& room = rooms[d];
    room.domain = static_cast<int32_t>(d);
    for (int32_t k : domains.nodes[d]) {
      room.free_gpus += nodes.free_gpus[k];
      room.healthy_gpus += nodes.healthy_gpus[k];
      room.members = std::min(missing, room.members + nodes.copies[k]);
    }
  }
  return rooms;
}

std::vector<DomainRoom> RoomPerDomain(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                      const PodRequest& pod, const TopologyDomains& domains,
                                      int32_t missing) {
  return RoomIn(RoomPerNode(snapshot, fw, pod, missing), domains, missing);
}

std::vector<int32_t> BestFitOrder(const std::vector<DomainRoom>& rooms,
                                  const TopologyDomains& domains, int32_t missing) {
  std::vector<int32_t> order;
  for (const DomainRoom& r : rooms) {
    if (r.members >= missing) order.push_back(r.domain);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (rooms[a].free_gpus != rooms[b].free_gpus) return rooms[a].free_gpus < rooms[b].free_gpus;
    return domains.names[a] < domains.names[b];
  });
  return order;
}

namespace {

// One level as a gang's placement sees it: its domains, the room in each
// and the domains of the gang's running members.
struct LevelLook {
  std::shared_ptr<const TopologyDomains> domains;
  std::vector<DomainRoom> rooms;
  std::vector<int32_t> held;
  // Running members in several domains, or on a node without the label:
  // no single domain of the level can hold the whole gang.
  bool Split() const { return held.size() > 1 || (held.size() == 1 && held[0] < 0); }
};

LevelLook Look(const ClusterSnapshot& snapshot, const PodRequest& pod, const std::string& level,
               const NodeRooms& per_node, int32_t missing) {
  LevelLook look;
  look.domains = CachedDomainsAt(snapshot, level);
  look.rooms = RoomIn(per_node, *look.domains, missing);
  look.held = HeldDomains(snapshot, pod, *look.domains, missing);
  return look;
}

// Every member in one domain of `look`'s level, best fit first (the
// running members' domain only). False: none holds them.
bool PlaceInOne(const ClusterSnapshot& snapshot, const policy::Framework& fw, const PodRequest& pod,
                const QuotaLedger& ledger, int32_t missing, bool by_scan, const LevelLook& look,
                TopologyPlacement* out) {
  const TopologyDomains& domains = *look.domains;
  for (int32_t d : BestFitOrder(look.rooms, domains, missing)) {
    if (look.held.size() == 1 && look.held[0] != d) continue;
    out->picks = PlaceMembers(snapshot, fw, pod, ledger, missing, by_scan, &domains.nodes[d]);
    if (static_cast<int32_t>(out->picks.size()) == missing) {
      out->domain = domains.names[d];
      out->level = domains.level;
      out->domains_used = 1;
      return true;
    }
  }
  out->picks.clear();
  return false;
}

// The fewest domains of `look`'s level that together hold the members, most
// room first; else anywhere. Anywhere is placed over `per_node.usable`
// only: a node outside it fails the filter or has no devices for one
// member, so PlaceMembers over every node skips it and picks the same
// nodes in the same order (a gang that does not fit is not walked over
// every node twice). The reference placement (by_scan) walks every node.
void PlaceInFewest(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                   const PodRequest& pod, const QuotaLedger& ledger, int32_t missing, bool by_scan,
                   LevelLook look, const NodeRooms& per_node, TopologyPlacement* out) {
  const TopologyDomains& domains = *look.domains;
  std::sort(look.rooms.begin(), look.rooms.end(), [&](const DomainRoom& a, const DomainRoom& b) {
    if (a.members != b.members) return a.members > b.members;
    if (a.free_gpus != b.free_gpus) return a.free_gpus < b.free_gpus;
    return domains.names[a.domain] < domains.names[b.domain];
  });
  NodeSubset nodes;
  int32_t room = 0;
  for (const DomainRoom& r : look.rooms) {
    if (room >= missing || r.members == 0) break;
    room += r.members;
    nodes.insert(nodes.end(), domains.nodes[r.domain].begin(), domains.nodes[r.domain].end());
    ++out->domains_used;
  }
  if (room >= missing) {
    std::sort(nodes.begin(), nodes.end());
    out->picks = PlaceMembers(snapshot, fw, pod, ledger, missing, by_scan, &nodes);
    if (static_cast<int32_t>(out->picks.size()) == missing) {
      out->level = domains.level;
      return;
    }
  }
  out->domains_used = 0;
  out->picks = PlaceMembers(snapshot, fw, pod, ledger, missing, by_scan,
                            by_scan ? nullptr : &per_node.usable);
}

}  // namespace

TopologyPlacement PlaceInDomains(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                 const PodRequest& pod, const QuotaLedger& ledger, int32_t missing,
                                 bool by_scan, const ResolvedTopology& topology) {
  TopologyPlacement out;
  const bool required = topology.rule == TopologyRule::kRequired;
  const NodeRooms per_node = RoomPerNode(snapshot, fw, pod, missing);
  // A preferred gang climbs: its own level, then each larger one.
  std::vector<std::string> levels = {topology.level};
  if (!required) levels.insert(levels.end(), topology.climb.begin(), topology.climb.end());
  LevelLook look;
  for (const std::string& level : levels) {
    look = Look(snapshot, pod, level, per_node, missing);
    if (look.Split() && required) {
      out.why = StrCat("gang ", pod.gang, " requires one ", level,
                       " but its running members are not in one (",
                       look.held.size() > 1 ? "they span several" : "a node of theirs has no label",
                       "); it waits until they finish");
      return out;
    }
    if (!look.Split() && PlaceInOne(snapshot, fw, pod, ledger, missing, by_scan, look, &out)) {
      return out;
    }
    if (required) {
      out.why = NoDomainReason(pod, missing, *look.domains, look.rooms);
      return out;
    }
  }
  // Preferred, and no level has one domain that holds it.
  PlaceInFewest(snapshot, fw, pod, ledger, missing, by_scan, std::move(look), per_node, &out);
  return out;
}

std::string TopologyWaitReason(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                               const PodRequest& pod, int32_t missing,
                               const std::vector<std::string>& levels) {
  const ResolvedTopology topology = ResolveTopology(pod, levels);
  if (!topology.error.empty()) {
    return StrCat("gpusched: gang ", pod.gang, ": ", topology.error,
                  "; no member is placed until this is fixed");
  }
  if (topology.rule != TopologyRule::kRequired || missing <= 0) return "";
  const std::shared_ptr<const TopologyDomains> domains = CachedDomainsAt(snapshot, topology.level);
  const std::vector<DomainRoom> rooms = RoomPerDomain(snapshot, fw, pod, *domains, missing);
  if (!BestFitOrder(rooms, *domains, missing).empty()) return "";
  return StrCat("gpusched: ", NoDomainReason(pod, missing, *domains, rooms));
}

}  // namespace gpusched::queue
