#include "scheduler/codec/kube_codec.h"

#include <simdjson.h>

#include <bit>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/internal/dom.h"
#include "scheduler/codec/json_writer.h"

namespace gpusched::codec {
namespace {

constexpr size_t kMaxDepth = 128;

// Member `k` of a parsed object as a string ("" if absent or of another
// type) and as an integer (0 likewise): never throws.
std::string JsonString(const nlohmann::json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}
int64_t JsonInt(const nlohmann::json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{0};
}

absl::Status ParseError(std::string_view what, simdjson::error_code err) {
  return absl::InvalidArgumentError(
      StrCat(what, ": malformed JSON: ", simdjson::error_message(err)));
}

// Reads metadata.{namespace,name,uid,resourceVersion} without failing.
void Identity(const Object& obj, std::string* ns, std::string* name, std::string* uid,
              std::string* rv) {
  auto meta = Member(obj, "metadata");
  Object m;
  if (!meta || meta->get_object().get(m) != simdjson::SUCCESS) return;
  auto get = [&](std::string_view key, std::string* out) {
    auto e = Member(m, key);
    std::string_view s;
    if (e && e->get_string().get(s) == simdjson::SUCCESS) *out = std::string(s);
  };
  get("namespace", ns);
  get("name", name);
  get("uid", uid);
  get("resourceVersion", rv);
}

std::optional<std::string> RawGpuIds(const Object& pod) {
  auto meta = Member(pod, "metadata");
  Object m, ann;
  if (!meta || meta->get_object().get(m) != simdjson::SUCCESS) return std::nullopt;
  auto a = Member(m, "annotations");
  if (!a || a->get_object().get(ann) != simdjson::SUCCESS) return std::nullopt;
  auto ids = Member(ann, kAnnotationGpuIds);
  std::string_view s;
  if (!ids || ids->get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
  return std::string(s);
}

// A Pod as the source keeps it: decoded, or (DecodePod refused it, and it
// is bound) what it holds, with why it did not decode; else DecodePod's
// error.
absl::StatusOr<PodItem> DecodePodItem(const Element& item, const Object& obj) {
  auto pod = DecodePod(item, "Pod");
  PodItem out;
  if (pod.ok()) {
    out = PodItem{*std::move(pod), RawGpuIds(obj), ""};
  } else {
    auto held = DecodeHeldPod(item, "Pod");
    if (!held.ok()) return pod.status();
    out = PodItem{*std::move(held), RawGpuIds(obj), std::string(FromAbsl(pod.status().message()))};
  }
  ControllingJob(obj, &out.job_name, &out.job_uid);
  return out;
}

// Decodes one item into `page` or records it as bad.
void DecodeItem(const Element& item, ObjectKind kind, ListPage& page) {
  Object obj;
  std::string ns, name, uid, rv;
  if (item.get_object().get(obj) == simdjson::SUCCESS) Identity(obj, &ns, &name, &uid, &rv);
  std::string key = ns.empty() ? name : StrCat(ns, "/", name);
  if (kind == ObjectKind::kNode) {
    auto node = DecodeNode(item, "Node");
    if (node.ok()) {
      page.nodes.push_back(std::move(*node));
    } else {
      page.bad_items.push_back(StrCat(key, ": ", FromAbsl(node.status().message())));
    }
    return;
  }
  auto pod = DecodePodItem(item, obj);
  if (pod.ok()) {
    page.pods.push_back(*std::move(pod));
  } else {
    page.bad_items.push_back(StrCat(key, ": ", FromAbsl(pod.status().message())));
  }
}

KubeStatus StatusFromJson(const nlohmann::json& j) {
  KubeStatus s;
  if (!j.is_object() || JsonString(j, "kind") != "Status") return s;
  const int64_t code = JsonInt(j, "code");
  s.code = code >= 100 && code <= 599 ? static_cast<int>(code) : 0;
  s.reason = JsonString(j, "reason");
  s.message = JsonString(j, "message");
  return s;
}

// Opens a Kubernetes object: apiVersion, kind, and metadata with name and
// namespace, left open for more metadata members (the caller ends it).
void BeginObjectMeta(JsonWriter& w, std::string_view api_version, std::string_view kind,
                     std::string_view ns, std::string_view name) {
  w.BeginObject();
  w.StringMember("apiVersion", api_version);
  w.StringMember("kind", kind);
  w.Key("metadata");
  w.BeginObject();
  w.StringMember("name", name);
  w.StringMember("namespace", ns);
}

}  // namespace

struct KubeDecoder::Impl {
  simdjson::dom::parser parser{size_t{1} << 30};
  Element doc;

  absl::Status Parse(std::string& body, std::string_view what) {
    body.reserve(body.size() + simdjson::SIMDJSON_PADDING);
    auto err = parser.parse(body.data(), body.size(), false).get(doc);
    if (err) return ParseError(what, err);
    return absl::OkStatus();
  }
};

KubeDecoder::KubeDecoder() : impl_(std::make_unique<Impl>()) {
  auto err = impl_->parser.allocate(size_t{1} << 16, kMaxDepth);
  (void)err;  // a failed allocation surfaces as a parse error on first use
}
KubeDecoder::~KubeDecoder() = default;

absl::StatusOr<ListPage> KubeDecoder::DecodeListPage(std::string& body, ObjectKind kind) {
  return DecodeListPage(body, kind, [](const ListPage&) {});
}

absl::StatusOr<ListPage> KubeDecoder::DecodeListPage(
    std::string& body, ObjectKind kind, absl::FunctionRef<void(const ListPage&)> on_metadata) {
  GPUSCHED_RETURN_IF_ERROR(impl_->Parse(body, "List"));
  Object root;
  if (impl_->doc.get_object().get(root) != simdjson::SUCCESS) return TypeError("List", "object");
  ListPage page;
  GPUSCHED_ASSIGN_OR_RETURN(auto meta, OptObject(root, "metadata", "List"));
  if (meta) {
    GPUSCHED_ASSIGN_OR_RETURN(auto rv, OptString(*meta, "resourceVersion", "List.metadata"));
    if (rv) page.resource_version = std::string(*rv);
    GPUSCHED_ASSIGN_OR_RETURN(auto cont, OptString(*meta, "continue", "List.metadata"));
    if (cont) page.continue_token = std::string(*cont);
  }
  auto items = Member(root, "items");
  simdjson::dom::array arr;
  if (items && items->get_array().get(arr) != simdjson::SUCCESS) {
    return TypeError("List.items", "array");
  }
  on_metadata(page);
  if (items) {
    if (kind == ObjectKind::kNode) {
      page.nodes.reserve(arr.size());
    } else {
      page.pods.reserve(arr.size());
    }
    for (Element item : arr) DecodeItem(item, kind, page);
  }
  return page;
}

absl::StatusOr<WatchEvent::Type> WatchEventType(std::string_view type, std::string_view what) {
  if (type == "ADDED") return WatchEvent::Type::kAdded;
  if (type == "MODIFIED") return WatchEvent::Type::kModified;
  if (type == "DELETED") return WatchEvent::Type::kDeleted;
  if (type == "BOOKMARK") return WatchEvent::Type::kBookmark;
  if (type == "ERROR") return WatchEvent::Type::kError;
  return absl::InvalidArgumentError(StrCat(what, ": unknown type '", type, "'"));
}

absl::StatusOr<WatchEvent> KubeDecoder::DecodeWatchEvent(std::string& line, ObjectKind kind) {
  GPUSCHED_RETURN_IF_ERROR(impl_->Parse(line, "WatchEvent"));
  Object root;
  if (impl_->doc.get_object().get(root) != simdjson::SUCCESS) {
    return TypeError("WatchEvent", "object");
  }
  WatchEvent ev;
  GPUSCHED_ASSIGN_OR_RETURN(auto type, OptString(root, "type", "WatchEvent"));
  if (!type) return absl::InvalidArgumentError("WatchEvent: no type");
  GPUSCHED_ASSIGN_OR_RETURN(ev.type, WatchEventType(*type, "WatchEvent"));
  auto object = Member(root, "object");
  if (!object) return absl::InvalidArgumentError("WatchEvent: no object");
  Object obj;
  if (object->get_object().get(obj) != simdjson::SUCCESS) {
    return TypeError("WatchEvent.object", "object");
  }
  Identity(obj, &ev.ns, &ev.name, &ev.uid, &ev.resource_version);
  if (ev.type == WatchEvent::Type::kError) {
    ev.status.code = 500;
    auto code = Member(obj, "code");
    int64_t c = 0;
    if (code && code->get_int64().get(c) == simdjson::SUCCESS) ev.status.code = static_cast<int>(c);
    std::string_view s;
    auto reason = Member(obj, "reason");
    if (reason && reason->get_string().get(s) == simdjson::SUCCESS) ev.status.reason = s;
    auto message = Member(obj, "message");
    if (message && message->get_string().get(s) == simdjson::SUCCESS) ev.status.message = s;
    return ev;
  }
  if (ev.type == WatchEvent::Type::kBookmark) return ev;
  if (kind == ObjectKind::kNode) {
    auto node = DecodeNode(*object, "Node");
    if (node.ok()) {
      ev.node = std::move(*node);
    } else {
      ev.decode_error = std::string(FromAbsl(node.status().message()));
    }
  } else {
    auto pod = DecodePodItem(*object, obj);
    if (pod.ok()) {
      ev.pod = *std::move(pod);
    } else {
      ev.decode_error = std::string(FromAbsl(pod.status().message()));
    }
  }
  return ev;
}

KubeStatus DecodeStatus(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return {};
  return StatusFromJson(j);
}

absl::StatusOr<std::string> DecodePodNodeName(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("Pod: malformed JSON");
  auto spec = j.find("spec");
  if (spec == j.end() || !spec->is_object()) return std::string();
  auto node = spec->find("nodeName");
  if (node == spec->end() || !node->is_string()) return std::string();
  return node->get<std::string>();
}

absl::StatusOr<LeaseRecord> DecodeLease(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return absl::InvalidArgumentError("Lease: malformed JSON");
  LeaseRecord r;
  const auto& str = JsonString;
  const auto& num = JsonInt;
  if (auto m = j.find("metadata"); m != j.end() && m->is_object()) {
    r.resource_version = str(*m, "resourceVersion");
  }
  if (auto s = j.find("spec"); s != j.end() && s->is_object()) {
    r.holder = str(*s, "holderIdentity");
    r.duration_seconds = num(*s, "leaseDurationSeconds");
    r.acquire_time = str(*s, "acquireTime");
    r.renew_time = str(*s, "renewTime");
    r.transitions = num(*s, "leaseTransitions");
  }
  return r;
}

std::string EncodeLease(std::string_view ns, std::string_view name, const LeaseRecord& lease) {
  std::string s;
  JsonWriter w(&s);
  BeginObjectMeta(w, "coordination.k8s.io/v1", "Lease", ns, name);
  w.OptionalStringMember("resourceVersion", lease.resource_version);
  w.EndObject();
  w.Key("spec");
  w.BeginObject();
  w.StringMember("holderIdentity", lease.holder);
  w.IntMember("leaseDurationSeconds", lease.duration_seconds);
  w.OptionalStringMember("acquireTime", lease.acquire_time);
  w.OptionalStringMember("renewTime", lease.renew_time);
  w.IntMember("leaseTransitions", lease.transitions);
  w.EndObject();
  w.EndObject();
  return s;
}

std::string FormatGpuIds(DeviceMask devices) {
  std::string out;
  for (DeviceMask m = devices; m != 0; m &= m - 1) {
    if (!out.empty()) out.push_back(',');
    StrAppend(&out, std::countr_zero(m));
  }
  return out;
}

std::string EncodeTopologyAnnotation(const std::vector<std::vector<std::string>>& matrix) {
  std::string s;
  JsonWriter w(&s);
  w.BeginArray();
  for (const auto& row : matrix) {
    w.BeginArray();
    for (const std::string& cell : row) w.String(cell);
    w.EndArray();
  }
  w.EndArray();
  return s;
}

std::string EncodeAnnotationPatch(std::string_view key, std::string_view value) {
  std::string s;
  JsonWriter w(&s);
  w.BeginObject();
  w.Key("metadata");
  w.BeginObject();
  w.Key("annotations");
  w.BeginObject();
  w.StringMember(key, value);
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return s;
}

std::string EncodeGpuIdsPatch(DeviceMask devices) {
  return EncodeAnnotationPatch(kAnnotationGpuIds, FormatGpuIds(devices));
}

std::string EncodeBinding(std::string_view ns, std::string_view name, std::string_view uid,
                          std::string_view node) {
  std::string s;
  JsonWriter w(&s);
  BeginObjectMeta(w, "v1", "Binding", ns, name);
  w.OptionalStringMember("uid", uid);
  w.EndObject();
  w.Key("target");
  w.BeginObject();
  w.StringMember("apiVersion", "v1");
  w.StringMember("kind", "Node");
  w.StringMember("name", node);
  w.EndObject();
  w.EndObject();
  return s;
}

std::string EncodeEviction(std::string_view ns, std::string_view name, std::string_view uid) {
  std::string s;
  JsonWriter w(&s);
  BeginObjectMeta(w, "policy/v1", "Eviction", ns, name);
  w.EndObject();
  if (!uid.empty()) {
    // Only evict the pod we decided about, not a same-named successor.
    w.Key("deleteOptions");
    w.BeginObject();
    w.Key("preconditions");
    w.BeginObject();
    w.StringMember("uid", uid);
    w.EndObject();
    w.EndObject();
  }
  w.EndObject();
  return s;
}

std::string EncodeEvent(const EventFields& e) {
  std::string s;
  JsonWriter w(&s);
  BeginObjectMeta(w, "v1", "Event", e.ns, e.name);
  w.EndObject();
  w.Key("involvedObject");
  w.BeginObject();
  w.StringMember("apiVersion", "v1");
  w.StringMember("kind", "Pod");
  w.StringMember("namespace", e.ns);
  w.StringMember("name", e.pod_name);
  w.OptionalStringMember("uid", e.pod_uid);
  w.EndObject();
  w.StringMember("type", e.type);
  w.StringMember("reason", e.reason);
  w.StringMember("message", e.message);
  w.Key("source");
  w.BeginObject();
  w.StringMember("component", "gpusched");
  w.EndObject();
  w.StringMember("reportingComponent", "gpusched");
  w.StringMember("reportingInstance", e.instance);
  w.StringMember("firstTimestamp", e.timestamp);
  w.StringMember("lastTimestamp", e.timestamp);
  w.IntMember("count", 1);
  w.EndObject();
  return s;
}

std::string EncodeExecInfo(std::string_view api_version, const ExecClusterInfo* cluster) {
  std::string s;
  JsonWriter w(&s);
  w.BeginObject();
  w.StringMember("apiVersion", api_version);
  w.StringMember("kind", "ExecCredential");
  w.Key("spec");
  w.BeginObject();
  if (cluster != nullptr) {
    w.Key("cluster");
    w.BeginObject();
    w.StringMember("server", cluster->server);
    w.OptionalStringMember("certificate-authority-data", absl::Base64Escape(cluster->ca_pem));
    if (cluster->insecure_skip_verify) {
      w.Key("insecure-skip-tls-verify");
      w.Bool(true);
    }
    w.EndObject();
  }
  w.Key("interactive");
  w.Bool(false);
  w.EndObject();
  w.EndObject();
  return s;
}

absl::StatusOr<ExecCredentialStatus> DecodeExecCredential(std::string_view body,
                                                          std::string_view api_version) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("ExecCredential: malformed JSON");
  }
  const auto& str = JsonString;
  if (str(j, "kind") != "ExecCredential") {
    return absl::InvalidArgumentError(
        StrCat("ExecCredential.kind: want ExecCredential, got '", str(j, "kind"), "'"));
  }
  if (str(j, "apiVersion") != api_version) {
    return absl::InvalidArgumentError(StrCat("ExecCredential.apiVersion: want ", api_version,
                                             ", got '", str(j, "apiVersion"), "'"));
  }
  auto status = j.find("status");
  if (status == j.end() || !status->is_object()) {
    return absl::InvalidArgumentError("ExecCredential.status: missing");
  }
  ExecCredentialStatus out;
  out.token = str(*status, "token");
  if (out.token.empty()) {
    if (!str(*status, "clientCertificateData").empty()) {
      return absl::UnimplementedError(
          "ExecCredential.status: a client certificate, not a token; only token credentials "
          "are supported from exec plugins");
    }
    return absl::InvalidArgumentError("ExecCredential.status.token: missing");
  }
  if (std::string expiry = str(*status, "expirationTimestamp"); !expiry.empty()) {
    GPUSCHED_ASSIGN_OR_RETURN(out.expiration_unix,
                              ParseTimestamp(expiry, "ExecCredential.status.expirationTimestamp"));
  }
  return out;
}

}  // namespace gpusched::codec
