#include "scheduler/kube/kube_config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/exec_credential.h"

namespace gpusched::kube {
namespace {

absl::StatusOr<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return StrCat(dir, "/", path);
}

// The kubeconfig as YAML (yaml-cpp: any YAML 1.2, JSON included), read
// through these helpers only: none of them throws. An absent member, or one
// of another kind, reads as an undefined node, "" or false.

// The member `key` of a map node; an undefined node if `n` is no map or
// has no such member.
YAML::Node Member(const YAML::Node& n, std::string_view key) {
  if (!n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& kv : n) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The scalar member `key`, or "".
std::string Str(const YAML::Node& n, std::string_view key) {
  const YAML::Node v = Member(n, key);
  return v.IsScalar() ? v.Scalar() : std::string();
}

// The member `key` read as a YAML boolean (true, True, yes, on, ...); false otherwise.
bool Flag(const YAML::Node& n, std::string_view key) {
  const YAML::Node v = Member(n, key);
  bool b = false;
  return v.IsScalar() && YAML::convert<bool>::decode(v, b) && b;
}

absl::StatusOr<YAML::Node> ParseYaml(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // e.mark is zero-based; "line 3, column 1: ..." as editors count.
    return absl::InvalidArgumentError(
        StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
}

// A file (resolved against `dir`) or base64 `data`, whichever is set.
absl::StatusOr<std::string> FileOrData(const YAML::Node& n, std::string_view file_key,
                                       std::string_view data_key, const std::string& dir) {
  std::string data = Str(n, data_key);
  if (!data.empty()) {
    std::string out;
    if (!absl::Base64Unescape(ToAbsl(data), &out)) {
      return absl::InvalidArgumentError(StrCat(data_key, ": not base64"));
    }
    return out;
  }
  std::string file = Str(n, file_key);
  if (file.empty()) return std::string();
  return Slurp(Resolve(dir, file));
}

// The entry named `name` of the list `list_key`, member `inner`.
YAML::Node Named(const YAML::Node& root, std::string_view list_key, const std::string& name,
                 std::string_view inner) {
  const YAML::Node list = Member(root, list_key);
  if (list.IsSequence()) {
    for (const YAML::Node& e : list) {
      if (Str(e, "name") == name) return Member(e, inner);
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

constexpr std::string_view kExecApiVersions[] = {"client.authentication.k8s.io/v1",
                                                 "client.authentication.k8s.io/v1beta1"};

// users[].user.exec of a kubeconfig; `where` prefixes errors.
absl::StatusOr<ExecPlugin> ParseExec(const YAML::Node& exec, const std::string& dir,
                                     const std::string& where) {
  ExecPlugin p;
  p.command = Str(exec, "command");
  if (p.command.empty()) return absl::InvalidArgumentError(StrCat(where, ".command: missing"));
  if (p.command.find('/') != std::string::npos) p.command = Resolve(dir, p.command);
  p.api_version = Str(exec, "apiVersion");
  if (std::find(std::begin(kExecApiVersions), std::end(kExecApiVersions), p.api_version) ==
      std::end(kExecApiVersions)) {
    return absl::InvalidArgumentError(
        StrCat(where, ".apiVersion: want client.authentication.k8s.io/v1 or v1beta1, got '",
               p.api_version, "'"));
  }
  if (const YAML::Node args = Member(exec, "args"); args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) {
      return absl::InvalidArgumentError(StrCat(where, ".args: must be a list of strings"));
    }
    for (const YAML::Node& a : args) {
      if (!a.IsScalar()) return absl::InvalidArgumentError(StrCat(where, ".args: must be strings"));
      p.args.push_back(a.Scalar());
    }
  }
  if (const YAML::Node env = Member(exec, "env"); env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) {
      return absl::InvalidArgumentError(StrCat(where, ".env: must be a list of {name, value}"));
    }
    for (const YAML::Node& e : env) {
      if (Str(e, "name").empty()) {
        return absl::InvalidArgumentError(StrCat(where, ".env[].name: missing"));
      }
      p.env.emplace_back(Str(e, "name"), Str(e, "value"));
    }
  }
  p.install_hint = Str(exec, "installHint");
  p.provide_cluster_info = Flag(exec, "provideClusterInfo");
  if (Str(exec, "interactiveMode") == "Always") {
    return absl::InvalidArgumentError(
        StrCat(where, ".interactiveMode: Always needs a terminal; gpusched runs without one"));
  }
  return p;
}

}  // namespace

absl::Status ParseServerUrl(std::string_view url, KubeConfig* cfg) {
  if (!absl::StartsWith(ToAbsl(url), "https://")) {
    return absl::InvalidArgumentError(StrCat("server '", url, "': only https:// is supported"));
  }
  std::string_view rest = url.substr(8);
  rest = rest.substr(0, rest.find('/'));
  if (rest.empty()) return absl::InvalidArgumentError(StrCat("server '", url, "': no host"));
  if (rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return absl::InvalidArgumentError("bad IPv6 server");
    cfg->host = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    cfg->port = rest.size() > 1 && rest[0] == ':' ? std::string(rest.substr(1)) : "443";
    return absl::OkStatus();
  }
  size_t colon = rest.rfind(':');
  cfg->host = std::string(rest.substr(0, colon));
  cfg->port = colon == std::string_view::npos ? "443" : std::string(rest.substr(colon + 1));
  return absl::OkStatus();
}

absl::StatusOr<KubeConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0') {
    return absl::FailedPreconditionError(
        "--kube: KUBERNETES_SERVICE_HOST/PORT are not set (not running in a pod? use "
        "--kubeconfig)");
  }
  KubeConfig cfg;
  cfg.host = host;
  cfg.port = port;
  auto ca = Slurp(StrCat(sa_dir, "/ca.crt"));
  if (!ca.ok()) return ca.status();
  cfg.ca_pem = *std::move(ca);
  cfg.token_file = StrCat(sa_dir, "/token");
  auto token = Slurp(cfg.token_file);
  if (!token.ok()) return token.status();
  if (auto ns = Slurp(StrCat(sa_dir, "/namespace")); ns.ok()) cfg.ns = Trim(*std::move(ns));
  return cfg;
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = Slurp(path);
  if (!text.ok()) return text.status();
  auto parsed = ParseYaml(*text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(StrCat(path, ": ", FromAbsl(parsed.status().message())));
  }
  const YAML::Node root = *std::move(parsed);
  if (!root.IsMap()) return absl::InvalidArgumentError(StrCat(path, ": not a kubeconfig (a map)"));
  std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  std::string ctx_name = context.empty() ? Str(root, "current-context") : context;
  const YAML::Node ctx = Named(root, "contexts", ctx_name, "context");
  if (!ctx.IsMap()) return absl::NotFoundError(StrCat(path, ": no context '", ctx_name, "'"));
  const YAML::Node cluster = Named(root, "clusters", Str(ctx, "cluster"), "cluster");
  if (!cluster.IsMap()) {
    return absl::NotFoundError(StrCat(path, ": no cluster '", Str(ctx, "cluster"), "'"));
  }
  KubeConfig cfg;
  cfg.ns = Str(ctx, "namespace");
  if (auto s = ParseServerUrl(Str(cluster, "server"), &cfg); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(path, ": ", FromAbsl(s.message())));
  }
  auto ca = FileOrData(cluster, "certificate-authority", "certificate-authority-data", dir);
  if (!ca.ok()) return ca.status();
  cfg.ca_pem = *std::move(ca);
  cfg.insecure_skip_verify = Flag(cluster, "insecure-skip-tls-verify");
  const YAML::Node user = Named(root, "users", Str(ctx, "user"), "user");
  if (user.IsMap()) {
    cfg.token = Str(user, "token");
    if (!Str(user, "tokenFile").empty()) cfg.token_file = Resolve(dir, Str(user, "tokenFile"));
    auto cert = FileOrData(user, "client-certificate", "client-certificate-data", dir);
    if (!cert.ok()) return cert.status();
    auto key = FileOrData(user, "client-key", "client-key-data", dir);
    if (!key.ok()) return key.status();
    cfg.client_cert_pem = *std::move(cert);
    cfg.client_key_pem = *std::move(key);
    if (const YAML::Node exec = Member(user, "exec"); exec.IsDefined() && !exec.IsNull()) {
      auto plugin = ParseExec(exec, dir, StrCat(path, ": users.", Str(ctx, "user"), ".exec"));
      if (!plugin.ok()) return plugin.status();
      cfg.exec = *std::move(plugin);
    }
    if (Member(user, "auth-provider").IsDefined()) {
      return absl::UnimplementedError(
          StrCat(path, ": user '", Str(ctx, "user"),
                 "' uses auth-provider, which Kubernetes removed; use an exec plugin"));
    }
  }
  return cfg;
}

TokenSource::TokenSource(const KubeConfig& config)
    : token_(config.token), file_(config.token_file) {
  if (!config.exec) return;
  codec::ExecClusterInfo cluster;
  const bool v6 = config.host.find(':') != std::string::npos;
  cluster.server = v6 ? StrCat("https://[", config.host, "]:", config.port)
                      : StrCat("https://", config.host, ":", config.port);
  cluster.ca_pem = config.ca_pem;
  cluster.insecure_skip_verify = config.insecure_skip_verify;
  exec_ = std::make_unique<ExecCredentialSource>(
      *config.exec, codec::EncodeExecInfo(config.exec->api_version,
                                          config.exec->provide_cluster_info ? &cluster : nullptr));
}

TokenSource::~TokenSource() = default;

bool TokenSource::Invalidate() {
  if (exec_ == nullptr) return false;
  exec_->Invalidate();
  return true;
}

std::string TokenSource::Get() {
  if (exec_ != nullptr) return exec_->Get();
  absl::MutexLock lock(&mu_);
  if (file_.empty()) return token_;
  auto now = std::chrono::steady_clock::now();
  if (!stamp_.empty() && now - checked_ < std::chrono::seconds(1)) return token_;
  checked_ = now;
  struct stat st;
  if (stat(file_.c_str(), &st) != 0) return token_;  // keep the last good token
  std::string stamp =
      StrCat(st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  if (stamp == stamp_) return token_;
  auto text = Slurp(file_);
  if (text.ok()) {
    token_ = Trim(*std::move(text));
    stamp_ = stamp;
  }
  return token_;
}

}  // namespace gpusched::kube
