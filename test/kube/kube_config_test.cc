// Kubeconfig files as kubectl reads them: block YAML, JSON, anchors and
// aliases, block scalars, flow lists; malformed YAML is an error naming the
// line, never a crash.
#include "scheduler/kube/kube_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpusched::kube {
namespace {

// "CA" base64-encoded; the reader does not look inside the PEM.
constexpr char kCaData[] = "Q0E=";

absl::StatusOr<KubeConfig> Load(const std::string& name, const std::string& text,
                                const std::string& context = "") {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "kube_config_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return LoadKubeconfig(path, context);
}

TEST(KubeconfigYaml, ReadsJson) {
  auto cfg = Load("json", std::string(R"({
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443",
                  "certificate-authority-data": ")") +
                              kCaData + R"(", "insecure-skip-tls-verify": true}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "tok"}}]})");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "10.0.0.1");
  EXPECT_EQ(cfg->port, "6443");
  EXPECT_EQ(cfg->ca_pem, "CA");
  EXPECT_TRUE(cfg->insecure_skip_verify);
  EXPECT_EQ(cfg->token, "tok");
}

TEST(KubeconfigYaml, ReadsAnchorsBlockScalarsAndFlowLists) {
  auto cfg = Load("yaml", std::string(R"(apiVersion: v1
kind: Config
clusters:
- name: k
  cluster: &cluster
    server: "https://[fd00::1]:8443"
    certificate-authority-data: )") +
                              kCaData + R"(
- name: copy
  cluster: *cluster
contexts:
- {name: c, context: {cluster: copy, user: u}}
current-context: c
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: sso
      args: [get-token, "--cluster=k", 'x y']
      env: [{name: A, value: "1"}]
      installHint: |
        Install sso:
          apt-get install sso
      provideClusterInfo: yes
)");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "fd00::1");
  EXPECT_EQ(cfg->port, "8443");
  EXPECT_EQ(cfg->ca_pem, "CA");
  ASSERT_TRUE(cfg->exec.has_value());
  EXPECT_EQ(cfg->exec->command, "sso");
  EXPECT_EQ(cfg->exec->args, (std::vector<std::string>{"get-token", "--cluster=k", "x y"}));
  ASSERT_EQ(cfg->exec->env.size(), 1u);
  EXPECT_EQ(cfg->exec->env[0], (std::pair<std::string, std::string>{"A", "1"}));
  EXPECT_EQ(cfg->exec->install_hint, "Install sso:\n  apt-get install sso\n");
  EXPECT_TRUE(cfg->exec->provide_cluster_info);
}

TEST(KubeconfigYaml, FoldedScalarAndComments) {
  auto cfg = Load("folded", R"(# written by hand
clusters:
- name: k  # the only one
  cluster:
    server: >-
      https://example.test:6443
contexts:
- name: c
  context:
    cluster: k
users: []
)",
                  "c");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "example.test");
  EXPECT_EQ(cfg->port, "6443");
  EXPECT_TRUE(cfg->token.empty());
}

TEST(KubeconfigYaml, ContextNamespaceIsTheDefaultNamespace) {
  constexpr char kText[] = R"(clusters: [{name: k, cluster: {server: 'https://h'}}]
contexts:
- {name: team, context: {cluster: k, namespace: team-a}}
- {name: plain, context: {cluster: k}}
current-context: team
)";
  auto team = Load("ns", kText);
  ASSERT_TRUE(team.ok()) << team.status();
  EXPECT_EQ(team->ns, "team-a");
  auto plain = Load("ns", kText, "plain");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->ns, "");
}

TEST(InClusterConfig, ReadsTheServiceAccountsNamespace) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "sa_ns";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ca.crt") << "CA";
  std::ofstream(dir / "token") << "tok";
  std::ofstream(dir / "namespace") << "team-b\n";
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = InClusterConfig(dir.string());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->ns, "team-b");
  std::filesystem::remove(dir / "namespace");  // an older pod: none
  cfg = InClusterConfig(dir.string());
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->ns, "");
}

TEST(KubeconfigYaml, BadFilesAreErrors) {
  const struct {
    const char* name;
    const char* text;
    const char* error;
  } kCases[] = {
      {"indent", "a:\n  b: 1\n c: 2\n", "indent: line "},
      {"unclosed", "clusters: [{name: k\n", "unclosed: line "},
      {"alias", "a: *nowhere\n", "alias: line "},
      {"scalar", "just text\n", "scalar: not a kubeconfig (a map)"},
      {"nocontext", "clusters: []\ncurrent-context: x\n", "nocontext: no context 'x'"},
      {"nocluster", "contexts: [{name: c, context: {cluster: k}}]\ncurrent-context: c\n",
       "nocluster: no cluster 'k'"},
      {"args",
       "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
       "contexts: [{name: c, context: {cluster: k, user: u}}]\ncurrent-context: c\n"
       "users: [{name: u, user: {exec: {command: x, "
       "apiVersion: client.authentication.k8s.io/v1, args: {a: 1}}}}]\n",
       "args: users.u.exec.args: must be a list of strings"},
  };
  for (const auto& c : kCases) {
    auto cfg = Load(c.name, c.text);
    ASSERT_FALSE(cfg.ok()) << c.name;
    const std::string message(cfg.status().message());
    EXPECT_NE(message.find(c.error), std::string::npos) << c.name << ": " << message;
  }
}

}  // namespace
}  // namespace gpusched::kube
