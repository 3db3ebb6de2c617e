#include "scheduler/agent/gpu_inventory.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gpusched/util/strings.h"

namespace gpusched::agent {
namespace {

constexpr std::string_view kLostPrefix = "Unable to determine the device handle for GPU";
constexpr int kMaxDevices = 64;

std::string_view Trim(std::string_view s) {
  return FromAbsl(absl::StripAsciiWhitespace(ToAbsl(s)));
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> out;
  for (absl::string_view f : absl::StrSplit(ToAbsl(line), ',')) out.push_back(Trim(FromAbsl(f)));
  return out;
}

// "memory.total [MiB]" -> "memory.total".
std::string ColumnName(std::string_view header_field) {
  size_t bracket = header_field.find('[');
  return std::string(Trim(header_field.substr(0, bracket)));
}

// "00000000:0B:00.0" and "0000:0b:00.0" name one device: the domain as a
// number, the rest lower case.
std::string NormalizeBusId(std::string_view bus) {
  std::string lower = absl::AsciiStrToLower(ToAbsl(bus));
  size_t colon = lower.find(':');
  uint64_t domain = 0;
  if (colon == std::string::npos || !absl::SimpleHexAtoi(lower.substr(0, colon), &domain)) {
    return lower;
  }
  return StrCat(absl::Hex(domain, absl::kZeroPad4), lower.substr(colon));
}

// Column positions of the fields the agent needs; -1 when optional and absent.
struct Columns {
  int index = -1, uuid = -1, memory = -1, bus = -1, ecc = -1, retired = -1;
  size_t count = 0;
};

absl::StatusOr<Columns> ReadHeader(std::string_view line) {
  Columns c;
  std::vector<std::string_view> fields = SplitFields(line);
  c.count = fields.size();
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string name = ColumnName(fields[i]);
    int pos = static_cast<int>(i);
    if (name == "index") c.index = pos;
    if (name == "uuid") c.uuid = pos;
    if (name == "memory.total") c.memory = pos;
    if (name == "pci.bus_id") c.bus = pos;
    if (name == "ecc.errors.uncorrected.volatile.total") c.ecc = pos;
    if (name == "retired_pages.pending") c.retired = pos;
  }
  for (auto [pos, name] :
       {std::pair{c.index, "index"}, {c.uuid, "uuid"}, {c.memory, "memory.total"}}) {
    if (pos < 0) {
      return absl::InvalidArgumentError(
          StrCat("nvidia-smi query line 1 (header): no column '", name, "' in '", line, "'"));
    }
  }
  return c;
}

// "[GPU is lost]", "[Unknown Error]": nvidia-smi could not read the device.
bool IsDeviceError(std::string_view v) {
  return absl::StartsWith(ToAbsl(v), "[") && !absl::EqualsIgnoreCase(ToAbsl(v), "[N/A]") &&
         !absl::EqualsIgnoreCase(ToAbsl(v), "[Not Supported]");
}

absl::Status FieldError(int line_no, std::string_view column, std::string_view value,
                        std::string_view why) {
  return absl::InvalidArgumentError(
      StrCat("nvidia-smi query line ", line_no, ", column ", column, ": '", value, "' ", why));
}

// Health from the ECC and page-retirement columns (and device errors anywhere).
void ReadHealth(const std::vector<std::string_view>& f, const Columns& c, GpuDevice* d) {
  for (std::string_view v : f) {
    if (IsDeviceError(v)) {
      d->healthy = false;
      d->health_reason = StrCat("nvidia-smi reports ", v);
      return;
    }
  }
  int64_t ecc = 0;
  if (c.ecc >= 0 && absl::SimpleAtoi(ToAbsl(f[c.ecc]), &ecc) && ecc > 0) {
    d->healthy = false;
    d->health_reason = StrCat(ecc, " uncorrectable ECC errors");
  } else if (c.retired >= 0 && absl::EqualsIgnoreCase(ToAbsl(f[c.retired]), "Yes")) {
    d->healthy = false;
    d->health_reason = "page retirement pending (needs a GPU reset)";
  }
}

absl::StatusOr<GpuDevice> ReadRow(int line_no, std::string_view line, const Columns& c) {
  std::vector<std::string_view> f = SplitFields(line);
  if (f.size() != c.count) {
    return absl::InvalidArgumentError(StrCat("nvidia-smi query line ", line_no, ": ", f.size(),
                                             " fields, header has ", c.count, ": '", line, "'"));
  }
  GpuDevice d;
  if (!absl::SimpleAtoi(ToAbsl(f[c.index]), &d.index) || d.index < 0 || d.index >= kMaxDevices) {
    return FieldError(line_no, "index", f[c.index], "is not a device index 0..63");
  }
  d.uuid = std::string(f[c.uuid]);
  if (!absl::StartsWith(d.uuid, "GPU-") && !absl::StartsWith(d.uuid, "MIG-")) {
    if (!IsDeviceError(d.uuid)) return FieldError(line_no, "uuid", d.uuid, "is not a GPU UUID");
  }
  std::string_view mem = f[c.memory];
  if (absl::EndsWith(ToAbsl(mem), "MiB")) mem = Trim(mem.substr(0, mem.size() - 3));
  if (!IsDeviceError(mem) && (!absl::SimpleAtoi(ToAbsl(mem), &d.memory_mib) || d.memory_mib < 0)) {
    return FieldError(line_no, "memory.total", f[c.memory], "is not a size in MiB");
  }
  if (c.bus >= 0) d.bus_id = NormalizeBusId(f[c.bus]);
  ReadHealth(f, c, &d);
  if (!absl::StartsWith(d.uuid, "GPU-") && !absl::StartsWith(d.uuid, "MIG-")) {
    d.uuid.clear();  // unreadable: known only by index (and bus ID)
  }
  return d;
}

// "Unable to determine the device handle for GPU0000:86:00.0: Unknown Error"
std::string LostBusId(std::string_view line) {
  std::string_view rest = Trim(line.substr(kLostPrefix.size()));
  size_t colon = rest.find(": ");
  return NormalizeBusId(Trim(colon == std::string_view::npos ? rest : rest.substr(0, colon)));
}

absl::Status CheckUnique(const std::vector<GpuDevice>& devices) {
  absl::flat_hash_set<int> indices;
  absl::flat_hash_set<std::string> uuids;
  for (const GpuDevice& d : devices) {
    if (!indices.insert(d.index).second) {
      return absl::InvalidArgumentError(StrCat("nvidia-smi query: index ", d.index, " repeated"));
    }
    if (!d.uuid.empty() && !uuids.insert(d.uuid).second) {
      return absl::InvalidArgumentError(StrCat("nvidia-smi query: uuid ", d.uuid, " repeated"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QueryReport> ParseNvidiaSmiQuery(std::string_view csv) {
  QueryReport report;
  std::optional<Columns> columns;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(ToAbsl(csv), '\n')) {
    ++line_no;
    std::string_view line = Trim(FromAbsl(raw));
    if (line.empty()) continue;
    if (absl::StartsWith(ToAbsl(line), ToAbsl(kLostPrefix))) {
      report.lost_bus_ids.push_back(LostBusId(line));
      continue;
    }
    if (!columns) {
      auto header = ReadHeader(line);
      if (!header.ok()) return header.status();
      columns = *header;
      continue;
    }
    auto row = ReadRow(line_no, line, *columns);
    if (!row.ok()) return row.status();
    report.devices.push_back(std::move(*row));
  }
  if (!columns)
    return absl::InvalidArgumentError("nvidia-smi query: empty output (no header line)");
  std::sort(report.devices.begin(), report.devices.end(),
            [](const GpuDevice& a, const GpuDevice& b) { return a.index < b.index; });
  if (absl::Status s = CheckUnique(report.devices); !s.ok()) return s;
  return report;
}

bool DeviceTable::Update(const QueryReport& report) {
  bool changed = false;
  std::vector<bool> seen(devices_.size(), false);
  for (const GpuDevice& d : report.devices) {
    if (static_cast<size_t>(d.index) >= devices_.size()) {
      for (int i = static_cast<int>(devices_.size()); i < d.index; ++i) {
        devices_.push_back({i, "", 0, "", false, "not reported by nvidia-smi"});
      }
      devices_.push_back(d);
      seen.resize(devices_.size(), false);
      seen[d.index] = true;
      changed = true;
      continue;
    }
    GpuDevice& known = devices_[d.index];
    seen[d.index] = true;
    GpuDevice next = d;
    if (next.uuid.empty()) next.uuid = known.uuid;  // unreadable now: keep its name
    if (next.healthy != known.healthy || next.uuid != known.uuid) changed = true;
    if (next.memory_mib == 0) next.memory_mib = known.memory_mib;
    known = std::move(next);
  }
  absl::flat_hash_set<std::string> lost(report.lost_bus_ids.begin(), report.lost_bus_ids.end());
  for (GpuDevice& known : devices_) {
    bool is_lost = !known.bus_id.empty() && lost.contains(known.bus_id);
    if (is_lost || !seen[known.index]) {
      if (known.healthy) changed = true;
      known.healthy = false;
      known.health_reason = is_lost ? "lost (nvidia-smi cannot reach it)" : "no longer reported";
    }
  }
  return changed;
}

std::optional<int> DeviceTable::IndexOf(std::string_view uuid) const {
  for (const GpuDevice& d : devices_) {
    if (!d.uuid.empty() && d.uuid == uuid) return d.index;
  }
  return std::nullopt;
}

const GpuDevice* DeviceTable::ByIndex(int index) const {
  if (index < 0 || static_cast<size_t>(index) >= devices_.size()) return nullptr;
  return &devices_[index];
}

std::optional<int> DeviceTable::ResolveDeviceId(std::string_view id) const {
  size_t replica = id.find("::");
  if (replica != std::string_view::npos) id = id.substr(0, replica);
  if (auto i = IndexOf(id)) return i;
  int index = 0;
  if (absl::SimpleAtoi(ToAbsl(id), &index) && ByIndex(index) != nullptr) return index;
  return std::nullopt;
}

}  // namespace gpusched::agent
