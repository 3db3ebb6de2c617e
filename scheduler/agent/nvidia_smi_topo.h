// Parser for the GPU-to-GPU link matrix printed by `nvidia-smi topo -m`. The
// topology agent calls it after running nvidia-smi on its node and publishes
// the matrix with scheduler/codec's EncodeTopologyAnnotation (JSON lives only
// in the codec); tests and tools may call it on captured output.
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

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_NVIDIA_SMI_TOPO_H_
