#include "scheduler/codec/extender_codec.h"

#include <simdjson.h>

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/internal/dom.h"
#include "scheduler/codec/json_writer.h"

namespace gpusched::codec {
namespace {

constexpr char kMalformedPayload[] = "gpusched.io/malformed-json";

absl::Status Malformed(std::string_view what, simdjson::error_code code) {
  absl::Status s =
      absl::InvalidArgumentError(StrCat(what, ": malformed JSON: ", simdjson::error_message(code)));
  s.SetPayload(kMalformedPayload, absl::Cord("1"));
  return s;
}

absl::Status Shape(std::string_view msg) { return absl::InvalidArgumentError(ToAbsl(msg)); }

// Decodes the request's required member "Pod"; `what` names the request.
absl::StatusOr<PodRequest> RequiredPod(const Object& root, std::string_view what) {
  auto pod = Member(root, "Pod");
  if (!pod) return Shape(StrCat(what, ".Pod: missing"));
  return DecodePod(*pod, StrCat(what, ".Pod"));
}

}  // namespace

bool IsMalformedJson(const absl::Status& s) { return s.GetPayload(kMalformedPayload).has_value(); }

struct RequestDecoder::Impl {
  simdjson::dom::parser parser;
  Element doc;

  absl::Status Parse(std::string& body, std::string_view what) {
    if (body.capacity() < body.size() + simdjson::SIMDJSON_PADDING) {
      body.reserve(body.size() + simdjson::SIMDJSON_PADDING);
    }
    auto err = parser.parse(body.data(), body.size(), false).get(doc);
    if (err != simdjson::SUCCESS) return Malformed(what, err);
    return absl::OkStatus();
  }

  absl::StatusOr<Object> Root(std::string& body, std::string_view what) {
    GPUSCHED_RETURN_IF_ERROR(Parse(body, what));
    Object root;
    if (doc.get_object().get(root) != simdjson::SUCCESS) return TypeError(what, "a JSON object");
    return root;
  }
};

RequestDecoder::RequestDecoder(size_t max_depth) : impl_(std::make_unique<Impl>()) {
  // A failed allocation surfaces as a parse error on first use.
  auto err = impl_->parser.allocate(1 << 16, max_depth);
  (void)err;
}

RequestDecoder::~RequestDecoder() = default;

namespace {

// A node named twice is decided once: its first occurrence stays, later ones
// are dropped (with their node JSON), so no answer repeats a node.

}  // namespace

absl::StatusOr<ExtenderArgs> RequestDecoder::DecodeExtenderArgs(std::string& body) {
  GPUSCHED_ASSIGN_OR_RETURN(Object root, impl_->Root(body, "ExtenderArgs"));
  ExtenderArgs args;
  GPUSCHED_ASSIGN_OR_RETURN(args.pod, RequiredPod(root, "ExtenderArgs"));
  auto names = Member(root, "NodeNames");
  auto nodes = Member(root, "Nodes");
  if (names) {
    simdjson::dom::array arr;
    if (names->get_array().get(arr) != simdjson::SUCCESS) {
      return TypeError("ExtenderArgs.NodeNames", "array of strings");
    }
    args.cache_mode = true;
    args.node_names.reserve(arr.size());
    for (Element e : arr) {
      std::string_view s;
      if (e.get_string().get(s) != simdjson::SUCCESS) {
        return TypeError("ExtenderArgs.NodeNames[]", "string");
      }
      args.node_names.push_back(s);
    }
    return args;
  }
  if (nodes) {
    Object list;
    if (nodes->get_object().get(list) != simdjson::SUCCESS) {
      return TypeError("ExtenderArgs.Nodes", "NodeList object");
    }
    args.cache_mode = false;
    auto items = Member(list, "items");
    if (!items) return args;
    simdjson::dom::array arr;
    if (items->get_array().get(arr) != simdjson::SUCCESS) {
      return TypeError("ExtenderArgs.Nodes.items", "array");
    }
    size_t i = 0;
    for (Element item : arr) {
      std::string path = StrCat("ExtenderArgs.Nodes.items[", i++, "]");
      Object obj;
      if (item.get_object().get(obj) != simdjson::SUCCESS) return TypeError(path, "Node object");
      GPUSCHED_ASSIGN_OR_RETURN(auto meta, OptObject(obj, "metadata", path));
      std::optional<std::string_view> name;
      if (meta) {
        GPUSCHED_ASSIGN_OR_RETURN(name, OptString(*meta, "name", StrCat(path, ".metadata")));
      }
      if (!name || name->empty()) return Shape(StrCat(path, ".metadata.name: missing"));
      args.node_names.push_back(*name);
      args.node_json.push_back(simdjson::minify(item));
    }
    return args;
  }
  return Shape("ExtenderArgs: neither NodeNames nor Nodes is set");
}

absl::StatusOr<BindingArgs> RequestDecoder::DecodeBindingArgs(std::string& body) {
  GPUSCHED_ASSIGN_OR_RETURN(Object root, impl_->Root(body, "ExtenderBindingArgs"));
  BindingArgs b;
  struct F {
    std::string_view key;
    std::string* out;
    bool required;
  };
  for (const F& f : {F{"PodName", &b.pod_name, true}, F{"PodNamespace", &b.pod_namespace, false},
                     F{"PodUID", &b.pod_uid, false}, F{"Node", &b.node, true}}) {
    GPUSCHED_ASSIGN_OR_RETURN(auto v, OptString(root, f.key, "ExtenderBindingArgs"));
    if (!v || v->empty()) {
      if (f.required) return Shape(StrCat("ExtenderBindingArgs.", f.key, ": missing"));
      continue;
    }
    *f.out = std::string(*v);
  }
  if (b.pod_namespace.empty()) b.pod_namespace = "default";
  return b;
}

absl::StatusOr<PreemptionArgs> RequestDecoder::DecodePreemptionArgs(std::string& body) {
  GPUSCHED_ASSIGN_OR_RETURN(Object root, impl_->Root(body, "ExtenderPreemptionArgs"));
  PreemptionArgs args;
  GPUSCHED_ASSIGN_OR_RETURN(args.pod, RequiredPod(root, "ExtenderPreemptionArgs"));
  auto meta = Member(root, "NodeNameToMetaVictims");
  auto full = Member(root, "NodeNameToVictims");
  args.cache_mode = meta.has_value() || !full.has_value();
  std::optional<Element> map = meta ? meta : full;
  if (!map) return args;
  const std::string field = meta ? "NodeNameToMetaVictims" : "NodeNameToVictims";
  Object nodes;
  if (map->get_object().get(nodes) != simdjson::SUCCESS) {
    return TypeError(StrCat("ExtenderPreemptionArgs.", field), "object");
  }
  for (auto [node, value] : nodes) {
    std::string path = StrCat("ExtenderPreemptionArgs.", field, "[\"", node, "\"]");
    PreemptionArgs::Candidate c;
    c.node = std::string(node);
    if (!value.is_null()) {
      Object v;
      if (value.get_object().get(v) != simdjson::SUCCESS) return TypeError(path, "object");
      GPUSCHED_ASSIGN_OR_RETURN(auto pdb, OptInt(v, "NumPDBViolations", path));
      c.pdb_violations = pdb.value_or(0);
      auto pods = Member(v, "Pods");
      if (pods) {
        simdjson::dom::array arr;
        if (pods->get_array().get(arr) != simdjson::SUCCESS)
          return TypeError(StrCat(path, ".Pods"), "array");
        size_t i = 0;
        for (Element p : arr) {
          std::string ppath = StrCat(path, ".Pods[", i++, "]");
          if (meta) {
            Object mp;
            if (p.get_object().get(mp) != simdjson::SUCCESS)
              return TypeError(ppath, "MetaPod object");
            GPUSCHED_ASSIGN_OR_RETURN(auto uid, OptString(mp, "UID", ppath));
            if (!uid || uid->empty()) return Shape(StrCat(ppath, ".UID: missing"));
            c.victim_uids.emplace_back(*uid);
          } else {
            GPUSCHED_ASSIGN_OR_RETURN(PodRequest victim, DecodePod(p, ppath));
            if (victim.node_name.empty()) victim.node_name = c.node;
            c.victim_uids.push_back(victim.uid);
            args.victim_pods.push_back(std::move(victim));
          }
        }
      }
    }
    args.candidates.push_back(std::move(c));
  }
  // A node listed twice is answered once, for its last entry (as a Go map
  // decodes it).
  std::stable_sort(args.candidates.begin(), args.candidates.end(),
                   [](const auto& a, const auto& b) { return a.node < b.node; });
  auto last = std::unique(args.candidates.rbegin(), args.candidates.rend(),
                          [](const auto& a, const auto& b) { return a.node == b.node; });
  args.candidates.erase(args.candidates.begin(), last.base());
  return args;
}

absl::StatusOr<ClusterObjects> RequestDecoder::DecodeClusterList(std::string& body) {
  GPUSCHED_ASSIGN_OR_RETURN(Object root, impl_->Root(body, "List"));
  ClusterObjects out;
  auto items = Member(root, "items");
  if (!items) return out;
  simdjson::dom::array arr;
  if (items->get_array().get(arr) != simdjson::SUCCESS) return TypeError("List.items", "array");
  out.pods.reserve(arr.size());  // an upper bound: items are mostly pods
  size_t i = 0;
  for (Element item : arr) {
    std::string path = StrCat("List.items[", i++, "]");
    Object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) return TypeError(path, "object");
    GPUSCHED_ASSIGN_OR_RETURN(auto kind, OptString(obj, "kind", path));
    if (kind && *kind == "Node") {
      GPUSCHED_ASSIGN_OR_RETURN(NodeSpec n, DecodeNode(item, path));
      out.nodes.push_back(std::move(n));
    } else if (kind && *kind == "Pod") {
      GPUSCHED_ASSIGN_OR_RETURN(PodRequest p, DecodePod(item, path));
      out.pods.push_back(std::move(p));
    }
  }
  return out;
}

absl::StatusOr<PodRequest> RequestDecoder::DecodePodObject(std::string& body) {
  GPUSCHED_RETURN_IF_ERROR(impl_->Parse(body, "Pod"));
  return DecodePod(impl_->doc, "Pod");
}

absl::StatusOr<NodeSpec> RequestDecoder::DecodeNodeObject(std::string& body) {
  GPUSCHED_RETURN_IF_ERROR(impl_->Parse(body, "Node"));
  return DecodeNode(impl_->doc, "Node");
}

// The two answers below have one entry per node of the request: they are
// written through JsonAppender, with room for the unescaped text made at once.
std::string EncodeFilterResult(const ExtenderArgs& args, const FilterOutcome& out) {
  const std::string error = EscapePercent(out.error);
  const bool ok = out.error.empty();
  // Each distinct reason is escaped once; failed nodes copy it.
  std::vector<std::string> quoted(out.reasons.size());
  for (size_t r = 0; r < quoted.size(); ++r) {
    JsonAppender q(&quoted[r], JsonAppender::StringBound(out.reasons[r]));
    q.String(out.reasons[r]);
    q.Finish();
  }
  size_t size = 128 + error.size();
  for (std::string_view n : args.node_names) size += n.size() + 4;
  for (const auto* list : {&out.failed, &out.unresolvable}) {
    for (const FilterOutcome::Failure& f : *list) size += quoted[f.reason].size() + 2;
  }
  if (!args.cache_mode) {
    for (int32_t i : out.passed) size += args.node_json[i].size() + 1;
  }
  std::string s;
  JsonAppender a(&s, size);
  a.Reserve(64);
  if (args.cache_mode || !ok) {
    a.Literal("{\"Nodes\":null");
  } else {
    a.Literal("{\"Nodes\":{\"metadata\":{},\"items\":[");
    bool first = true;
    for (int32_t i : out.passed) {
      const std::string_view node = args.node_json[i];
      a.Reserve(node.size() + 1);
      if (!first) a.Char(',');
      first = false;
      a.Literal(node);
    }
    a.Reserve(2);
    a.Literal("]}");
  }
  a.Reserve(32);
  if (!args.cache_mode || !ok) {
    a.Literal(",\"NodeNames\":null");
  } else {
    a.Literal(",\"NodeNames\":[");
    bool first = true;
    for (int32_t i : out.passed) {
      const std::string_view name = args.node_names[i];
      a.Reserve(JsonAppender::StringBound(name) + 1);
      if (!first) a.Char(',');
      first = false;
      a.String(name);
    }
    a.Reserve(1);
    a.Char(']');
  }
  for (const auto& [key, list] :
       {std::pair{",\"FailedNodes\":{", &out.failed},
        std::pair{",\"FailedAndUnresolvableNodes\":{", &out.unresolvable}}) {
    a.Reserve(std::string_view(key).size());
    a.Literal(key);
    bool first = true;
    for (const FilterOutcome::Failure& f : *list) {
      const std::string_view name = args.node_names[f.node];
      const std::string& reason = quoted[f.reason];
      a.Reserve(JsonAppender::StringBound(name) + reason.size() + 2);
      if (!first) a.Char(',');
      first = false;
      a.String(name);
      a.Char(':');
      a.Literal(reason);
    }
    a.Reserve(1);
    a.Char('}');
  }
  a.Reserve(JsonAppender::StringBound(error) + 10);
  a.Literal(",\"Error\":");
  a.String(error);
  a.Char('}');
  a.Finish();
  return s;
}

std::string EncodePrioritizeResult(const ExtenderArgs& args, const std::vector<int64_t>& scores) {
  constexpr std::string_view kHost = "{\"Host\":";
  constexpr std::string_view kScore = ",\"Score\":";
  const size_t n = std::min(args.node_names.size(), scores.size());
  size_t size = 2;
  for (size_t i = 0; i < n; ++i) size += args.node_names[i].size() + 24;
  std::string s;
  JsonAppender a(&s, size);
  a.Reserve(1);
  a.Char('[');
  bool first = true;
  for (size_t i = 0; i < n; ++i) {
    if (scores[i] < 0) continue;  // a repeated name: answered at its first position
    const std::string_view name = args.node_names[i];
    a.Reserve(JsonAppender::StringBound(name) + kHost.size() + kScore.size() + 24);
    if (!first) a.Char(',');
    first = false;
    a.Literal(kHost);
    a.String(name);
    a.Literal(kScore);
    a.Int(std::clamp<int64_t>(scores[i], 0, 10));
    a.Char('}');
  }
  a.Reserve(1);
  a.Char(']');
  a.Finish();
  return s;
}

std::string EncodeBindingResult(std::string_view error) {
  std::string s;
  JsonWriter w(&s);
  w.BeginObject();
  w.StringMember("Error", EscapePercent(error));
  w.EndObject();
  return s;
}

std::string EncodePreemptionResult(const PreemptionOutcome& out) {
  std::string s;
  JsonWriter w(&s);
  w.BeginObject();
  w.Key("NodeNameToMetaVictims");
  w.BeginObject();
  // A JSON object names each node once (kube-scheduler decodes a Go map):
  // a node answered twice keeps its first answer.
  absl::flat_hash_set<std::string_view> written;
  for (const auto& n : out.nodes) {
    if (!written.insert(n.node).second) continue;
    w.Key(n.node);
    w.BeginObject();
    w.Key("Pods");
    w.BeginArray();
    for (const std::string& uid : n.victim_uids) {
      w.BeginObject();
      w.StringMember("UID", uid);
      w.EndObject();
    }
    w.EndArray();
    w.IntMember("NumPDBViolations", n.pdb_violations);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return s;
}

std::string EncodeErrorBody(std::string_view message) { return EncodeBindingResult(message); }

}  // namespace gpusched::codec
