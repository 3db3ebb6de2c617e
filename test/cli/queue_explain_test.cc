// `gpusched queue --explain`: the built binary reads one pod's page from a
// running `gpusched serve` over loopback and prints it (golden text with
// the clock's times masked, and the page itself with -o json); a pod the
// extender does not know, a bound pod and an unreachable extender each give
// a message and exit 1. The same over HTTPS with mutual TLS, where a wrong
// CA or a missing client certificate is refused with a clear error. Also
// DecodePodExplanation on malformed pages.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/codec/queue_codec.h"
#include "test/kube/test_pki.h"
#include "test/testing/child_process.h"

namespace gpusched::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A node of `gpus` GPUs as GPU Feature Discovery labels it.
Json GpuNode(const std::string& name, const std::string& product, int gpus, int memory_mib) {
  const std::string n = std::to_string(gpus);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", product},
              {"nvidia.com/gpu.memory", std::to_string(memory_mib)},
              {"nvidia.com/gpu.count", n}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", n}, {"cpu", "64"}, {"pods", "110"}}}}}};
}

// A pending pod of team-a asking for `gpus` GPUs.
Json GpuPod(const std::string& name, int gpus, const std::string& created, Json annotations) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"uid", "u-" + name},
            {"creationTimestamp", created},
            {"annotations", std::move(annotations)}}},
          {"spec",
           {{"containers",
             Json::array(
                 {{{"name", "c"},
                   {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}},
          {"status", {{"phase", "Pending"}}}};
}

// h0: 8 H100s, all held by team-a/train (activeDeadlineSeconds 7200, created
// long ago: past its estimate, so taken to end a quarter of it, 30 min, from
// now). t0: 4 T4s,
// free. team-a may hold 8 GPUs; team-a/next asks 8 H100s for 1 h; team-a/
// later, created after it, asks 4 and declares a runtime gpusched refuses.
Json Cluster() {
  Json train =
      GpuPod("train", 8, "2026-01-01T00:00:00Z", {{"gpusched.io/gpu-ids", "0,1,2,3,4,5,6,7"}});
  train["spec"]["nodeName"] = "h0";
  train["spec"]["activeDeadlineSeconds"] = 7200;
  train["status"]["phase"] = "Running";
  return {
      {"apiVersion", "v1"},
      {"kind", "List"},
      {"items",
       {GpuNode("h0", "NVIDIA-H100-80GB-HBM3", 8, 81559), GpuNode("t0", "Tesla-T4", 4, 15360),
        train,
        GpuPod("next", 8, "2026-01-01T00:01:00Z",
               {{"gpusched.io/gpu-model", "H100"}, {"gpusched.io/expected-runtime", "1h"}}),
        GpuPod("later", 4, "2026-01-01T00:02:00Z", {{"gpusched.io/expected-runtime", "soon"}})}}};
}

// What a reader works out by hand (times masked as <T>): `next` heads
// team-a's queue; the quota holds it (train has all 8 of team-a's GPUs); it
// starts when train ends, on h0 (the only H100 node); T4s would not help (the
// quota), nor fewer GPUs (h0 is full).
constexpr char kGolden[] = R"(Pod:              team-a/next
Queue position:   1
Why it waits:     gpusched: namespace team-a at its limit: holds 8 of limit 8 GPUs (8 guaranteed); pod needs 8; position 1 in queue
Estimated start:  <T> (when 1 running or earlier pods end (0 of them on the default runtime 1h))
Runtime estimate: 1h0m0s, from annotation (gpusched.io/expected-runtime 1h)
What if:
  if Tesla-T4 were allowed: it would still wait: its namespace's quota does not admit it now
  with fewer GPUs: it would not fit on any node now
  after team-a/train ends (estimated <T>): it would have room on h0
)";

std::string MaskTimes(const std::string& text) {
  static const std::regex kTime(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  return std::regex_replace(text, kTime, "<T>");
}

// One `gpusched serve` for the suite (its first estimate refresh comes 2 s
// after the start).
class QueueExplainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    StartServe({}, [] {
      return Http(port_, "GET", "/debug/pods/team-a/next").body.find("runtimeEstimateSource") !=
             std::string::npos;
    });
  }
  // Starts serve on Cluster() with `flags` added; waits (up to 30 s) until
  // `ready` says the first estimate refresh has run.
  static void StartServe(const std::vector<std::string>& flags,
                         const std::function<bool()>& ready) {
    if (!fs::exists(GPUSCHED_BINARY)) return;
    std::string tmpl = (fs::temp_directory_path() / "gpusched-explain-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Json config = Json::parse(
        std::ifstream(std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json"));
    config["quotas"] = {
        {"default", {{"guaranteed", 0}, {"limit", 0}}},
        {"namespaces",
         {{"team-a",
           {{"guaranteed", 8}, {"limit", 8}, {"attainedService", {{"enabled", false}}}}}}}};
    std::ofstream(dir_ / "policy.json") << config.dump(2);
    std::ofstream(dir_ / "cluster.json") << Cluster().dump();
    port_ = FreePort();
    std::vector<std::string> args = {"serve",
                                     "--config",
                                     (dir_ / "policy.json").string(),
                                     "--cluster",
                                     (dir_ / "cluster.json").string(),
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(port_)};
    args.insert(args.end(), flags.begin(), flags.end());
    serve_ = new Child(GPUSCHED_BINARY, args, (dir_ / "serve.log").string());
    ready_ = WaitFor(ready, std::chrono::milliseconds(30000));
  }
  static void TearDownTestSuite() {
    delete serve_;
    serve_ = nullptr;
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (serve_ == nullptr) GTEST_SKIP() << "gpusched binary not built";
    ASSERT_TRUE(ready_) << ReadAll((dir_ / "serve.log").string());
  }
  // Runs `gpusched queue ARGS`; returns the exit code, stdout+stderr in *out.
  static int Queue(std::vector<std::string> args, std::string* out) {
    const std::string log = (dir_ / ("queue-" + std::to_string(++runs_) + ".log")).string();
    args.insert(args.begin(), "queue");
    Child c(GPUSCHED_BINARY, args, log);
    const int code = c.Wait();
    *out = ReadAll(log);
    return code;
  }
  static std::string Extender() { return "http://127.0.0.1:" + std::to_string(port_); }

  static inline fs::path dir_;
  static inline uint16_t port_ = 0;
  static inline int runs_ = 0;
  static inline bool ready_ = false;
  static inline Child* serve_ = nullptr;
};

TEST_F(QueueExplainTest, PrintsThePendingPodsPageAsText) {
  std::string out;
  ASSERT_EQ(Queue({"--explain", "team-a/next", "--extender", Extender()}, &out), 0) << out;
  EXPECT_EQ(MaskTimes(out), kGolden) << out;
  // The estimated start is when train is taken to end: 30 min after the
  // refresh (a quarter of its 2 h deadline, which it is past).
  std::smatch m;
  const std::string line = out.substr(out.find("Estimated start:"));
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  absl::Time start;
  std::string err;
  ASSERT_TRUE(absl::ParseTime(absl::RFC3339_sec, m.str(), &start, &err)) << err;
  const double ahead = absl::ToDoubleSeconds(start - absl::Now());
  EXPECT_GT(ahead, 1800 - 120) << out;
  EXPECT_LE(ahead, 1800) << out;
}

// The URL kube-scheduler is given, as the server's banner prints it (the
// verbs' prefix /scheduler), finds the same page.
TEST_F(QueueExplainTest, TheVerbsUrlFromTheBannerWorksToo) {
  for (const std::string& url : {Extender() + "/scheduler", Extender() + "/scheduler/"}) {
    std::string out;
    ASSERT_EQ(Queue({"--explain", "team-a/next", "--extender", url}, &out), 0)
        << url << ": " << out;
    EXPECT_EQ(MaskTimes(out), kGolden) << out;
  }
}

TEST_F(QueueExplainTest, PodWithDashNAndJsonOutput) {
  std::string text, json;
  ASSERT_EQ(Queue({"--explain", "next", "-n", "team-a", "--extender", Extender()}, &text), 0)
      << text;
  EXPECT_EQ(MaskTimes(text), kGolden) << text;
  ASSERT_EQ(Queue({"--explain", "team-a/next", "-o", "json", "--extender", Extender()}, &json), 0)
      << json;
  const Json page = Json::parse(json);
  EXPECT_EQ(page["state"], "pending");
  EXPECT_EQ(page["runtimeEstimateSource"], "annotation") << json;
  EXPECT_FALSE(page["whatIf"].empty()) << json;
}

TEST_F(QueueExplainTest, LaterPodListsTheRefusedRuntimeInput) {
  std::string out;
  ASSERT_EQ(Queue({"--explain", "team-a/later", "--extender", Extender()}, &out), 0) << out;
  EXPECT_NE(out.find("Runtime estimate: none (no estimate: no usable activeDeadlineSeconds"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  not used: gpusched.io/expected-runtime: 'soon': expected a number"),
            std::string::npos)
      << out;
}

TEST_F(QueueExplainTest, UnknownBoundOrUnreachableExitsOneWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--explain", "team-a/nobody", "--extender", Extender()},
       "pod team-a/nobody is unknown to gpusched"},
      {{"--explain", "team-a/train", "--extender", Extender()},
       "pod team-a/train is not pending: it is bound on node h0"},
      {{"--explain", "team-a/next", "--extender", "http://127.0.0.1:" + std::to_string(FreePort())},
       "GET /debug/pods/team-a/next: "},
      // A server without the page is not taken for "no such pod".
      {{"--explain", "team-a/next", "--extender", Extender() + "/elsewhere"},
       "GET /debug/pods/team-a/next: HTTP 404"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(Queue(c.args, &out), 1) << c.args[1] << ": " << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << out;
  }
  std::string out;
  EXPECT_EQ(Queue({"--explain", "a/b/c", "--extender", Extender()}, &out), 2) << out;
  EXPECT_NE(out.find("--explain: expected NAMESPACE/POD or POD"), std::string::npos) << out;
  EXPECT_EQ(Queue({"--explain", "team-a/next", "-o", "yaml", "--extender", Extender()}, &out), 2);
  EXPECT_NE(out.find("-o/--output: expected text or json"), std::string::npos) << out;
}

TEST(DecodePodExplanation, MalformedPagesNameTheField) {
  struct Case {
    const char* page;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"not json", "not a JSON object"},
           {"[1]", "not a JSON object"},
           {R"({"state":7})", "state: expected a string"},
           {R"({"position":"1"})", "position: expected an integer"},
           {R"({"whatIf":"x"})", "whatIf: expected an array of strings"},
           {R"({"whatIf":[1]})", "whatIf: expected an array of strings"},
           {R"({"runtimeEstimateSeconds":1.5})", "runtimeEstimateSeconds: expected an integer"},
           {R"({"preemption":[{"node":3}]})", "preemption[].node: expected a string"},
           {R"({"preemption":[{"node":"h","victims":[2]}]})", "preemption[].victims"},
       }) {
    auto r = codec::DecodePodExplanation(c.page);
    ASSERT_FALSE(r.ok()) << c.page;
    EXPECT_NE(std::string(r.status().message()).find(c.error), std::string::npos)
        << c.page << ": " << r.status().message();
  }
  auto ok = codec::DecodePodExplanation(
      R"({"namespace":"a","name":"p","state":"pending","position":3,"estimatedStart":null,
          "whatIf":["w"],"preemption":[{"node":"h","victims":["a/v"]}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->position, 3);
  EXPECT_EQ(ok->estimated_start, "");
  EXPECT_EQ(ok->what_if, std::vector<std::string>{"w"});
  ASSERT_EQ(ok->preemption.size(), 1u);
  EXPECT_EQ(ok->preemption[0].victims, std::vector<std::string>{"a/v"});
}

// The same page over HTTPS with mutual TLS: `serve --tls-cert --tls-key
// --tls-client-ca` and `queue --explain --extender https://...` with the
// extender's CA and a client certificate (a throw-away PKI).
class QueueExplainTlsTest : public QueueExplainTest {
 protected:
  static void SetUpTestSuite() {
    const TestPki pki = MakeTestPki();
    pem_dir_ = fs::temp_directory_path() / ("gpusched-explain-pki-" + std::to_string(getpid()));
    fs::create_directories(pem_dir_);
    for (const auto& [name, text] :
         {std::pair{"ca.pem", pki.ca_pem}, std::pair{"other-ca.pem", pki.other_ca_pem},
          std::pair{"server.pem", pki.server_cert_pem},
          std::pair{"server-key.pem", pki.server_key_pem},
          std::pair{"client.pem", pki.client_cert_pem},
          std::pair{"client-key.pem", pki.client_key_pem}}) {
      std::ofstream(pem_dir_ / name) << text;
    }
    StartServe({"--tls-cert", Pem("server.pem"), "--tls-key", Pem("server-key.pem"),
                "--tls-client-ca", Pem("ca.pem")},
               [] {
                 std::string out;
                 const bool done = Queue(Explain("ca.pem", true), &out) == 0 &&
                                   out.find("from annotation") != std::string::npos;
                 if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(250));
                 return done;
               });
  }
  static void TearDownTestSuite() {
    QueueExplainTest::TearDownTestSuite();
    std::error_code ec;
    fs::remove_all(pem_dir_, ec);
  }
  static std::string Pem(const std::string& name) { return (pem_dir_ / name).string(); }
  // `queue --explain team-a/next` over https, trusting `ca`, with or
  // without the client certificate.
  static std::vector<std::string> Explain(const std::string& ca, bool client_cert) {
    std::vector<std::string> args = {"--explain", "team-a/next", "--extender",
                                     "https://127.0.0.1:" + std::to_string(port_)};
    if (!ca.empty()) args.insert(args.end(), {"--extender-ca", Pem(ca)});
    if (client_cert) {
      args.insert(args.end(),
                  {"--extender-cert", Pem("client.pem"), "--extender-key", Pem("client-key.pem")});
    }
    return args;
  }

  static inline fs::path pem_dir_;
};

TEST_F(QueueExplainTlsTest, ReadsThePageOverMutualTls) {
  std::string out;
  ASSERT_EQ(Queue(Explain("ca.pem", true), &out), 0) << out;
  EXPECT_EQ(MaskTimes(out), kGolden) << out;
}

TEST_F(QueueExplainTlsTest, AWrongCaOrNoClientCertificateIsRefusedWithAClearError) {
  struct Case {
    std::string name;
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"another CA", Explain("other-ca.pem", true),
       "TLS handshake with the extender: certificate verify failed"},
      {"another CA names the flag", Explain("other-ca.pem", true),
       "the extender's certificate is not signed by the --extender-ca CA"},
      {"the system's CAs", Explain("", true), "not signed by a CA this system trusts"},
      {"no client certificate", Explain("ca.pem", false),
       "certificate required (the extender requires a client certificate: --extender-cert and "
       "--extender-key)"},
      {"a CA file that is not there", Explain("missing.pem", true), "--extender-ca: cannot read"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(Queue(c.args, &out), 1) << c.name << ": " << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << c.name << ": " << out;
    EXPECT_EQ(out.find("Pod:"), std::string::npos) << c.name << ": " << out;
  }
  std::vector<std::string> half = Explain("ca.pem", false);
  half.insert(half.end(), {"--extender-cert", Pem("client.pem")});
  std::string out;
  EXPECT_EQ(Queue(half, &out), 1) << out;
  EXPECT_NE(out.find("--extender-cert and --extender-key go together"), std::string::npos) << out;
}

}  // namespace
}  // namespace gpusched::testing
