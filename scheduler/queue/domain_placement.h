// Gang placement by topology domain (docs/queue.md, "Topology-aware
// gangs"): where a gang's missing members go when the gang requires or
// prefers one domain of a level (gpusched/model/topology_domains.h).
//
//  - Required: every member in one domain. Among the domains that can hold
//    all missing members, the one with the fewest free GPUs (best fit;
//    ties: the domain name), so a small gang never breaks a big free domain
//    while a smaller one can hold it. Members already running pin the
//    domain to theirs. No domain fits: no picks, and `why` names the level
//    and the best domain.
//  - Preferred: one domain as above if one fits; else one domain of the
//    next larger configured level, and so on up to the first level (level
//    climbing, as Kueue TAS does for podset-preferred-topology); else the
//    fewest domains of the largest level tried (most room first) that
//    together hold the gang; else anywhere.
//  - Inside the chosen domain(s) members go where they score best, as
//    PlaceMembers places them.
//
// Callers: gang reservations (QueueManager::PlaceGang, without the queue
// mutex) and the simulator through them. Pure over its arguments; not
// thread-safe per call (no shared state).
#ifndef GPUSCHED_QUEUE_DOMAIN_PLACEMENT_H_
#define GPUSCHED_QUEUE_DOMAIN_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/model/topology_domains.h"
#include "gpusched/policy/framework.h"
#include "scheduler/queue/quota_ledger.h"

namespace gpusched::queue {

// Room for a gang's members per domain of one level.
struct DomainRoom {
  int32_t domain = -1;       // index into TopologyDomains
  int32_t members = 0;       // missing members it can hold (at most `missing`)
  int64_t free_gpus = 0;     // whole free GPUs on its schedulable nodes
  int64_t healthy_gpus = 0;  // healthy GPUs on its schedulable nodes, free or not
};

// Room per node for `missing` copies of `pod` (indexed like
// snapshot.nodes()): the copies that pass the filter and fit the node's
// devices, CPU and memory one after another (quota not counted), at most
// `missing`; and its whole free and healthy GPUs (0 when unschedulable).
// What every level's room is summed from. `usable`: the nodes (indexes, in
// order) where one copy passes the filter and fits the devices, CPU and
// memory not counted: the only nodes PlaceMembers could pick a first
// member on (it filters a node and places on its devices the same way).
struct NodeRooms {
  std::vector<int32_t> copies;
  std::vector<int32_t> free_gpus;
  std::vector<int32_t> healthy_gpus;
  std::vector<int32_t> usable;
};
NodeRooms RoomPerNode(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                      const PodRequest& pod, int32_t missing);

// The room per domain of `domains` (indexed like domains.names), summed
// from `nodes`.
std::vector<DomainRoom> RoomIn(const NodeRooms& nodes, const TopologyDomains& domains,
                               int32_t missing);

// RoomIn(RoomPerNode(...), domains, missing).
std::vector<DomainRoom> RoomPerDomain(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                      const PodRequest& pod, const TopologyDomains& domains,
                                      int32_t missing);

// The domains of the members of `pod`'s gang that hold GPUs (not its
// reservation holders), -1 among them for a node without the label; empty
// when none is running (always when `missing` is the whole gang).
std::vector<int32_t> HeldDomains(const ClusterSnapshot& snapshot, const PodRequest& pod,
                                 const TopologyDomains& domains, int32_t missing);

// The best-fit order: the domains that hold `missing`, fewest free GPUs
// first, ties by name.
std::vector<int32_t> BestFitOrder(const std::vector<DomainRoom>& rooms,
                                  const TopologyDomains& domains, int32_t missing);

struct TopologyPlacement {
  std::vector<std::pair<std::string, DeviceMask>> picks;  // (node, devices) per member
  // The domain the members went to, or "" (several, or anywhere).
  std::string domain;
  // The level of `domain`, or of the domains spanned ("" anywhere): a
  // preferred gang's own level or one it climbed to.
  std::string level;
  int32_t domains_used = 0;
  std::string why;  // no picks for a required gang: why (without "gpusched: ")
};

// Places `missing` members of `pod`'s gang (see above). `topology` must be
// kRequired or kPreferred without error; a preferred one climbs through
// `topology.climb`. Domains come from CachedDomainsAt (computed once per
// snapshot labels epoch).
TopologyPlacement PlaceInDomains(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                                 const PodRequest& pod, const QuotaLedger& ledger, int32_t missing,
                                 bool by_scan, const ResolvedTopology& topology);

// Why `pod`'s gang would wait for its topology now, as PlaceInDomains
// would say it (an invalid request included), or "" (no request, or a
// domain holds its `missing` members). For /debug/pods.
std::string TopologyWaitReason(const ClusterSnapshot& snapshot, const policy::Framework& fw,
                               const PodRequest& pod, int32_t missing,
                               const std::vector<std::string>& levels);

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_DOMAIN_PLACEMENT_H_
