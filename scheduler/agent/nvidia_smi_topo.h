// Parser for the GPU-to-GPU link matrix printed by `nvidia-smi topo -m`, and
// builders for the Node annotation that publishes it to the scheduler
// extender. The topology agent calls these after running nvidia-smi on its
// node; tests and tools may call them on captured output.
//
// Thread safety: every function here is pure (no shared state), so all of
// them may be called concurrently from any thread.
#ifndef GPUSCHED_SCHEDULER_AGENT_NVIDIA_SMI_TOPO_H_
#define GPUSCHED_SCHEDULER_AGENT_NVIDIA_SMI_TOPO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusched::agent {

// Node annotation key that carries the topology matrix as compact JSON.
inline constexpr std::string_view kTopologyAnnotationKey = "gpusched.io/gpu-topology";

// Parses the text printed by `nvidia-smi topo -m` and returns the GPU-to-GPU
// block as a square matrix of link codes, one row per GPU index. Entries are
// "X" on the diagonal and "NV<n>", "PIX", "PXB", "PHB", "NODE" or "SYS" off
// it; the legacy "SOC" is reported as "SYS". NIC rows and columns, the
// affinity columns, the legend, ANSI escapes and any mix of tabs and spaces
// are ignored. Returns absl::InvalidArgumentError naming the offending row or
// column when there is no GPU header, the block is not square, a code is
// unknown, the matrix is asymmetric, or the diagonal is not "X".
absl::StatusOr<std::vector<std::vector<std::string>>> ParseNvidiaSmiTopo(std::string_view text);

// Returns the compact JSON text of `m` as stored in the annotation, e.g.
// [["X","NV12"],["NV12","X"]].
std::string TopologyAnnotationValue(const std::vector<std::vector<std::string>>& m);

// Returns a JSON merge-patch body for the Node that sets the annotation:
// {"metadata":{"annotations":{"gpusched.io/gpu-topology":"<escaped value>"}}}
std::string NodeAnnotationPatch(const std::vector<std::vector<std::string>>& m);

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_NVIDIA_SMI_TOPO_H_
