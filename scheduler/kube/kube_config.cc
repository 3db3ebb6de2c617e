#include "scheduler/kube/kube_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/exec_credential.h"
#include "scheduler/kube/mini_yaml.h"

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

// A file (resolved against `dir`) or base64 `data`, whichever is set.
absl::StatusOr<std::string> FileOrData(const YamlNode& n, const std::string& file_key,
                                       const std::string& data_key, const std::string& dir) {
  std::string data = n.Str(data_key);
  if (!data.empty()) {
    std::string out;
    if (!absl::Base64Unescape(ToAbsl(data), &out)) {
      return absl::InvalidArgumentError(StrCat(data_key, ": not base64"));
    }
    return out;
  }
  std::string file = n.Str(file_key);
  if (file.empty()) return std::string();
  return Slurp(Resolve(dir, file));
}

// The entry named `name` of the list `list_key`, member `inner`.
const YamlNode* Named(const YamlNode& root, std::string_view list_key, const std::string& name,
                      std::string_view inner) {
  const YamlNode* list = root.Get(list_key);
  if (list == nullptr || list->kind != YamlNode::Kind::kList) return nullptr;
  for (const YamlNode& e : list->list) {
    if (e.Str("name") == name) return e.Get(inner);
  }
  return nullptr;
}

constexpr std::string_view kExecApiVersions[] = {"client.authentication.k8s.io/v1",
                                                 "client.authentication.k8s.io/v1beta1"};

// users[].user.exec of a kubeconfig; `where` prefixes errors.
absl::StatusOr<ExecPlugin> ParseExec(const YamlNode& exec, const std::string& dir,
                                     const std::string& where) {
  ExecPlugin p;
  p.command = exec.Str("command");
  if (p.command.empty()) return absl::InvalidArgumentError(StrCat(where, ".command: missing"));
  if (p.command.find('/') != std::string::npos) p.command = Resolve(dir, p.command);
  p.api_version = exec.Str("apiVersion");
  if (std::find(std::begin(kExecApiVersions), std::end(kExecApiVersions), p.api_version) ==
      std::end(kExecApiVersions)) {
    return absl::InvalidArgumentError(
        StrCat(where, ".apiVersion: want client.authentication.k8s.io/v1 or v1beta1, got '",
               p.api_version, "'"));
  }
  if (const YamlNode* args = exec.Get("args"); args != nullptr) {
    for (const YamlNode& a : args->list) {
      if (a.kind != YamlNode::Kind::kScalar) {
        return absl::InvalidArgumentError(StrCat(where, ".args: must be strings"));
      }
      p.args.push_back(a.scalar);
    }
  }
  if (const YamlNode* env = exec.Get("env"); env != nullptr) {
    for (const YamlNode& e : env->list) {
      if (e.Str("name").empty()) {
        return absl::InvalidArgumentError(StrCat(where, ".env[].name: missing"));
      }
      p.env.emplace_back(e.Str("name"), e.Str("value"));
    }
  }
  p.install_hint = exec.Str("installHint");
  p.provide_cluster_info = exec.Str("provideClusterInfo") == "true";
  if (exec.Str("interactiveMode") == "Always") {
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
  return cfg;
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = Slurp(path);
  if (!text.ok()) return text.status();
  auto root = ParseMiniYaml(*text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(StrCat(path, ": ", FromAbsl(root.status().message())));
  }
  std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  std::string ctx_name = context.empty() ? root->Str("current-context") : context;
  const YamlNode* ctx = Named(*root, "contexts", ctx_name, "context");
  if (ctx == nullptr) return absl::NotFoundError(StrCat(path, ": no context '", ctx_name, "'"));
  const YamlNode* cluster = Named(*root, "clusters", ctx->Str("cluster"), "cluster");
  if (cluster == nullptr) {
    return absl::NotFoundError(StrCat(path, ": no cluster '", ctx->Str("cluster"), "'"));
  }
  KubeConfig cfg;
  if (auto s = ParseServerUrl(cluster->Str("server"), &cfg); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(path, ": ", FromAbsl(s.message())));
  }
  auto ca = FileOrData(*cluster, "certificate-authority", "certificate-authority-data", dir);
  if (!ca.ok()) return ca.status();
  cfg.ca_pem = *std::move(ca);
  cfg.insecure_skip_verify = cluster->Str("insecure-skip-tls-verify") == "true";
  const YamlNode* user = Named(*root, "users", ctx->Str("user"), "user");
  if (user != nullptr) {
    cfg.token = user->Str("token");
    if (!user->Str("tokenFile").empty()) cfg.token_file = Resolve(dir, user->Str("tokenFile"));
    auto cert = FileOrData(*user, "client-certificate", "client-certificate-data", dir);
    if (!cert.ok()) return cert.status();
    auto key = FileOrData(*user, "client-key", "client-key-data", dir);
    if (!key.ok()) return key.status();
    cfg.client_cert_pem = *std::move(cert);
    cfg.client_key_pem = *std::move(key);
    if (const YamlNode* exec = user->Get("exec"); exec != nullptr) {
      auto plugin = ParseExec(*exec, dir, StrCat(path, ": users.", ctx->Str("user"), ".exec"));
      if (!plugin.ok()) return plugin.status();
      cfg.exec = *std::move(plugin);
    }
    if (user->Get("auth-provider") != nullptr) {
      return absl::UnimplementedError(
          StrCat(path, ": user '", ctx->Str("user"),
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
