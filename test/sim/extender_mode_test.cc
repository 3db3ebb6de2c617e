// End-to-end mode: the fgd protocol against a real `serve` stack (HttpServer,
// extender routes, ExtenderService, ClusterState loaded from the List JSON the
// simulator writes) on an ephemeral loopback port must give exactly the
// in-process gpusched-extender results. Also the client codec's round trip
// and the HTTP client's keep-alive and reconnect.
#include "scheduler/sim/extender_mode.h"

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "gpusched/core/cluster_state.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/util/strings.h"
#include "gtest/gtest.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/extender_client_codec.h"
#include "scheduler/http/client.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/http/server.h"
#include "scheduler/sim/fgd_protocol.h"
#include "scheduler/sim/inputs.h"
#include "scheduler/sim/sim_policy.h"

namespace gpusched::sim {
namespace {

// A serve stack on 127.0.0.1:<ephemeral> over the cluster in `list_json`.
class LoopbackServer {
 public:
  LoopbackServer(std::string list_json, const SchedulerConfig& config,
                 std::chrono::seconds idle_timeout = std::chrono::seconds(30)) {
    codec::RequestDecoder decoder;
    auto objs = decoder.DecodeClusterList(list_json);
    EXPECT_TRUE(objs.ok()) << objs.status();
    state_ = std::make_unique<ClusterState>(config.topology_templates);
    state_->Reset(objs->nodes, objs->pods);
    state_->Commit();
    auto fw = policy::Framework::Create(config.scoring);
    EXPECT_TRUE(fw.ok());
    service_ = std::make_unique<ExtenderService>(
        state_.get(), std::shared_ptr<const policy::Framework>(std::move(*fw)));
    service_->SetReady(true);
    http::ServerOptions opt;
    opt.port = 0;
    opt.threads = 1;
    opt.idle_timeout = idle_timeout;
    server_ = std::make_unique<http::HttpServer>(opt, &router_, &metrics_);
    http::RouteDeps deps;
    deps.service = service_.get();
    deps.metrics = &metrics_;
    http::AddExtenderRoutes(router_, deps);
    EXPECT_TRUE(server_->Listen().ok());
    thread_ = std::thread([this] { server_->Run(); });
  }
  ~LoopbackServer() {
    server_->Shutdown();
    thread_.join();
  }
  std::string url() const { return StrCat("http://127.0.0.1:", server_->port(), "/scheduler"); }
  ClusterState& state() { return *state_; }

 private:
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
  Metrics metrics_;
  http::Router router_;
  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
};

// The shipped topology templates with the default serve pipeline
// (GpuTopology + GpuPacking; end-to-end mode rejects fragmentation scoring).
SchedulerConfig TestConfig() {
  auto cfg = codec::LoadConfigFile(StrCat(GPUSCHED_SOURCE_DIR, "/config/scheduler-policy.json"));
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  SchedulerConfig config;
  if (cfg.ok()) config.topology_templates = cfg->topology_templates;
  return config;
}

// A seeded mix: CPU-only, shared (fractional), whole 1/2/4/8-GPU pods, some
// pinned to a model, CPU-heavy ones so NodeResourcesFit matters.
std::vector<PodRequest> SmallTrace(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int k) { return static_cast<int>(Uniform(rng, k)); };
  std::vector<PodRequest> pods;
  for (int i = 0; i < n; ++i) {
    PodRequest p;
    p.ns = "default";
    p.name = StrCat("pod-", i);
    p.uid = p.name;
    p.cpu_milli = 1000 * (1 + pick(24));
    p.memory_mib = 1024 * (1 + pick(64));
    switch (pick(8)) {
      case 0:
        p.gpu.count = 0;
        p.gpu.milli_per_gpu = 0;
        break;
      case 1:
      case 2:
        p.gpu.count = 1;
        p.gpu.milli_per_gpu = 100 * (1 + pick(9));
        break;
      case 3:
        p.gpu.count = 2;
        break;
      case 4:
        p.gpu.count = 4;
        break;
      case 5:
        p.gpu.count = 8;
        p.cpu_milli = 64000;
        break;
      default:
        p.gpu.count = 1;
        break;
    }
    if (p.gpu.count > 0 && pick(4) == 0) {
      p.gpu.models = pick(2) == 0 ? std::vector<std::string>{"Tesla-T4"}
                                  : std::vector<std::string>{"A100", "V100"};
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

TEST(ExtenderCodec, PodAndNodeRoundTrip) {
  PodRequest p;
  p.ns = "team-a";
  p.name = "x";
  p.uid = "u-1";
  p.priority = 7;
  p.cpu_milli = 1500;
  p.memory_mib = 3072;
  p.gpu.count = 1;
  p.gpu.milli_per_gpu = 300;
  p.gpu.min_memory_mib = 8192;
  p.gpu.models = {"A100", "H100"};
  p.gpu.topology = TopologyMode::kNone;
  std::string body = codec::EncodePodObject(p);
  codec::RequestDecoder d;
  auto back = d.DecodePodObject(body);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Key(), "team-a/x");
  EXPECT_EQ(back->uid, "u-1");
  EXPECT_EQ(back->priority, 7);
  EXPECT_EQ(back->cpu_milli, 1500);
  EXPECT_EQ(back->memory_mib, 3072);
  EXPECT_EQ(back->gpu.count, 1);
  EXPECT_EQ(back->gpu.milli_per_gpu, 300);
  EXPECT_EQ(back->gpu.min_memory_mib, 8192);
  EXPECT_EQ(back->gpu.models, p.gpu.models);
  EXPECT_EQ(back->gpu.topology, TopologyMode::kNone);
  EXPECT_FALSE(back->HoldsGpus());

  NodeSpec n;
  n.name = "n0";
  n.product = "Tesla-V100-SXM2-32GB";
  n.gpu_memory_mib = 32768;
  n.gpu_count = 4;
  n.gpu_allocatable = 3;
  n.cpu_milli = 96000;
  n.memory_mib = 393216;
  n.unschedulable = true;
  n.topology_codes = {{"X", "NV1"}, {"NV1", "X"}};
  std::string list = codec::EncodeClusterList({n});
  auto objs = d.DecodeClusterList(list);
  ASSERT_TRUE(objs.ok()) << objs.status();
  ASSERT_EQ(objs->nodes.size(), 1u);
  const NodeSpec& m = objs->nodes[0];
  EXPECT_EQ(m.name, "n0");
  EXPECT_EQ(m.product, n.product);
  EXPECT_EQ(m.gpu_memory_mib, 32768);
  EXPECT_EQ(m.gpu_count, 4);
  EXPECT_EQ(m.gpu_allocatable, 3);
  EXPECT_EQ(m.cpu_milli, 96000);
  EXPECT_EQ(m.memory_mib, 393216);
  EXPECT_TRUE(m.unschedulable);
  EXPECT_EQ(m.topology_codes, n.topology_codes);

  std::string args = codec::EncodeExtenderArgs(p, {"a", "b"});
  auto ea = d.DecodeExtenderArgs(args);
  ASSERT_TRUE(ea.ok()) << ea.status();
  EXPECT_TRUE(ea->cache_mode);
  EXPECT_EQ(ea->node_names, (std::vector<std::string_view>{"a", "b"}));
  std::string bind = codec::EncodeBindingArgs({"x", "team-a", "u-1", "a"});
  auto ba = d.DecodeBindingArgs(bind);
  ASSERT_TRUE(ba.ok());
  EXPECT_EQ(ba->pod_uid, "u-1");
  EXPECT_EQ(ba->node, "a");

  auto fr = codec::DecodeFilterReply(R"({"Nodes":null,"NodeNames":["a"],"FailedNodes":{"b":"why"},)"
                                     R"("FailedAndUnresolvableNodes":{},"Error":""})");
  ASSERT_TRUE(fr.ok());
  EXPECT_EQ(fr->node_names, std::vector<std::string>{"a"});
  ASSERT_EQ(fr->failed.size(), 1u);
  EXPECT_EQ(fr->failed[0].second, "why");
  auto pr = codec::DecodePrioritizeReply(R"([{"Host":"a","Score":7}])");
  ASSERT_TRUE(pr.ok());
  EXPECT_EQ((*pr)[0].second, 7);
  EXPECT_EQ(*codec::DecodeBindingReply(R"({"Error":"no"})"), "no");
  EXPECT_FALSE(codec::DecodeFilterReply("{").ok());
}

TEST(ExtenderMode, SameResultsAsInProcess) {
  const auto t0 = std::chrono::steady_clock::now();
  const SchedulerConfig config = TestConfig();
  auto nodes = GenerateNodes("dgx-a100:3,dgx1-v100:3,t4x4:6,a10x1:4");
  ASSERT_TRUE(nodes.ok());
  auto cluster = SimCluster::Create(*nodes, config.topology_templates);
  ASSERT_TRUE(cluster.ok());
  const std::vector<PodRequest> trace = SmallTrace(120, 11);
  FgdOptions o;
  o.policy = "gpusched-extender";
  o.seed = 42;
  o.tune = 1.3;

  auto local = RunFgd(*cluster, trace, config, o);
  ASSERT_TRUE(local.ok()) << local.status();

  // The server's source shows every pod the run will send (as the API
  // server would), never taking one from a request.
  const std::vector<PodRequest> workload = ExtenderWorkload(*cluster, trace, o);
  ASSERT_FALSE(workload.empty());
  LoopbackServer server(ClusterListJson(*nodes, workload), config);
  auto client = http::HttpClient::Create(server.url());
  ASSERT_TRUE(client.ok()) << client.status();
  int calls = 0;
  ExtenderTransport transport = [&](const std::string& path, const std::string& body) {
    ++calls;
    return (*client)->PostJson(path, body);
  };
  auto remote = RunFgdViaExtender(*cluster, trace, config, o, transport);
  ASSERT_TRUE(remote.ok()) << remote.status();

  EXPECT_GT(calls, 100);
  EXPECT_EQ((*client)->connections(), 1);  // keep-alive throughout
  EXPECT_GT(local->failed, 0);             // the run reaches a full cluster
  EXPECT_LT(local->failed, local->pods);
  EXPECT_EQ(remote->pods, local->pods);
  EXPECT_EQ(remote->failed, local->failed);
  EXPECT_EQ(remote->placements, local->placements);
  EXPECT_EQ(remote->decision_hash, local->decision_hash);
  EXPECT_EQ(remote->unallocated_at_100, local->unallocated_at_100);
  EXPECT_EQ(remote->allocated_at_130, local->allocated_at_130);
  ASSERT_EQ(remote->curve.size(), local->curve.size());
  for (size_t i = 0; i < local->curve.size(); ++i) {
    EXPECT_EQ(remote->curve[i].arrived_pct, local->curve[i].arrived_pct);
    EXPECT_EQ(remote->curve[i].allocated_pct, local->curve[i].allocated_pct);
    EXPECT_EQ(remote->curve[i].frag_total_pct, local->curve[i].frag_total_pct);
    EXPECT_EQ(remote->curve[i].frag_idle_pct, local->curve[i].frag_idle_pct);
  }

  // The server really holds the devices: its allocated milli equals what
  // the placed GPU pods asked for.
  std::mt19937_64 rng(o.seed);
  const std::vector<PodRequest> pods = PrepareWorkload(trace, cluster->total_gpus(), o.tune, rng);
  ASSERT_EQ(pods.size(), local->placements.size());
  int64_t want = 0;
  for (size_t k = 0; k < pods.size(); ++k) {
    if (local->placements[k] >= 0) want += pods[k].gpu.total_milli();
  }
  int64_t held = 0;
  for (const auto& n : server.state().Snapshot()->nodes()) {
    for (uint16_t m : n->used_milli) held += m;
  }
  EXPECT_EQ(held, want);
  EXPECT_GT(held, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST(ExtenderMode, RejectsOtherPoliciesAndFragmentationScoring) {
  SchedulerConfig config;
  auto nodes = GenerateNodes("t4x4:1");
  ASSERT_TRUE(nodes.ok());
  auto cluster = SimCluster::Create(*nodes, {});
  ASSERT_TRUE(cluster.ok());
  ExtenderTransport never = [](const std::string&, const std::string&) {
    return absl::StatusOr<std::string>(absl::InternalError("not called"));
  };
  FgdOptions o;
  o.policy = "bestfit";
  EXPECT_TRUE(absl::IsInvalidArgument(
      RunFgdViaExtender(*cluster, SmallTrace(4, 1), config, o, never).status()));
  o.policy = "gpusched-extender";
  config.scoring.scorers.push_back({"Fgd", 1, {}});
  EXPECT_TRUE(absl::IsInvalidArgument(
      RunFgdViaExtender(*cluster, SmallTrace(4, 1), config, o, never).status()));
}

TEST(HttpClient, ReconnectsAfterServerClosesIdleConnection) {
  auto nodes = GenerateNodes("t4x4:1");
  ASSERT_TRUE(nodes.ok());
  LoopbackServer server(ClusterListJson(*nodes), SchedulerConfig{}, std::chrono::seconds(1));
  auto client = http::HttpClient::Create(server.url());
  ASSERT_TRUE(client.ok());
  const std::string bind = codec::EncodeBindingArgs({"nobody", "default", "", "t4x4-0000"});
  auto first = (*client)->PostJson("/bind", bind);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_NE(*codec::DecodeBindingReply(*first), "");  // unknown pod: an Error, over HTTP 200
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  auto second = (*client)->PostJson("/bind", bind);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*client)->connections(), 2);
  auto missing = (*client)->Post("/no/such/path", "{}");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_FALSE((*client)->PostJson("/no/such/path", "{}").ok());
  EXPECT_FALSE(http::HttpClient::Create("https://x:1").ok());
  EXPECT_FALSE(http::HttpClient::Create("http://x:notaport/p").ok());
}

}  // namespace
}  // namespace gpusched::sim
