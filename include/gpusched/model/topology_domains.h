// Topology domains for gangs (docs/queue.md, "Topology-aware gangs"): the
// groups of nodes that share the value of one node label, a level of the
// policy file's gang.topologyLevels (ordered from the largest domain to the
// node), computed from an immutable ClusterSnapshot; and a gang member's
// topology request resolved against those levels.
//
// Callers: the queue's gang placement and preemption (scheduler/queue), the
// simulator. Pure functions over their arguments, no lock (CachedDomainsAt:
// one atomic pointer per snapshot epoch); thread-safe.
#ifndef GPUSCHED_MODEL_TOPOLOGY_DOMAINS_H_
#define GPUSCHED_MODEL_TOPOLOGY_DOMAINS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/model/pod.h"
#include "gpusched/model/snapshot.h"

namespace gpusched {

// The node level. Listed or not, it is always the lowest level: its domains
// are the nodes themselves (by name, whether or not the label is set).
inline constexpr char kHostnameLevel[] = "kubernetes.io/hostname";

// The domains of one level on one snapshot.
struct TopologyDomains {
  std::string level;  // the label key
  // Domain d: its label value and its nodes (indices into
  // snapshot.nodes(), ascending). Domains are numbered in the order of
  // their first node.
  std::vector<std::string> names;
  std::vector<std::vector<int32_t>> nodes;
  std::vector<int32_t> domain_of;  // per node index: its domain, or -1
  int32_t unlabelled = 0;          // nodes without the label: in no domain
};

// O(nodes); reads only the snapshot.
TopologyDomains DomainsAt(const ClusterSnapshot& snapshot, std::string_view level);

// The levels computed so far for one LabelsEpoch (snapshot.h). Immutable.
struct DomainMemo {
  std::vector<std::shared_ptr<const TopologyDomains>> levels;
};

// DomainsAt, computed once per labels epoch and level: every snapshot that
// shares the epoch (same node set, same labels; pods and devices may
// differ) gets the same object. No lock: a reader loads the epoch's memo;
// a miss computes the level and publishes a new memo with it
// (compare-and-swap; two racing misses compute equal results).
std::shared_ptr<const TopologyDomains> CachedDomainsAt(const ClusterSnapshot& snapshot,
                                                       std::string_view level);

// A gang member's topology request, resolved.
struct ResolvedTopology {
  // kNone: place as without topology (no request, Kueue's unconstrained, or
  // no levels configured: requests are then ignored).
  TopologyRule rule = TopologyRule::kNone;
  std::string level;   // a configured level's label key
  std::string source;  // where the request was read
  // Not empty: the request cannot be honoured (why, naming the source); the
  // gang must not be placed.
  std::string error;
  // kPreferred: the configured levels larger than `level`, the next larger
  // first, up to the first of gang.topologyLevels: where the gang climbs
  // when no domain of `level` can hold it (docs/queue.md). Empty otherwise.
  std::vector<std::string> climb;
  bool operator==(const ResolvedTopology&) const = default;
};

// The request of `pod`'s annotations and of its gang's object, against
// `levels` (largest domain first). Errors: a decode error on either, the
// two disagreeing, a level not in `levels`, a Volcano tier out of range.
// A Volcano tier t counts up from the node: tier 1 is the last level other
// than kHostnameLevel, tier k (k such levels) the first.
ResolvedTopology ResolveTopology(const PodRequest& pod, const std::vector<std::string>& levels);

// "requires one nvidia.com/gpu.clique" / "prefers one ..." / "" (kNone).
std::string DescribeTopology(const ResolvedTopology& t);

}  // namespace gpusched

#endif  // GPUSCHED_MODEL_TOPOLOGY_DOMAINS_H_
