// The topology comparison's slowdown models (see topo_slowdown.h).
#include "scheduler/sim/topo_slowdown.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gpusched/util/strings.h"

namespace gpusched::sim {
namespace {

constexpr double kMaxFactor = 1000;

// The factor named `key` in `f`, or null.
double* Field(LevelSlowdowns& f, std::string_view key) {
  const std::pair<std::string_view, double*> fields[] = {{"nodes", &f.nodes},
                                                         {"racks", &f.racks},
                                                         {"blocks", &f.blocks},
                                                         {"clique-nodes", &f.clique_nodes},
                                                         {"cliques", &f.cliques}};
  for (const auto& [name, field] : fields) {
    if (name == key) return field;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<SlowdownModel> ParseSlowdownModel(std::string_view name) {
  if (name == "levels") return SlowdownModel::kLevels;
  if (name == "span") return SlowdownModel::kSpan;
  return absl::InvalidArgumentError(
      StrCat("--slowdown-model: '", name, "' is neither levels nor span"));
}

std::string_view SlowdownModelName(SlowdownModel model) {
  return model == SlowdownModel::kSpan ? "span" : "levels";
}

absl::StatusOr<LevelSlowdowns> ParseLevelSlowdowns(std::string_view spec) {
  LevelSlowdowns out;
  for (absl::string_view entry : absl::StrSplit(ToAbsl(spec), ',', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    double* field = Field(out, kv.first);
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          StrCat("--level-slowdown '", entry,
                 "': the key is not one of nodes, racks, blocks, clique-nodes, cliques"));
    }
    double v = 0;
    if (!absl::SimpleAtod(kv.second, &v) || !std::isfinite(v) || v < 1 || v > kMaxFactor) {
      return absl::InvalidArgumentError(StrCat(
          "--level-slowdown '", entry, "': the factor must be a number from 1 to ", kMaxFactor));
    }
    *field = v;
  }
  return out;
}

double SpanSlowdown(double s, int domains) { return 1 + s * std::max(0, domains - 1); }

int HighestCrossed(const TopoCluster& c, const std::vector<int>& nodes) {
  for (size_t l = 0; l < c.levels.size(); ++l) {
    if (c.DomainsSpanned(static_cast<int>(l), nodes) > 1) return static_cast<int>(l);
  }
  return -1;
}

int ForcedCrossing(const TopoCluster& c, int64_t gpus) {
  for (size_t l = 0; l < c.levels.size(); ++l) {
    if (gpus > c.DomainGpus(static_cast<int>(l))) return static_cast<int>(l);
  }
  return -1;
}

double LevelFactor(const TopoCluster& c, const LevelSlowdowns& f, int level) {
  if (level < 0 || level >= static_cast<int>(c.levels.size())) return 1.0;
  const std::string& key = c.levels[level];
  if (key == kHostnameLabel) {
    return !c.levels.empty() && c.levels[0] == kCliqueLabel ? f.clique_nodes : f.nodes;
  }
  if (key == kRackLabel) return f.racks;
  if (key == kBlockLabel) return f.blocks;
  if (key == kCliqueLabel) return f.cliques;
  return 1.0;
}

double GangSlowdown(const TopoCluster& c, const TopoJob& job, const std::vector<int>& nodes,
                    const SlowdownOptions& o) {
  if (!job.gang) return 1.0;
  if (o.model == SlowdownModel::kSpan) {
    return SpanSlowdown(o.span, c.DomainsSpanned(c.Level(job.level), nodes));
  }
  const double placed = LevelFactor(c, o.levels, HighestCrossed(c, nodes));
  const double best = LevelFactor(c, o.levels, ForcedCrossing(c, job.gpus()));
  return std::max(1.0, placed / best);
}

}  // namespace gpusched::sim
