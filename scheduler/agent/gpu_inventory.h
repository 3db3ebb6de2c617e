// The node's GPUs as `nvidia-smi --query-gpu=... --format=csv` reports them:
// index, UUID, memory and health. The node agent runs that query every few
// seconds, parses it here and keeps a DeviceTable, which the device plugin
// advertises (ListAndWatch) and maps between the kubelet's device IDs (UUIDs)
// and gpusched's device indices (the `nvidia-smi topo -m` order).
//
// Thread safety: the parser is pure; DeviceTable is thread-compatible (the
// plugin guards it with its own mutex).
#ifndef GPUSCHED_SCHEDULER_AGENT_GPU_INVENTORY_H_
#define GPUSCHED_SCHEDULER_AGENT_GPU_INVENTORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusched::agent {

// The fields the agent asks for, in this order (with a header line, no units).
inline constexpr char kQueryGpuFields[] =
    "index,uuid,memory.total,pci.bus_id,ecc.errors.uncorrected.volatile.total,"
    "retired_pages.pending";
inline constexpr char kQueryGpuFormat[] = "csv,nounits";

struct GpuDevice {
  int index = 0;
  std::string uuid;  // "GPU-..."
  int64_t memory_mib = 0;
  std::string bus_id;  // normalized: "0000:06:00.0" (domain as 4+ hex digits, lower case)
  bool healthy = true;
  std::string health_reason;  // why unhealthy ("" when healthy)
};

struct QueryReport {
  std::vector<GpuDevice> devices;  // ascending index
  // PCI bus IDs of devices nvidia-smi could not reach ("Unable to determine
  // the device handle for GPU<bus>: ...", printed instead of their row).
  std::vector<std::string> lost_bus_ids;
};

// Parses `nvidia-smi --query-gpu=<kQueryGpuFields> --format=csv,nounits`.
// The header line names the columns (units in brackets are ignored; extra
// columns are ignored). A device is unhealthy when a field reads "[GPU is
// lost]" or "[Unknown Error]", when it has uncorrectable volatile ECC errors,
// or when a page retirement is pending. Returns InvalidArgumentError naming
// the line and column for a missing header or column, a row with the wrong
// number of fields, a bad index, UUID or memory size, or a repeated index or
// UUID. Never crashes on any input.
absl::StatusOr<QueryReport> ParseNvidiaSmiQuery(std::string_view csv);

// The devices the agent has seen since it started, by index. A device that
// drops out of a later report (or is reported lost) stays, unhealthy: the
// kubelet must see it go unhealthy, not disappear.
class DeviceTable {
 public:
  // Merges a report. Returns true when any device was added or changed health.
  // A report whose UUID for a known index differs (hardware swapped without a
  // restart) replaces that device.
  bool Update(const QueryReport& report);

  const std::vector<GpuDevice>& devices() const { return devices_; }
  // Index of the device with this UUID, or nullopt.
  std::optional<int> IndexOf(std::string_view uuid) const;
  const GpuDevice* ByIndex(int index) const;
  // Device ID as the kubelet knows it (the NVIDIA plugin's default: the UUID;
  // with its index strategy a decimal index; time-sliced replicas end in
  // "::<n>") to a device index, or nullopt if it names no known device.
  std::optional<int> ResolveDeviceId(std::string_view id) const;

 private:
  std::vector<GpuDevice> devices_;  // position == index
};

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_GPU_INVENTORY_H_
