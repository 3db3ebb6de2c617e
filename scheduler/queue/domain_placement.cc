#include "scheduler/queue/domain_placement.h"

#include <algorithm>
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

std::vector<DomainRoom> RoomPerDomain(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                      const PodRequest& pod, const TopologyDomains& domains,
                                      int32_t missing) {
  const policy::PodContext ctx = fw.Prepare(pod, snapshot);
  policy::FilterMemo memo(fw, ctx);
  absl::flat_hash_map<int32_t, int32_t> copies_by_state;  // filter entry id -> device copies
  std::vector<DomainRoom> rooms(domains.names.size());
  for (size_t d = 0; d < rooms.size(); ++d) {
    DomainRoom& room = rooms[d];
    room.domain = static_cast<int32_t>(d);
    for (int32_t k : domains.nodes[d]) {
      const NodeHot& hot = snapshot.hot(k);
      const NodeInfo& n = *hot.info;
      if (!n.unschedulable) {
        room.free_gpus += PopCount(hot.whole_free);
        room.healthy_gpus += PopCount(hot.healthy);
      }
      if (room.members >= missing) continue;
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
      copies = std::min({copies, BoundBy(hot.cpu_free_milli, pod.cpu_milli, missing),
                         BoundBy(n.memory_mib - n.memory_used_mib, pod.memory_mib, missing)});
      room.members = std::min(missing, room.members + std::max(copies, 0));
    }
  }
  return rooms;
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

TopologyPlacement PlaceInDomains(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                 const PodRequest& pod, const QuotaLedger& ledger, int32_t missing,
                                 bool by_scan, const ResolvedTopology& topology) {
  TopologyPlacement out;
  const TopologyDomains domains = DomainsAt(snapshot, topology.level);
  std::vector<DomainRoom> rooms = RoomPerDomain(snapshot, fw, pod, domains, missing);
  const std::vector<int32_t> held = HeldDomains(snapshot, pod, domains, missing);
  const bool required = topology.rule == TopologyRule::kRequired;
  if (required && (held.size() > 1 || (held.size() == 1 && held[0] < 0))) {
    out.why = StrCat("gang ", pod.gang, " requires one ", domains.level,
                     " but its running members are not in one (",
                     held.size() > 1 ? "they span several" : "a node of theirs has no label",
                     "); it waits until they finish");
    return out;
  }
  for (int32_t d : BestFitOrder(rooms, domains, missing)) {
    if (held.size() == 1 && held[0] != d) continue;
    out.picks = PlaceMembers(snapshot, fw, pod, ledger, missing, by_scan, &domains.nodes[d]);
    if (static_cast<int32_t>(out.picks.size()) == missing) {
      out.domain = domains.names[d];
      out.domains_used = 1;
      return out;
    }
  }
  out.picks.clear();
  if (required) {
    out.why = NoDomainReason(pod, missing, domains, rooms);
    return out;
  }
  // Preferred: the fewest domains, most room first.
  std::sort(rooms.begin(), rooms.end(), [&](const DomainRoom& a, const DomainRoom& b) {
    if (a.members != b.members) return a.members > b.members;
    if (a.free_gpus != b.free_gpus) return a.free_gpus < b.free_gpus;
    return domains.names[a.domain] < domains.names[b.domain];
  });
  NodeSubset nodes;
  int32_t room = 0;
  for (const DomainRoom& r : rooms) {
    if (room >= missing || r.members == 0) break;
    room += r.members;
    nodes.insert(nodes.end(), domains.nodes[r.domain].begin(), domains.nodes[r.domain].end());
    ++out.domains_used;
  }
  if (room >= missing) {
    std::sort(nodes.begin(), nodes.end());
    out.picks = PlaceMembers(snapshot, fw, pod, ledger, missing, by_scan, &nodes);
    if (static_cast<int32_t>(out.picks.size()) == missing) return out;
  }
  out.domains_used = 0;
  out.picks = PlaceMembers(snapshot, fw, pod, ledger, missing, by_scan);
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
  const TopologyDomains domains = DomainsAt(snapshot, topology.level);
  const std::vector<DomainRoom> rooms = RoomPerDomain(snapshot, fw, pod, domains, missing);
  if (!BestFitOrder(rooms, domains, missing).empty()) return "";
  return StrCat("gpusched: ", NoDomainReason(pod, missing, domains, rooms));
}

}  // namespace gpusched::queue
