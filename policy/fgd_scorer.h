// Fragmentation Gradient Descent (FGD, Weng et al., USENIX ATC '23) as a pure
// scorer, plus the node-fragmentation measure it is built on.
//
// Fragmentation of a node against a target workload M (pod shapes with
// weights p_m): for each shape m, if m fits the node (model allowed, enough
// free CPU, at least m.gpu_count devices with >= m.gpu_milli free), the free
// milli of the devices too small for m counts; otherwise (m does not fit, or
// m is CPU-only) all free GPU milli counts. F_n = sum_m p_m * F_n(m).
//
// FgdScorer scores a node by how much placing the pod there would raise F_n:
// score = floor(100 * sigmoid((F_before - F_after) / scale)); with the
// paper's scale 1000 this is the authors' score. For a shared pod the device
// giving the best score is used (FgdSharedDevice returns it, the first on
// ties); whole-GPU pods take the lowest-index free devices.
//
// Callers: the registry ("Fgd"), the simulator (also for its fragmentation
// curve). Pure; immutable after construction; thread-safe.
#ifndef GPUSCHED_POLICY_FGD_SCORER_H_
#define GPUSCHED_POLICY_FGD_SCORER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "gpusched/policy/policy.h"
#include "gpusched/policy/scoring_spec.h"

namespace gpusched::policy {

// Free resources of a node as the fragmentation measure sees them.
struct FragView {
  int64_t cpu_free = 0;
  int ngpu = 0;
  int free_milli[kMaxGpusPerNode] = {};  // healthy devices only, in order
};

FragView MakeFragView(const NodeInfo& node);

// Returns, per shape of `target`, whether the node's product is allowed.
std::vector<uint8_t> ShapesAllowed(const std::vector<FragmentationShape>& target,
                                   std::string_view product);

// Returns F_n in milli-GPU. `allowed` is from ShapesAllowed for the node.
double NodeFragMilli(const std::vector<FragmentationShape>& target,
                     const std::vector<uint8_t>& allowed, const FragView& v);

// The target used when a ScorerSpec names none (one shape per common
// request: 1 whole GPU, halves and quarters, 2/4/8 GPUs, CPU-only).
std::vector<FragmentationShape> DefaultFragmentationTarget();

class FgdScorer final : public ScorePolicy {
 public:
  static constexpr char kName[] = "Fgd";
  FgdScorer(std::shared_ptr<const std::vector<FragmentationShape>> target, double scale)
      : target_(std::move(target)), scale_(scale) {}
  std::string_view Name() const override { return kName; }
  int64_t Score(const PodContext& ctx, const NodeInfo& node) const override;
  // Reads the product, devices (MakeFragView) and free CPU.
  bool DependsOnlyOnGpuStateAndFreeCpu() const override { return true; }
  // The device index a shared pod would get on `node` (-1 if none fits).
  int SharedDevice(const PodContext& ctx, const NodeInfo& node) const;

 private:
  int64_t Evaluate(const PodContext& ctx, const NodeInfo& node, int* device) const;
  std::shared_ptr<const std::vector<FragmentationShape>> target_;
  double scale_;
};

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_FGD_SCORER_H_
