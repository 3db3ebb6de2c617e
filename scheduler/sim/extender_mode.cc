#include "scheduler/sim/extender_mode.h"

#include <random>
#include <unordered_map>

#include "gpusched/policy/placement.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/extender_client_codec.h"
#include "scheduler/sim/fgd_protocol.h"
#include "scheduler/sim/sim_policy.h"

namespace gpusched::sim {
namespace {

// The pod of arrival `k` as the API server holds it: a unique name and UID
// per arrival (clones share their source's trace name), pending.
PodRequest WirePod(const PodRequest& pod, int64_t k, uint64_t seed) {
  PodRequest wire = pod;
  if (wire.ns.empty()) wire.ns = "default";
  wire.name = StrCat("sim-", k, "-", pod.name);
  wire.uid = StrCat("sim-", seed, "-", k);
  wire.node_name.clear();
  wire.phase = PodPhase::kPending;
  return wire;
}

// Plays kube-scheduler against the extender for each arriving pod.
class ExtenderDecider : public FgdDecider {
 public:
  ExtenderDecider(const ExtenderTransport& transport, uint64_t seed, int weight)
      : transport_(transport), seed_(seed), weight_(weight) {}

  absl::StatusOr<int> Choose(const PodRequest& pod, const SimCluster& cluster,
                             const std::vector<int32_t>& rank, DeviceMask* devices) override {
    const int64_t k = arrivals_++;
    *devices = 0;
    const PodRequest wire = WirePod(pod, k, seed_);
    const std::vector<int> fit = ResourcesFit(pod, cluster);
    if (fit.empty()) return -1;
    if (pod.gpu.count == 0) {
      // managedResources is nvidia.com/gpu: kube-scheduler does not call the
      // extender for CPU-only pods; every node scores 0, ties by priority.
      int best = -1;
      for (int i : fit) {
        if (Better(rank, 0, i, 0, best)) best = i;
      }
      return best;
    }
    GPUSCHED_ASSIGN_OR_RETURN(const std::vector<std::string> passed, Filter(wire, cluster, fit));
    if (passed.empty()) return -1;
    GPUSCHED_ASSIGN_OR_RETURN(const int best, Prioritize(wire, cluster, rank, passed));
    GPUSCHED_RETURN_IF_ERROR(Bind(wire, cluster.node(best).name));
    // The server chose the devices with ChoosePlacement on the same node
    // state: mirror it on the simulator's copy.
    auto placement = policy::ChoosePlacement(pod.gpu, cluster.node(best));
    if (!placement.has_value()) {
      return absl::InternalError(StrCat("extender bound ", wire.Key(), " to ",
                                        cluster.node(best).name,
                                        " but the simulator's copy has no devices for it: the "
                                        "server's cluster differs from the simulated one"));
    }
    *devices = placement->devices;
    return best;
  }

 private:
  // In-tree NodeResourcesFit: CPU and memory, and the GPU count against the
  // node's allocatable (device accounting, with sharing, is the extender's).
  static std::vector<int> ResourcesFit(const PodRequest& pod, const SimCluster& cluster) {
    std::vector<int> fit;
    for (int i = 0; i < cluster.size(); ++i) {
      if (cluster.ResourcesFit(i, pod) && cluster.node(i).healthy_count() >= pod.gpu.count) {
        fit.push_back(i);
      }
    }
    return fit;
  }

  // Whether node `i` with `score` beats `best` (-1: none yet) with
  // `best_score`: a higher score, or the same and an earlier tie priority.
  static bool Better(const std::vector<int32_t>& rank, int64_t score, int i, int64_t best_score,
                     int best) {
    return best < 0 || score > best_score || (score == best_score && rank[i] < rank[best]);
  }

  // POST /filter with the nodes in `fit`: the names it passes.
  absl::StatusOr<std::vector<std::string>> Filter(const PodRequest& wire, const SimCluster& cluster,
                                                  const std::vector<int>& fit) {
    std::vector<std::string> names;
    names.reserve(fit.size());
    for (int i : fit) names.push_back(cluster.node(i).name);
    auto filter_body = transport_("/filter", codec::EncodeExtenderArgs(wire, names));
    if (!filter_body.ok()) return Wrap(filter_body.status(), "filter", wire);
    auto filter = codec::DecodeFilterReply(*filter_body);
    if (!filter.ok()) return Wrap(filter.status(), "filter", wire);
    if (!filter->error.empty()) {
      return absl::InternalError(
          StrCat("extender filter of ", wire.Key(), " answered Error: ", filter->error));
    }
    std::vector<std::string> passed;
    for (std::string& n : filter->node_names) {
      if (cluster.snapshot().FindIndex(n) < 0) {
        return absl::InternalError(StrCat("extender filter passed unknown node ", n));
      }
      passed.push_back(std::move(n));
    }
    return passed;
  }

  // POST /prioritize with the `passed` nodes: the index of the best one.
  absl::StatusOr<int> Prioritize(const PodRequest& wire, const SimCluster& cluster,
                                 const std::vector<int32_t>& rank,
                                 const std::vector<std::string>& passed) {
    auto prio_body = transport_("/prioritize", codec::EncodeExtenderArgs(wire, passed));
    if (!prio_body.ok()) return Wrap(prio_body.status(), "prioritize", wire);
    auto prio = codec::DecodePrioritizeReply(*prio_body);
    if (!prio.ok()) return Wrap(prio.status(), "prioritize", wire);
    std::unordered_map<std::string, int64_t> extender_score;
    for (auto& [host, score] : *prio) extender_score[host] = score;
    int best = -1;
    int64_t best_score = -1;
    for (const std::string& n : passed) {
      const int i = cluster.snapshot().FindIndex(n);
      auto it = extender_score.find(n);
      // Extender score x weight x (MaxNodeScore / MaxExtenderPriority); no
      // in-tree score plugins.
      const int64_t total = (it == extender_score.end() ? 0 : it->second) * weight_ * 10;
      if (Better(rank, total, i, best_score, best)) {
        best = i;
        best_score = total;
      }
    }
    return best;
  }

  // POST /bind of `wire` to `node`.
  absl::Status Bind(const PodRequest& wire, const std::string& node) {
    BindingArgs bind{wire.name, wire.ns, wire.uid, node};
    auto bind_body = transport_("/bind", codec::EncodeBindingArgs(bind));
    if (!bind_body.ok()) return Wrap(bind_body.status(), "bind", wire);
    auto bind_error = codec::DecodeBindingReply(*bind_body);
    if (!bind_error.ok()) return Wrap(bind_error.status(), "bind", wire);
    if (!bind_error->empty()) {
      return absl::InternalError(
          StrCat("extender refused to bind ", wire.Key(), " to ", bind.node, ": ", *bind_error));
    }
    return absl::OkStatus();
  }

  static absl::Status Wrap(const absl::Status& s, std::string_view verb, const PodRequest& pod) {
    return absl::Status(s.code(),
                        StrCat("extender ", verb, " of ", pod.Key(), ": ", FromAbsl(s.message())));
  }

  const ExtenderTransport& transport_;
  const uint64_t seed_;
  const int weight_;
  int64_t arrivals_ = 0;
};

}  // namespace

std::string ClusterListJson(const std::vector<NodeSpec>& nodes,
                            const std::vector<PodRequest>& pods) {
  return codec::EncodeClusterList(nodes, pods);
}

std::vector<PodRequest> ExtenderWorkload(const SimCluster& cluster,
                                         const std::vector<PodRequest>& trace,
                                         const FgdOptions& options) {
  std::mt19937_64 rng(options.seed);  // as RunFgdWith draws the workload
  std::vector<PodRequest> pods = PrepareWorkload(trace, cluster.total_gpus(), options.tune, rng);
  std::vector<PodRequest> out;
  for (size_t k = 0; k < pods.size(); ++k) {
    if (pods[k].gpu.count > 0)
      out.push_back(WirePod(pods[k], static_cast<int64_t>(k), options.seed));
  }
  return out;
}

absl::StatusOr<FgdResult> RunFgdViaExtender(const SimCluster& cluster,
                                            const std::vector<PodRequest>& trace,
                                            const SchedulerConfig& config,
                                            const FgdOptions& options,
                                            const ExtenderTransport& transport) {
  if (options.policy != "gpusched-extender") {
    return absl::InvalidArgumentError(
        StrCat("--extender: the server's pipeline decides; use --policy gpusched-extender (its "
               "in-process twin), not '",
               options.policy, "'"));
  }
  for (const policy::ScorerSpec& s : config.scoring.scorers) {
    if (s.weight > 0 && (s.name == "Fgd" || s.name == "FragLookahead")) {
      // The fragmentation scorers read free CPU, and the server never sees
      // CPU-only pods (kube-scheduler binds them without the extender); their
      // target workload would also be the config's rather than the trace's.
      return absl::InvalidArgumentError(
          StrCat("--extender: scorer ", s.name,
                 " cannot match in-process results (the server does not see CPU-only pods); "
                 "use a config with fragmentationWeight 0"));
    }
  }
  if (!transport) return absl::InvalidArgumentError("--extender: no HTTP transport");
  ExtenderDecider decider(transport, options.seed, SimPolicy{}.extender_weight);
  return RunFgdWith(cluster, trace, config, options, &decider);
}

}  // namespace gpusched::sim
