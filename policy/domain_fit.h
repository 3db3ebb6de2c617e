// DomainFit: best fit applied to topology domains, for the pods the gang
// domain placement does not place (single pods; inside a gang's chosen
// domain, its members' nodes). A pod should go to a domain that is already
// partly used rather than break a whole free one, so that gangs, which need
// a whole rack, block or NVLink clique (docs/queue.md, "Topology-aware
// gangs"), still find one.
//
// Levels: the policy file's gang.topologyLevels without
// kubernetes.io/hostname (the node level is the other scorers' job). For a
// level and the node's domain D there, over D's schedulable nodes in the
// snapshot (healthy H, whole free F GPUs):
//   D whole (F == H)        -> 0      placing here breaks a whole domain
//   D partly used (F < H)   -> 50 + 50 * (H - F) / H   fuller is better
//   node in no domain       -> 100    (no label: it breaks no domain)
//   H == 0                  -> 100
// score = the mean over the levels (integer division).
// Example, racks of 4 nodes x 8 GPUs (H = 32), one level: a rack with 12
// GPUs in use scores 50 + 50 * 12 / 32 = 68; a whole rack 0. With blocks of
// 4 such racks above, 20 of the block's 128 GPUs in use: 50 + 50*20/128 = 57,
// and the node in the 12-GPU rack scores (57 + 68) / 2 = 62.
// Pods without GPUs: 100 on every node.
//
// The domain figures are computed once per request from the whole snapshot
// (PodContext::memo) and never from the node scored, so every node of a
// domain scores the same for one request (RoomFinder relies on this). Not
// in the framework at all without levels (ScoringSpec::topology_levels).
//
// Private to policy/; built by Framework::Create. Pure; thread-safe.
#ifndef GPUSCHED_POLICY_DOMAIN_FIT_H_
#define GPUSCHED_POLICY_DOMAIN_FIT_H_

#include <string>
#include <vector>

#include "gpusched/policy/policy.h"

namespace gpusched::policy {

// The levels DomainFit scores by: `levels` without kubernetes.io/hostname.
std::vector<std::string> DomainFitLevels(const std::vector<std::string>& levels);

class DomainFitScorer final : public ScorePolicy {
 public:
  static constexpr char kName[] = "DomainFit";
  // `levels`: node-label keys, largest domain first (see DomainFitLevels).
  explicit DomainFitScorer(std::vector<std::string> levels) : levels_(DomainFitLevels(levels)) {}
  std::string_view Name() const override { return kName; }
  int64_t Score(const PodContext& ctx, const NodeInfo& node) const override;
  bool UsesRequestMemo() const override { return true; }
  const std::vector<std::string>& levels() const { return levels_; }

 private:
  std::vector<std::string> levels_;
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_DOMAIN_FIT_H_
