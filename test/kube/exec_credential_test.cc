// Kubeconfig credential plugins (users[].user.exec): the kubeconfig stanza,
// the ExecCredential codec, running a plugin, and a client that
// authenticates with a plugin's token against the fake API server (cached,
// renewed on expiry, and renewed and retried once on 401).
#include "scheduler/kube/exec_credential.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/kube_config.h"
#include "test/kube/kube_test_util.h"

namespace gpusched::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kV1[] = "client.authentication.k8s.io/v1";

const TestPki& Pki() {
  static const TestPki pki = MakeTestPki();
  return pki;
}

// A fresh folder for one test's files.
std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/gpusched_exec_XXXXXX";
  char* dir = mkdtemp(pattern.data());
  return dir != nullptr ? dir : "";
}

void WriteFile(const std::string& path, const std::string& text, bool executable = false) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  if (executable) chmod(path.c_str(), 0755);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A plugin that counts its runs in $STATE/runs, saves KUBERNETES_EXEC_INFO
// in $STATE/info and prints the token in $STATE/token (and the expiry in
// $STATE/expiry, if that file exists).
constexpr char kPlugin[] = R"sh(#!/bin/sh
n=$(cat "$STATE/runs" 2>/dev/null || echo 0)
echo $((n + 1)) > "$STATE/runs"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$STATE/info"
expiry=""
if [ -f "$STATE/expiry" ]; then expiry=",\"expirationTimestamp\":\"$(cat "$STATE/expiry")\""; fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"%s}}\n' "$(cat "$STATE/token")" "$expiry"
)sh";

// A kubeconfig whose user runs `command` with `STATE=<state>`.
std::string ExecKubeconfig(uint16_t port, const std::string& command, const std::string& state,
                           const std::string& extra = "") {
  std::string ca;
  absl::Base64Escape(Pki().ca_pem, &ca);
  return "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: " +
         ca + "\n    server: https://127.0.0.1:" + std::to_string(port) +
         "\n  name: fake\ncontexts:\n- context:\n    cluster: fake\n    user: sso\n  name: fake\n"
         "current-context: fake\nusers:\n- name: sso\n  user:\n    exec:\n"
         "      apiVersion: client.authentication.k8s.io/v1\n      command: " +
         command +
         "\n      args:\n      - get-token\n      - --cluster=fake\n      env:\n"
         "      - name: STATE\n        value: " +
         state + "\n      installHint: install the sso plugin\n" + extra;
}

TEST(ExecKubeconfigTest, ParsesTheExecStanza) {
  const std::string dir = TempDir();
  const std::string path = dir + "/config";
  WriteFile(path, ExecKubeconfig(6443, "./bin/sso-plugin", "/state",
                                 "      provideClusterInfo: true\n"
                                 "      interactiveMode: IfAvailable\n"));
  auto cfg = kube::LoadKubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_TRUE(cfg->exec.has_value());
  EXPECT_EQ(cfg->exec->command, dir + "/./bin/sso-plugin");  // relative to the file
  EXPECT_EQ(cfg->exec->args, (std::vector<std::string>{"get-token", "--cluster=fake"}));
  ASSERT_EQ(cfg->exec->env.size(), 1u);
  EXPECT_EQ(cfg->exec->env[0], (std::pair<std::string, std::string>{"STATE", "/state"}));
  EXPECT_EQ(cfg->exec->api_version, kV1);
  EXPECT_EQ(cfg->exec->install_hint, "install the sso plugin");
  EXPECT_TRUE(cfg->exec->provide_cluster_info);
  EXPECT_TRUE(cfg->token.empty());

  // A bare command name is looked up in PATH, not resolved.
  WriteFile(path, ExecKubeconfig(6443, "sso-plugin", "/state"));
  EXPECT_EQ(kube::LoadKubeconfig(path)->exec->command, "sso-plugin");

  struct Bad {
    std::string yaml;
    std::string error;
  };
  const Bad bad[] = {
      {ExecKubeconfig(6443, "sso", "/s", "      interactiveMode: Always\n"),
       "users.sso.exec.interactiveMode: Always needs a terminal"},
      {ExecKubeconfig(6443, "''", "/s"), "users.sso.exec.command: missing"},
  };
  for (const Bad& b : bad) {
    WriteFile(path, b.yaml);
    auto r = kube::LoadKubeconfig(path);
    ASSERT_FALSE(r.ok()) << b.error;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(b.error));
  }
  std::string old_api = ExecKubeconfig(6443, "sso", "/s");
  old_api.replace(old_api.find(kV1), sizeof(kV1) - 1, "client.authentication.k8s.io/v1alpha1");
  WriteFile(path, old_api);
  EXPECT_THAT(std::string(kube::LoadKubeconfig(path).status().message()),
              HasSubstr("users.sso.exec.apiVersion: want client.authentication.k8s.io/v1 or "
                        "v1beta1, got 'client.authentication.k8s.io/v1alpha1'"));
  std::string provider = ExecKubeconfig(6443, "sso", "/s");
  provider.replace(provider.find("    exec:"), 9, "    auth-provider:\n      name: gcp\n    x:");
  WriteFile(path, provider);
  EXPECT_THAT(std::string(kube::LoadKubeconfig(path).status().message()),
              HasSubstr("auth-provider, which Kubernetes removed"));
}

TEST(ExecCredentialCodecTest, DecodesTokenCredentials) {
  struct Case {
    std::string body;
    bool ok;
    std::string token_or_error;
    int64_t expiry = 0;
  };
  const Case cases[] = {
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
           "status":{"token":"abc"}})",
       true, "abc"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
           "status":{"token":"abc","expirationTimestamp":"2026-11-23T12:00:00Z"}})",
       true, "abc", 1795435200},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
           "status":{"clientCertificateData":"PEM","clientKeyData":"PEM"}})",
       false, "only token credentials are supported"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
           "status":{}})",
       false, "ExecCredential.status.token: missing"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})", false,
       "ExecCredential.status: missing"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",
           "status":{"token":"abc"}})",
       false,
       "ExecCredential.apiVersion: want client.authentication.k8s.io/v1, got "
       "'client.authentication.k8s.io/v1beta1'"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod","status":{}})", false,
       "ExecCredential.kind: want ExecCredential, got 'Pod'"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
           "status":{"token":"abc","expirationTimestamp":"tomorrow"}})",
       false, "ExecCredential.status.expirationTimestamp: bad timestamp 'tomorrow'"},
      {"token: abc", false, "ExecCredential: malformed JSON"},
  };
  for (const Case& c : cases) {
    auto r = codec::DecodeExecCredential(c.body, kV1);
    ASSERT_EQ(r.ok(), c.ok) << c.body << " -> " << r.status();
    if (c.ok) {
      EXPECT_EQ(r->token, c.token_or_error);
      EXPECT_EQ(r->expiration_unix, c.expiry);
    } else {
      EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.token_or_error));
    }
  }
}

TEST(ExecCredentialCodecTest, ExecInfoCarriesClusterOnlyWhenAsked) {
  codec::ExecClusterInfo cluster{"https://10.0.0.1:6443", "CA PEM", false};
  auto with = nlohmann::json::parse(codec::EncodeExecInfo(kV1, &cluster));
  EXPECT_EQ(with["apiVersion"], kV1);
  EXPECT_EQ(with["kind"], "ExecCredential");
  EXPECT_EQ(with["spec"]["interactive"], false);
  EXPECT_EQ(with["spec"]["cluster"]["server"], "https://10.0.0.1:6443");
  EXPECT_EQ(with["spec"]["cluster"]["certificate-authority-data"], "Q0EgUEVN");  // "CA PEM"
  auto without = nlohmann::json::parse(codec::EncodeExecInfo(kV1, nullptr));
  EXPECT_FALSE(without["spec"].contains("cluster"));
}

TEST(ExecPluginTest, ReportsMissingFailingAndHangingPlugins) {
  const std::string dir = TempDir();
  kube::ExecPlugin p;
  p.api_version = kV1;
  p.install_hint = "apt-get install sso-plugin";
  p.command = "gpusched-no-such-plugin";
  auto missing = kube::RunExecPlugin(p, "{}", std::chrono::seconds(5));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("exec plugin 'gpusched-no-such-plugin' not found: apt-get install"));

  p.command = dir + "/fails";
  WriteFile(p.command, "#!/bin/sh\necho 'login expired' >&2\nexit 3\n", true);
  auto fails = kube::RunExecPlugin(p, "{}", std::chrono::seconds(5));
  EXPECT_THAT(std::string(fails.status().message()), HasSubstr("failed (exit status 3)"));

  p.command = dir + "/hangs";
  WriteFile(p.command, "#!/bin/sh\nexec sleep 30\n", true);
  const auto t0 = std::chrono::steady_clock::now();
  auto hangs = kube::RunExecPlugin(p, "{}", std::chrono::milliseconds(300));
  EXPECT_EQ(hangs.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));

  p.command = dir + "/garbage";
  WriteFile(p.command, "#!/bin/sh\necho not json\n", true);
  EXPECT_THAT(std::string(kube::RunExecPlugin(p, "{}", std::chrono::seconds(5)).status().message()),
              HasSubstr("ExecCredential: malformed JSON"));
}

// The client runs the plugin once and reuses its token; when the server
// refuses it (401) the plugin runs again and the request is retried with the
// new token; a token past its expirationTimestamp is renewed before use.
TEST(ExecPluginTest, ClientAuthenticatesWithThePluginsToken) {
  FakeApiServer api(Pki(), kToken);
  api.Start();
  const std::string dir = TempDir();
  WriteFile(dir + "/plugin", kPlugin, true);
  api.AllowToken("plugin-token");
  WriteFile(dir + "/token", "plugin-token");
  const std::string path = dir + "/config";
  WriteFile(path, ExecKubeconfig(api.port(), "./plugin", dir, "      provideClusterInfo: true\n"));
  auto cfg = kube::LoadKubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  kube::ClientOptions o;
  o.qps = 0;
  auto client = kube::KubeHttpClient::Create(*cfg, o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto runs = [&] { return std::atoi(ReadFile(dir + "/runs").c_str()); };

  EXPECT_EQ((*client)->Do("GET", "/api/v1/nodes")->status, 200);
  EXPECT_EQ((*client)->Do("GET", "/api/v1/nodes")->status, 200);
  EXPECT_EQ(runs(), 1);  // cached
  auto info = nlohmann::json::parse(ReadFile(dir + "/info"));
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://127.0.0.1:" + std::to_string(api.port()));

  // The server stops accepting the token; the plugin now hands out another.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // runs at most once a second
  api.RevokeToken("plugin-token");
  api.AllowToken("rotated-token");
  WriteFile(dir + "/token", "rotated-token");
  EXPECT_EQ((*client)->Do("GET", "/api/v1/nodes")->status, 200);
  EXPECT_EQ(runs(), 2);
  EXPECT_EQ((*client)->Do("GET", "/api/v1/nodes")->status, 200);
  EXPECT_EQ(runs(), 2);

  // An expired credential is renewed before it is sent.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  WriteFile(dir + "/expiry", "2020-01-01T00:00:00Z");
  api.AllowToken("renewed-token");
  WriteFile(dir + "/token", "renewed-token");
  kube::ExecCredentialSource source(*cfg->exec, "{}");
  EXPECT_EQ(source.Get(), "renewed-token");
  EXPECT_EQ(source.runs(), 1);
  EXPECT_EQ(source.Get(), "renewed-token");  // expired, but within the second
  EXPECT_EQ(source.runs(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  WriteFile(dir + "/token", "newer-token");
  EXPECT_EQ(source.Get(), "newer-token");
  EXPECT_EQ(source.runs(), 2);
}

// A plugin that fails leaves the client without a token: the request goes
// out unauthenticated and gets the server's 401, nothing crashes.
TEST(ExecPluginTest, FailingPluginGivesUnauthenticatedRequests) {
  FakeApiServer api(Pki(), kToken);
  api.Start();
  const std::string dir = TempDir();
  WriteFile(dir + "/plugin", "#!/bin/sh\nexit 1\n", true);
  const std::string path = dir + "/config";
  WriteFile(path, ExecKubeconfig(api.port(), dir + "/plugin", dir));
  auto cfg = kube::LoadKubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto client = kube::KubeHttpClient::Create(*cfg, {});
  ASSERT_TRUE(client.ok());
  auto r = (*client)->Do("GET", "/api/v1/nodes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 401);
}

}  // namespace
}  // namespace gpusched::testing
