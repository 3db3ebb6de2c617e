#include "policy/domain_fit.h"

#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "gpusched/model/topology_domains.h"

namespace gpusched::policy {
namespace {

// One request's domain figures (DomainFitScorer::Score reads them).
struct DomainScores {
  // A node's score by its labels (nodes keep their labels' object in every
  // version, including the hypothetical copies preemption planning makes).
  absl::flat_hash_map<const NodeLabels*, int64_t> by_labels;
  // For a node whose labels the snapshot does not hold: per level, the
  // level's score by domain name.
  std::vector<absl::flat_hash_map<std::string, int64_t>> by_name;
};

int64_t LevelScore(int64_t healthy, int64_t free) {
  if (healthy <= 0) return kMaxNodeScore;
  if (free >= healthy) return kMinNodeScore;  // whole
  return 50 + 50 * (healthy - free) / healthy;
}

using Domains = std::shared_ptr<const TopologyDomains>;

// Per level, each domain's score.
std::vector<std::vector<int64_t>> LevelScores(const ClusterSnapshot& snapshot,
                                              const std::vector<Domains>& domains) {
  std::vector<std::vector<int64_t>> out(domains.size());
  for (size_t l = 0; l < domains.size(); ++l) {
    for (const std::vector<int32_t>& members : domains[l]->nodes) {
      int64_t healthy = 0, free = 0;
      for (int32_t k : members) {
        const NodeHot& hot = snapshot.hot(k);
        if (hot.info->unschedulable) continue;
        healthy += PopCount(hot.healthy);
        free += PopCount(hot.whole_free);
      }
      out[l].push_back(LevelScore(healthy, free));
    }
  }
  return out;
}

std::shared_ptr<const DomainScores> Build(const ClusterSnapshot& snapshot,
                                          const std::vector<std::string>& levels) {
  std::vector<Domains> domains;  // computed once per snapshot labels epoch
  for (const std::string& level : levels) domains.push_back(CachedDomainsAt(snapshot, level));
  const std::vector<std::vector<int64_t>> scores = LevelScores(snapshot, domains);
  auto out = std::make_shared<DomainScores>();
  out->by_name.resize(levels.size());
  for (size_t l = 0; l < levels.size(); ++l) {
    for (size_t d = 0; d < scores[l].size(); ++d) {
      out->by_name[l].emplace(domains[l]->names[d], scores[l][d]);
    }
  }
  const auto& nodes = snapshot.nodes();
  out->by_labels.reserve(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    int64_t sum = 0;
    for (size_t l = 0; l < levels.size(); ++l) {
      const int32_t d = domains[l]->domain_of[k];
      sum += d < 0 ? kMaxNodeScore : scores[l][d];
    }
    out->by_labels.emplace(nodes[k]->labels.get(), sum / static_cast<int64_t>(levels.size()));
  }
  return out;
}

int64_t ByName(const DomainScores& s, const std::vector<std::string>& levels,
               const NodeInfo& node) {
  int64_t sum = 0;
  for (size_t l = 0; l < levels.size(); ++l) {
    const std::string* value = FindLabel(node.labels.get(), levels[l]);
    auto it = value == nullptr ? s.by_name[l].end() : s.by_name[l].find(*value);
    sum += it == s.by_name[l].end() ? kMaxNodeScore : it->second;
  }
  return sum / static_cast<int64_t>(levels.size());
}

}  // namespace

std::vector<std::string> DomainFitLevels(const std::vector<std::string>& levels) {
  std::vector<std::string> out;
  for (const std::string& l : levels) {
    if (l != kHostnameLevel) out.push_back(l);
  }
  return out;
}

int64_t DomainFitScorer::Score(const PodContext& ctx, const NodeInfo& node) const {
  if (!ctx.wants_gpus() || levels_.empty()) return kMaxNodeScore;
  std::shared_ptr<const DomainScores> own;
  const DomainScores* scores = nullptr;
  if (ctx.memo != nullptr) {
    std::call_once(ctx.memo->once, [&] { ctx.memo->value = Build(*ctx.snapshot, levels_); });
    scores = static_cast<const DomainScores*>(ctx.memo->value.get());
  } else {  // a context Framework::Prepare did not make: no memo to keep
    own = Build(*ctx.snapshot, levels_);
    scores = own.get();
  }
  auto it = scores->by_labels.find(node.labels.get());
  return it != scores->by_labels.end() ? it->second : ByName(*scores, levels_, node);
}

}  // namespace gpusched::policy
