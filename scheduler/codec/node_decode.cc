// v1.Node -> NodeSpec: GPU Feature Discovery labels, allocatable and the
// gpusched.io/gpu-topology annotation.
#include <simdjson.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "gpusched/util/quantity.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/agent_codec.h"
#include "scheduler/codec/internal/dom.h"

namespace gpusched::codec {
namespace {

inline constexpr char kLabelProduct[] = "nvidia.com/gpu.product";
inline constexpr char kLabelMemory[] = "nvidia.com/gpu.memory";
inline constexpr char kLabelCount[] = "nvidia.com/gpu.count";
inline constexpr char kAnnotationTopologyMatrix[] = "gpusched.io/gpu-topology";

// Decodes the annotation's JSON matrix; errors are kept on the spec (the
// node stays usable with its template topology) rather than failing.
void DecodeTopology(std::string_view text, NodeSpec& spec) {
  simdjson::dom::parser parser;
  Element doc;
  if (parser.parse(text.data(), text.size()).get(doc) != simdjson::SUCCESS) {
    spec.topology_error = "gpusched.io/gpu-topology is not valid JSON";
    return;
  }
  simdjson::dom::array rows;
  if (doc.get_array().get(rows) != simdjson::SUCCESS) {
    spec.topology_error = "gpusched.io/gpu-topology is not an array of rows";
    return;
  }
  std::vector<std::vector<std::string>> m;
  for (Element row : rows) {
    simdjson::dom::array cells;
    if (row.get_array().get(cells) != simdjson::SUCCESS) {
      spec.topology_error = "gpusched.io/gpu-topology row is not an array";
      return;
    }
    m.emplace_back();
    for (Element cell : cells) {
      std::string_view s;
      if (cell.get_string().get(s) != simdjson::SUCCESS) {
        spec.topology_error = "gpusched.io/gpu-topology cell is not a string";
        return;
      }
      m.back().emplace_back(s);
    }
  }
  spec.topology_codes = std::move(m);
}

// Whether a label describes hardware rather than where the node is (the
// decoder does not keep those: NodeLabels).
bool HardwareLabel(std::string_view key) {
  if (key.starts_with("feature.node.kubernetes.io/")) return true;
  return key.starts_with("nvidia.com/") && key != "nvidia.com/gpu.clique";
}

// The labels NodeLabels keeps, sorted; null if none. A label that is not a
// string is not kept (the API server never sends one).
std::shared_ptr<const NodeLabels> KeptLabels(const Object& labels) {
  NodeLabels kept;
  for (auto [key, value] : labels) {
    std::string_view v;
    if (HardwareLabel(key) || value.get_string().get(v) != simdjson::SUCCESS) continue;
    kept.emplace_back(std::string(key), std::string(v));
  }
  if (kept.empty()) return nullptr;
  std::sort(kept.begin(), kept.end());
  return std::make_shared<const NodeLabels>(std::move(kept));
}

absl::StatusOr<int64_t> LabelInt(const Object& labels, std::string_view key,
                                 std::string_view path) {
  GPUSCHED_ASSIGN_OR_RETURN(auto v, OptString(labels, key, path));
  if (!v) return int64_t{0};
  int64_t n = 0;
  if (!absl::SimpleAtoi(ToAbsl(*v), &n) || n < 0) {
    return absl::InvalidArgumentError(StrCat(path, "[\"", key, "\"]: '", *v, "' is not a count"));
  }
  return n;
}

absl::StatusOr<int64_t> ResourceValue(const std::optional<Object>& list, std::string_view key,
                                      std::string_view path, bool memory, bool milli) {
  if (!list) return int64_t{0};
  GPUSCHED_ASSIGN_OR_RETURN(auto v, OptString(*list, key, path));
  if (!v) return int64_t{0};
  auto q = memory ? ParseQuantityMiB(*v) : milli ? ParseQuantityMilli(*v) : ParseQuantityValue(*v);
  if (!q.ok())
    return absl::InvalidArgumentError(StrCat(path, "[\"", key, "\"]: ", q.status().message()));
  return *q;
}

}  // namespace

absl::StatusOr<NodeSpec> DecodeNode(const Element& e, std::string_view path) {
  Object node;
  if (e.get_object().get(node) != simdjson::SUCCESS) return TypeError(path, "object");
  NodeSpec spec;
  std::string mpath = StrCat(path, ".metadata");
  GPUSCHED_ASSIGN_OR_RETURN(auto meta, OptObject(node, "metadata", path));
  if (!meta) return absl::InvalidArgumentError(StrCat(mpath, ": missing"));
  GPUSCHED_ASSIGN_OR_RETURN(auto name, OptString(*meta, "name", mpath));
  if (!name || name->empty()) return absl::InvalidArgumentError(StrCat(mpath, ".name: missing"));
  spec.name = std::string(*name);
  GPUSCHED_ASSIGN_OR_RETURN(auto labels, OptObject(*meta, "labels", mpath));
  if (labels) {
    std::string lpath = StrCat(mpath, ".labels");
    GPUSCHED_ASSIGN_OR_RETURN(auto product, OptString(*labels, kLabelProduct, lpath));
    if (product) spec.product = std::string(*product);
    GPUSCHED_ASSIGN_OR_RETURN(spec.gpu_memory_mib, LabelInt(*labels, kLabelMemory, lpath));
    GPUSCHED_ASSIGN_OR_RETURN(int64_t count, LabelInt(*labels, kLabelCount, lpath));
    spec.gpu_count = static_cast<int32_t>(std::min<int64_t>(count, kMaxGpusPerNode));
    spec.labels = KeptLabels(*labels);
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto ann, OptObject(*meta, "annotations", mpath));
  if (ann) {
    GPUSCHED_ASSIGN_OR_RETURN(
        auto topo, OptString(*ann, kAnnotationTopologyMatrix, StrCat(mpath, ".annotations")));
    if (topo) DecodeTopology(*topo, spec);
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto nspec, OptObject(node, "spec", path));
  if (nspec) {
    GPUSCHED_ASSIGN_OR_RETURN(auto unsched,
                              OptBool(*nspec, "unschedulable", StrCat(path, ".spec")));
    spec.unschedulable = unsched.value_or(false);
  }
  GPUSCHED_ASSIGN_OR_RETURN(auto status, OptObject(node, "status", path));
  if (status) {
    std::string spath = StrCat(path, ".status");
    GPUSCHED_ASSIGN_OR_RETURN(auto alloc, OptObject(*status, "allocatable", spath));
    GPUSCHED_ASSIGN_OR_RETURN(auto cap, OptObject(*status, "capacity", spath));
    std::string apath = StrCat(spath, ".allocatable");
    GPUSCHED_ASSIGN_OR_RETURN(int64_t gpus,
                              ResourceValue(alloc, kResourceGpu, apath, false, false));
    GPUSCHED_ASSIGN_OR_RETURN(
        int64_t cap_gpus,
        ResourceValue(cap, kResourceGpu, StrCat(spath, ".capacity"), false, false));
    spec.gpu_allocatable = static_cast<int32_t>(std::min<int64_t>(gpus, kMaxGpusPerNode));
    // Only a sign of the node agent's plugin: a value that does not read is
    // not taken as one, and does not fail the node.
    auto cap_shares =
        ResourceValue(cap, kResourceGpuShares, StrCat(spath, ".capacity"), false, false);
    spec.gpu_shares_offered = cap_shares.ok() && *cap_shares > 0;
    if (spec.gpu_count == 0) {
      spec.gpu_count =
          static_cast<int32_t>(std::min<int64_t>(std::max(gpus, cap_gpus), kMaxGpusPerNode));
    }
    GPUSCHED_ASSIGN_OR_RETURN(spec.cpu_milli, ResourceValue(alloc, "cpu", apath, false, true));
    GPUSCHED_ASSIGN_OR_RETURN(spec.memory_mib, ResourceValue(alloc, "memory", apath, true, false));
  }
  return spec;
}

}  // namespace gpusched::codec
