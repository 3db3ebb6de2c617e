// KubeConfig: where the API server is and how to authenticate to it, from
// either the in-cluster service account (--kube) or a kubeconfig file
// (--kubeconfig). TokenSource hands out the bearer token: it re-reads the
// token file when it changes (projected service-account tokens rotate), or
// runs the kubeconfig's credential plugin (users[].user.exec, as for EKS,
// GKE or OIDC logins) and caches its token until it expires or the API
// server refuses it.
//
// Kubeconfig files are YAML (or JSON, which is YAML too), read with yaml-cpp
// in kube_config.cc only: anchors, block scalars and flow style are read as
// kubectl reads them. Relative file paths are resolved against the file's
// folder.
//
// Loading is for start-up (not thread-safe); TokenSource::Get is thread-safe.
#ifndef GPUSCHED_KUBE_KUBE_CONFIG_H_
#define GPUSCHED_KUBE_KUBE_CONFIG_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gpusched::kube {

// A kubeconfig credential plugin (users[].user.exec); it prints a
// client.authentication.k8s.io ExecCredential holding a bearer token.
struct ExecPlugin {
  std::string command;  // with a '/': a path (relative ones resolved); else looked up in PATH
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to gpusched's environment
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  std::string install_hint;
  bool provide_cluster_info = false;
};

struct KubeConfig {
  std::string host;  // DNS name or IP literal (no brackets)
  std::string port = "443";
  std::string ca_pem;  // trusted CAs; empty = the system's default paths
  bool insecure_skip_verify = false;
  std::string token;       // a static bearer token
  std::string token_file;  // or a file holding it (preferred; re-read)
  std::string client_cert_pem;
  std::string client_key_pem;
  std::optional<ExecPlugin> exec;  // a credential plugin instead of a token
  // The namespace a command without -n works in, as kubectl picks it: the
  // kubeconfig context's `namespace`, or in a pod its service account's;
  // empty when neither names one (then "default").
  std::string ns;
};

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account's token and
// ca.crt under `sa_dir` (and its namespace file, if present, as `ns`).
absl::StatusOr<KubeConfig> InClusterConfig(const std::string& sa_dir = kServiceAccountDir);

// The current context of a kubeconfig (or `context` if not empty), with the
// context's namespace as `ns`.
absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Fills host/port from "https://host[:port][/]". Only https is accepted.
absl::Status ParseServerUrl(std::string_view url, KubeConfig* cfg);

class ExecCredentialSource;

class TokenSource {
 public:
  explicit TokenSource(const KubeConfig& config);
  ~TokenSource();
  // The current token ("" if none). Checks the file at most once a second;
  // runs the plugin when it has no unexpired token.
  std::string Get() ABSL_LOCKS_EXCLUDED(mu_);
  // The API server refused the token (401): a plugin's token is dropped, so
  // the next Get runs the plugin again. Returns whether a new token may
  // come of it (a plugin is configured).
  bool Invalidate();

 private:
  std::unique_ptr<ExecCredentialSource> exec_;
  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  const std::string file_;
  std::chrono::steady_clock::time_point checked_ ABSL_GUARDED_BY(mu_);
  std::string stamp_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_KUBE_CONFIG_H_
