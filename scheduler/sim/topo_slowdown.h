// The slowdown models of the topology comparison: how much longer a gang
// runs when its members are spread over the network. Models, not
// measurements; docs/simulator.md ("Slowdown models") gives their sources.
//
// - levels (the default): a gang's runtime depends on the highest level its
//   members cross. Within one node 1.0; over nodes of one rack (or of one
//   NVLink clique), over racks of one block, over blocks, over cliques: one
//   factor each (LevelSlowdowns). A gang runs its trace duration where it
//   is best placed (crossing only the levels its size forces it to cross),
//   and F(crossed) / F(forced) times as long elsewhere.
// - span (the model before): a gang over d domains of the level it asked
//   for runs 1 + s x (d - 1) times as long; it cannot tell racks of one
//   block from racks of two blocks.
// Single pods run at trace speed under both.
//
// Callers: scheduler/sim (topology comparison), the CLI, tests. Pure
// functions; thread-safe.
#ifndef GPUSCHED_SIM_TOPO_SLOWDOWN_H_
#define GPUSCHED_SIM_TOPO_SLOWDOWN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/sim/topo_cluster.h"
#include "scheduler/sim/topo_workload.h"

namespace gpusched::sim {

// The levels model's defaults, derived from published all-reduce
// bandwidths with F = (1 - c) + c x (B_nvlink / B_crossed), c the share of
// a step spent in all-reduce while every member shares one NVLink domain
// (docs/simulator.md has the sources and the arithmetic).
inline constexpr double kCommShare = 0.25;               // c
inline constexpr double kNvlinkHgxBusGBps = 470;         // NVLink 4, one HGX H100 node
inline constexpr double kInfinibandBusGBps = 425;        // NDR, 8 x 400 Gb/s a node
inline constexpr double kBlockOversubscription = 4;      // across blocks (generic ratio)
inline constexpr double kNvlinkOverScaleOutClique = 18;  // NVLink 5 900 GB/s : 50 GB/s a GPU

constexpr double FromBandwidth(double ratio) { return (1 - kCommShare) + kCommShare * ratio; }

struct LevelSlowdowns {
  // Rack cluster (HGX nodes): members on several nodes of one rack, on
  // several racks of one block (a non-blocking fabric inside a block: the
  // same bandwidth), on several blocks.
  double nodes = FromBandwidth(kNvlinkHgxBusGBps / kInfinibandBusGBps);
  double racks = FromBandwidth(kNvlinkHgxBusGBps / kInfinibandBusGBps);
  double blocks = FromBandwidth(kNvlinkHgxBusGBps / (kInfinibandBusGBps / kBlockOversubscription));
  // Clique cluster (NVL72): several nodes of one clique talk over NVLink as
  // inside a node; several cliques over the scale-out network.
  double clique_nodes = 1.0;
  double cliques = FromBandwidth(kNvlinkOverScaleOutClique);
};

enum class SlowdownModel { kLevels, kSpan };

struct SlowdownOptions {
  SlowdownModel model = SlowdownModel::kLevels;
  double span = kDefaultSpanSlowdown;  // s of the span model
  LevelSlowdowns levels;
};

// "levels" or "span"; an error names --slowdown-model.
absl::StatusOr<SlowdownModel> ParseSlowdownModel(std::string_view name);
std::string_view SlowdownModelName(SlowdownModel model);

// "racks=1.2,blocks=2" over the defaults (keys: nodes, racks, blocks,
// clique-nodes, cliques; each factor 1..1000); an error names
// --level-slowdown and the entry.
absl::StatusOr<LevelSlowdowns> ParseLevelSlowdowns(std::string_view spec);

// Runtime factor of a gang over `domains` domains of its level: 1 + s(d-1).
double SpanSlowdown(double s, int domains);

// The highest level (smallest index) whose domains `nodes` span more than
// one of; -1 when they are all on one node.
int HighestCrossed(const TopoCluster& c, const std::vector<int>& nodes);
// The highest level a gang of `gpus` GPUs must cross (a domain of it holds
// fewer GPUs); -1 when one node holds it.
int ForcedCrossing(const TopoCluster& c, int64_t gpus);
// F of crossing `level` (-1: none, 1.0) on `c`.
double LevelFactor(const TopoCluster& c, const LevelSlowdowns& f, int level);

// Runtime factor of `job` placed on `nodes` (one entry per pod) under `o`;
// 1 for single pods.
double GangSlowdown(const TopoCluster& c, const TopoJob& job, const std::vector<int>& nodes,
                    const SlowdownOptions& o);

}  // namespace gpusched::sim

#endif  // GPUSCHED_SIM_TOPO_SLOWDOWN_H_
