#include "scheduler/codec/extender_client_codec.h"

#include <simdjson.h>

#include "gpusched/util/strings.h"
#include "scheduler/codec/internal/dom.h"
#include "scheduler/codec/json_writer.h"

namespace gpusched::codec {
namespace {

constexpr char kLabelProduct[] = "nvidia.com/gpu.product";
constexpr char kLabelMemory[] = "nvidia.com/gpu.memory";
constexpr char kLabelCount[] = "nvidia.com/gpu.count";
constexpr char kAnnotationTopologyMatrix[] = "gpusched.io/gpu-topology";

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.append(sep);
    out.append(parts[i]);
  }
  return out;
}

void WritePod(JsonWriter& w, const PodRequest& pod) {
  w.BeginObject();
  w.StringMember("apiVersion", "v1");
  w.StringMember("kind", "Pod");
  w.Key("metadata");
  w.BeginObject();
  w.StringMember("name", pod.name);
  w.StringMember("namespace", pod.ns.empty() ? "default" : pod.ns);
  w.StringMember("uid", pod.uid);
  w.Key("annotations");
  w.BeginObject();
  const GpuRequest& g = pod.gpu;
  if (g.count > 0) {
    if (!g.models.empty()) w.StringMember(kAnnotationGpuModel, Join(g.models, ","));
    if (g.milli_per_gpu != 1000) w.StringMember(kAnnotationGpuMilli, StrCat(g.milli_per_gpu));
    if (g.min_memory_mib > 0) w.StringMember(kAnnotationGpuMemory, StrCat(g.min_memory_mib, "Mi"));
    if (g.topology == TopologyMode::kNvlinkRequired) {
      w.StringMember(kAnnotationTopology, "nvlink-required");
    } else if (g.topology == TopologyMode::kNone) {
      w.StringMember(kAnnotationTopology, "none");
    }
  }
  w.OptionalStringMember(kAnnotationGang, pod.gang);
  if (pod.gang_size > 0) w.StringMember(kAnnotationGangSize, StrCat(pod.gang_size));
  w.EndObject();
  w.EndObject();
  w.Key("spec");
  w.BeginObject();
  if (pod.priority != 0) {
    w.IntMember("priority", pod.priority);
  }
  w.OptionalStringMember("priorityClassName", pod.priority_class);
  w.Key("containers");
  w.BeginArray();
  w.BeginObject();
  w.StringMember("name", "main");
  w.Key("resources");
  w.BeginObject();
  w.Key("requests");
  w.BeginObject();
  w.StringMember("cpu", StrCat(pod.cpu_milli, "m"));
  w.StringMember("memory", StrCat(pod.memory_mib, "Mi"));
  if (g.count > 0) w.StringMember(kResourceGpu, StrCat(g.count));
  w.EndObject();
  if (g.count > 0) {
    w.Key("limits");
    w.BeginObject();
    w.StringMember(kResourceGpu, StrCat(g.count));
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.Key("status");
  w.BeginObject();
  w.StringMember("phase", "Pending");
  w.EndObject();
  w.EndObject();
}

void WriteNode(JsonWriter& w, const NodeSpec& n) {
  w.BeginObject();
  w.StringMember("apiVersion", "v1");
  w.StringMember("kind", "Node");
  w.Key("metadata");
  w.BeginObject();
  w.StringMember("name", n.name);
  w.Key("labels");
  w.BeginObject();
  w.OptionalStringMember(kLabelProduct, n.product);
  if (n.gpu_memory_mib > 0) w.StringMember(kLabelMemory, StrCat(n.gpu_memory_mib));
  if (n.gpu_count > 0) w.StringMember(kLabelCount, StrCat(n.gpu_count));
  if (n.labels != nullptr) {
    for (const auto& [key, value] : *n.labels) {
      if (key != kLabelProduct && key != kLabelMemory && key != kLabelCount) {
        w.StringMember(key, value);
      }
    }
  }
  w.EndObject();
  w.Key("annotations");
  w.BeginObject();
  if (!n.topology_codes.empty()) {
    std::string matrix;
    JsonWriter m(&matrix);
    m.BeginArray();
    for (const auto& row : n.topology_codes) {
      m.BeginArray();
      for (const std::string& cell : row) m.String(cell);
      m.EndArray();
    }
    m.EndArray();
    w.StringMember(kAnnotationTopologyMatrix, matrix);
  }
  w.EndObject();
  w.EndObject();
  w.Key("spec");
  w.BeginObject();
  w.Key("unschedulable");
  w.Bool(n.unschedulable);
  w.EndObject();
  w.Key("status");
  w.BeginObject();
  w.Key("capacity");
  w.BeginObject();
  w.StringMember("cpu", StrCat(n.cpu_milli, "m"));
  w.StringMember("memory", StrCat(n.memory_mib, "Mi"));
  w.StringMember(kResourceGpu, StrCat(n.gpu_count));
  w.EndObject();
  w.Key("allocatable");
  w.BeginObject();
  w.StringMember("cpu", StrCat(n.cpu_milli, "m"));
  w.StringMember("memory", StrCat(n.memory_mib, "Mi"));
  w.StringMember(kResourceGpu, StrCat(n.gpu_allocatable));
  w.EndObject();
  w.EndObject();
  w.EndObject();
}

// Parses `body` into `parser`'s document (copied into a padded buffer).
absl::StatusOr<Element> Parse(simdjson::dom::parser& parser, std::string_view body,
                              std::string_view what) {
  Element doc;
  if (parser.parse(body.data(), body.size(), true).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(StrCat(what, ": malformed JSON"));
  }
  return doc;
}

// Parses `body` and returns its root, which must be an object.
absl::StatusOr<Object> ParseObject(simdjson::dom::parser& parser, std::string_view body,
                                   std::string_view what) {
  auto doc = Parse(parser, body, what);
  if (!doc.ok()) return doc.status();
  Object root;
  if (doc->get_object().get(root) != simdjson::SUCCESS) return TypeError(what, "object");
  return root;
}

absl::Status ReasonMap(const Object& root, std::string_view key,
                       std::vector<std::pair<std::string, std::string>>* out) {
  auto e = Member(root, key);
  if (!e) return absl::OkStatus();
  Object obj;
  const std::string path = StrCat("ExtenderFilterResult.", key);
  if (e->get_object().get(obj) != simdjson::SUCCESS) return TypeError(path, "object");
  for (auto field : obj) {
    std::string_view reason;
    if (field.value.get_string().get(reason) != simdjson::SUCCESS) {
      return TypeError(StrCat(path, "[\"", field.key, "\"]"), "string");
    }
    out->emplace_back(std::string(field.key), std::string(reason));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodePodObject(const PodRequest& pod) {
  std::string s;
  JsonWriter w(&s);
  WritePod(w, pod);
  return s;
}

std::string EncodeClusterList(const std::vector<NodeSpec>& nodes,
                              const std::vector<PodRequest>& pods) {
  std::string s;
  s.reserve(64 + nodes.size() * 512 + pods.size() * 512);
  JsonWriter w(&s);
  w.BeginObject();
  w.StringMember("apiVersion", "v1");
  w.StringMember("kind", "List");
  w.Key("metadata");
  w.BeginObject();
  w.EndObject();
  w.Key("items");
  w.BeginArray();
  for (const NodeSpec& n : nodes) WriteNode(w, n);
  for (const PodRequest& p : pods) WritePod(w, p);
  w.EndArray();
  w.EndObject();
  s.push_back('\n');
  return s;
}

std::string EncodeExtenderArgs(const PodRequest& pod, const std::vector<std::string>& node_names) {
  std::string s;
  size_t size = 1024;
  for (const std::string& n : node_names) size += n.size() + 3;
  s.reserve(size);
  JsonWriter w(&s);
  w.BeginObject();
  w.Key("Pod");
  WritePod(w, pod);
  w.Key("Nodes");
  w.Null();
  w.Key("NodeNames");
  w.BeginArray();
  for (const std::string& n : node_names) w.String(n);
  w.EndArray();
  w.EndObject();
  return s;
}

std::string EncodeBindingArgs(const BindingArgs& args) {
  std::string s;
  JsonWriter w(&s);
  w.BeginObject();
  w.StringMember("PodName", args.pod_name);
  w.StringMember("PodNamespace", args.pod_namespace);
  w.StringMember("PodUID", args.pod_uid);
  w.StringMember("Node", args.node);
  w.EndObject();
  return s;
}

absl::StatusOr<FilterReply> DecodeFilterReply(std::string_view body) {
  simdjson::dom::parser parser;
  auto parsed = ParseObject(parser, body, "ExtenderFilterResult");
  if (!parsed.ok()) return parsed.status();
  const Object& root = *parsed;
  FilterReply r;
  auto error = OptString(root, "Error", "ExtenderFilterResult");
  if (!error.ok()) return error.status();
  if (*error) r.error = std::string(**error);
  if (auto names = Member(root, "NodeNames")) {
    simdjson::dom::array arr;
    if (names->get_array().get(arr) != simdjson::SUCCESS) {
      return TypeError("ExtenderFilterResult.NodeNames", "array of strings");
    }
    for (Element e : arr) {
      std::string_view n;
      if (e.get_string().get(n) != simdjson::SUCCESS) {
        return TypeError("ExtenderFilterResult.NodeNames[]", "string");
      }
      r.node_names.emplace_back(n);
    }
  } else if (r.error.empty()) {
    return absl::InvalidArgumentError(
        "ExtenderFilterResult: NodeNames is null (not the nodeCacheCapable form)");
  }
  if (auto s = ReasonMap(root, "FailedNodes", &r.failed); !s.ok()) return s;
  if (auto s = ReasonMap(root, "FailedAndUnresolvableNodes", &r.unresolvable); !s.ok()) return s;
  return r;
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> DecodePrioritizeReply(
    std::string_view body) {
  simdjson::dom::parser parser;
  auto doc = Parse(parser, body, "HostPriorityList");
  if (!doc.ok()) return doc.status();
  simdjson::dom::array arr;
  if (doc->get_array().get(arr) != simdjson::SUCCESS) return TypeError("HostPriorityList", "array");
  std::vector<std::pair<std::string, int64_t>> out;
  for (Element e : arr) {
    Object o;
    if (e.get_object().get(o) != simdjson::SUCCESS)
      return TypeError("HostPriorityList[]", "object");
    auto host = OptString(o, "Host", "HostPriorityList[]");
    if (!host.ok()) return host.status();
    auto score = OptInt(o, "Score", "HostPriorityList[]");
    if (!score.ok()) return score.status();
    if (!*host) return absl::InvalidArgumentError("HostPriorityList[].Host: missing");
    out.emplace_back(std::string(**host), score->value_or(0));
  }
  return out;
}

absl::StatusOr<std::string> DecodeBindingReply(std::string_view body) {
  simdjson::dom::parser parser;
  auto parsed = ParseObject(parser, body, "ExtenderBindingResult");
  if (!parsed.ok()) return parsed.status();
  const Object& root = *parsed;
  auto error = OptString(root, "Error", "ExtenderBindingResult");
  if (!error.ok()) return error.status();
  return *error ? std::string(**error) : std::string();
}

}  // namespace gpusched::codec
